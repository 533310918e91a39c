"""The `openai` embedder (`ragcore.endpoint`) against a stand-in OpenAI-compatible server on
127.0.0.1 (`benchmarks/embedding_server.py`): URLs, batches, normalisation, the dimension, the
model id, retries, timeouts, errors, the key - and an index that never mixes two models."""

from __future__ import annotations

import hashlib
import json
import socket
import time

import numpy as np
import pytest

from benchmarks.embedding_server import EmbeddingServer
from ragcore import (
    CachedEmbedder,
    EmbedderError,
    Embedding,
    EmbeddingCache,
    EndpointError,
    Index,
    IndexError_,
    make_embedder,
    search,
)
from ragcore.endpoint import STATE_FILE, EndpointEmbedder, endpoint_url

KEY = "sk-test-3f9c2a7e5d1b"


class Hashed:
    """Deterministic vectors of any dimension (not unit length): a server's model, cheaply."""

    def __init__(self, dim: int = 8):
        self.dim = dim

    def embed_documents(self, texts):
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "little")
            out.append(Embedding(np.random.default_rng(seed).normal(size=self.dim) * 5.0))
        return out


@pytest.fixture
def server():
    s = EmbeddingServer(Hashed(), model="toy", aliases=("toy-2",))
    s.start()
    yield s
    s.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "given",
    [
        "http://localhost:11434",
        "http://localhost:11434/",
        "http://localhost:11434/v1",
        "http://localhost:11434/v1/",
        "http://LOCALHOST:11434/v1/embeddings",
    ],
)
def test_a_base_url_with_or_without_v1_posts_to_one_endpoint(given):
    assert endpoint_url(given) == ("http://localhost:11434/v1/embeddings", "localhost:11434")


def test_a_path_before_v1_is_kept_and_the_default_port_is_named():
    assert endpoint_url("https://gw.example/tei/v1") == (
        "https://gw.example:443/tei/v1/embeddings",
        "gw.example:443/tei",
    )
    assert endpoint_url("http://[::1]:8080")[1] == "[::1]:8080"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "localhost:11434",
        "ftp://host/v1",
        "http://user:sk-secret@host/v1",
        "http://host/v1?api_key=sk-secret",
        "http://host/v1#frag",
    ],
)
def test_a_url_that_is_not_a_bare_http_base_is_refused_without_echoing_a_credential(bad):
    with pytest.raises(EmbedderError) as err:
        endpoint_url(bad)
    assert "sk-secret" not in str(err.value) + err.value.fix


def test_batches_are_bounded_the_answer_is_reordered_and_normalised(server):
    model = EndpointEmbedder(server.url, "toy", batch_size=2)
    texts = ["one", "two", "three", "four", "five"]
    got = model.embed_documents(texts)
    assert [r["batch"] for r in server.requests] == [2, 2, 1]  # never more than batch_size
    expected = Hashed().embed_documents(texts)
    for e, want in zip(got, expected, strict=True):  # the server sent them last to first
        assert e.dense.dtype == np.float32 and e.dense.shape == (8,)
        assert np.linalg.norm(e.dense) == pytest.approx(1.0, abs=1e-6)  # it did not normalise
        assert np.allclose(e.dense, want.dense / np.linalg.norm(want.dense), atol=1e-6)
    assert model.embed_query("three").dense == pytest.approx(got[2].dense, abs=1e-6)


def test_the_dimension_comes_from_the_first_answer_and_is_remembered(server, tmp_path):
    model = EndpointEmbedder(server.url, "toy", state_dir=tmp_path)
    assert not model.loaded and server.requests == []  # nothing asked at construction
    assert model.dim == 8 and len(server.requests) == 1  # one probe
    port = server.url.split(":")[2].split("/")[0]
    assert model.model_id == f"openai:127.0.0.1:{port}/toy/dim8"
    assert json.loads((tmp_path / STATE_FILE).read_text()) == {f"127.0.0.1:{port} toy": 8}
    server.stop()  # a later process knows the id without asking a server that is down
    again = EndpointEmbedder(server.url, "toy", state_dir=tmp_path)
    assert again.model_id == model.model_id and not again.loaded


def test_the_model_id_names_the_host_the_port_the_model_and_the_dimension(server):
    a = EndpointEmbedder(server.url, "toy")
    b = EndpointEmbedder(server.url, "toy-2")  # the same vectors, under another name
    c = EndpointEmbedder(server.url.replace("127.0.0.1", "localhost"), "toy")
    ids = {a.model_id, b.model_id, c.model_id}
    assert len(ids) == 3 and all(i.endswith("/dim8") for i in ids)


def test_an_answer_of_another_dimension_is_refused_once_the_id_was_handed_out(server, tmp_path):
    model = EndpointEmbedder(server.url, "toy", state_dir=tmp_path)
    old_id = model.model_id  # an index checked it
    server.embedder = Hashed(dim=12)  # the model behind the name changed
    with pytest.raises(EndpointError) as err:
        model.embed_documents(["a text"])
    assert err.value.kind == "dimension" and "12-d" in err.value.message
    assert "rebuild" in err.value.fix
    assert model.model_id == old_id  # this process never mixes: its id stays
    fresh = EndpointEmbedder(server.url, "toy", state_dir=tmp_path)  # the next process
    assert fresh.model_id.endswith("/dim12") and fresh.model_id != old_id


def test_a_dimension_seen_before_the_id_was_handed_out_is_simply_taken(server, tmp_path):
    EndpointEmbedder(server.url, "toy", state_dir=tmp_path).load()  # remembers 8
    server.embedder = Hashed(dim=12)
    model = EndpointEmbedder(server.url, "toy", state_dir=tmp_path)
    model.load()  # e.g. `init` asking the server: nothing was built with 8 in this process
    assert model.model_id.endswith("/dim12")


def test_429_and_5xx_are_retried_with_backoff_then_answered(server):
    server.fail_next = [503, 429, 502]
    model = EndpointEmbedder(server.url, "toy", backoff=0.05)
    t = time.perf_counter()
    assert model.embed_query("retried").dense.shape == (8,)
    assert time.perf_counter() - t >= 0.05 + 0.1 + 0.2  # doubled each time
    assert len(server.requests) == 4


def test_past_the_retries_a_5xx_is_an_error_naming_the_url_and_what_to_check(server):
    server.fail_next = [503] * 10
    model = EndpointEmbedder(server.url, "toy", backoff=0.01, retries=2)
    with pytest.raises(EndpointError) as err:
        model.embed_documents(["x"])
    e = err.value
    assert e.kind == "unreachable" and e.transient and e.code == "model"
    assert "HTTP 503 after 3 attempt(s)" in e.message and server.url in e.message
    assert "stand-in failure 503" in e.message  # the server's own words
    assert len(server.requests) == 3


def test_a_server_that_is_not_there_is_retried_then_named_with_the_fix():
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = EndpointEmbedder(url, "nomic-embed-text", backoff=0.01)
    with pytest.raises(EndpointError) as err:
        model.embed_query("anyone?")
    e = err.value
    assert e.kind == "unreachable" and "after 4 attempt(s)" in e.message
    assert "ConnectionRefusedError" in e.message and f"{url}/embeddings" in e.message
    assert "is running" in e.fix and f"{url}/models" in e.fix and "ollama pull" in e.fix
    with pytest.raises(EndpointError):  # the probe asks once, without retries
        t = time.perf_counter()
        model.load()
    assert time.perf_counter() - t < 0.5 and not model.loaded


def test_a_server_slower_than_the_timeout_is_a_timeout_error(server):
    server.delay = 1.0
    model = EndpointEmbedder(server.url, "toy", timeout=0.2, retries=1, backoff=0.01)
    with pytest.raises(EndpointError) as err:
        model.embed_query("slow")
    assert err.value.kind == "unreachable" and "no answer within 0.2 s" in err.value.message


def test_the_key_is_sent_as_bearer_and_appears_in_no_error_or_repr(server):
    server.key = KEY
    with pytest.raises(EndpointError) as err:
        EndpointEmbedder(server.url, "toy").load()
    assert err.value.kind == "auth" and "(none was sent)" in err.value.message
    wrong = EndpointEmbedder(server.url, "toy", api_key=KEY + "-old")
    with pytest.raises(EndpointError) as err:
        wrong.load()
    assert KEY not in err.value.message + err.value.fix + repr(wrong)
    assert "Authorization: Bearer" in err.value.fix
    right = EndpointEmbedder(server.url, "toy", api_key=KEY)
    right.load()
    assert server.requests[-1]["key_ok"] is True
    assert KEY not in repr(right) + right.model_id


def test_an_unknown_model_or_path_is_a_404_naming_both(server):
    with pytest.raises(EndpointError) as err:
        EndpointEmbedder(server.url, "nope").load()
    assert err.value.kind == "not_found" and "model 'nope' not found" in err.value.message
    assert "/models" in err.value.fix and not err.value.transient


def test_an_answer_that_is_not_embeddings_is_refused(server):
    class Short(Hashed):
        def embed_documents(self, texts):
            return super().embed_documents(texts)[:-1]

    server.embedder = Short()
    with pytest.raises(EndpointError) as err:
        EndpointEmbedder(server.url, "toy").embed_documents(["a", "b"])
    assert err.value.kind == "reply" and "1 embeddings for 2 texts" in err.value.message


def test_the_embedder_is_found_by_name_with_its_options(server, tmp_path):
    model = make_embedder(
        "openai", work_dir=tmp_path, options={"url": server.url, "model": "toy", "batch_size": 3}
    )
    assert isinstance(model, EndpointEmbedder) and model.batch_size == 3
    assert model.remote and not model.has_sparse
    cached = CachedEmbedder(model, EmbeddingCache(tmp_path / "cache"))
    assert server.requests == [] and cached.remote  # wrapping it asks nothing
    assert cached.model_id.endswith("/toy/dim8")


def test_a_changed_model_name_asks_for_a_rebuild_and_never_mixes(server, tmp_path, notes):
    cache = EmbeddingCache(tmp_path / "cache")
    first = CachedEmbedder(EndpointEmbedder(server.url, "toy"), cache)
    Index(tmp_path / "index", first).build(notes)
    index = Index(tmp_path / "index", CachedEmbedder(EndpointEmbedder(server.url, "toy-2"), cache))
    with pytest.raises(IndexError_) as err:
        search(index, "qdrant storage path", limit=3)
    assert "toy/dim8" in err.value.message and "toy-2/dim8" in err.value.message
    assert "rebuild" in err.value.fix
    # the cache keeps each model's vectors apart: the rebuild embeds every chunk again
    assert cache.count(first.model_id) > 0 and cache.count(index.embedder.model_id) == 0
    report = index.build(notes)
    assert cache.count(index.embedder.model_id) == cache.count(first.model_id)
    assert report.generation == "gen-000002" and index.check().embedder == index.embedder.model_id
    assert search(index, "qdrant storage path", limit=3).hits
