"""The same collection on a Qdrant server (issue 30): with a `url`, the store creates the
collection of `QdrantStore.schema` (HNSW over int8 vectors in RAM, float32 originals on disk
for the rescoring) with a keyword payload index per filter field, and searches with the int8
candidates rescored exactly - checked on a recording client, since no server runs here; the
same code on qdrant-client's local engine answers exact searches (tests/ragcore/
test_read_model.py runs every filter through it). A server that is down, or refuses the key,
is named with the setting to fix (a closed port; a real HTTP stand-in answering 401)."""

import hashlib
import http.server
import socket
import threading

import numpy as np
import pytest

import ragcore
from memory_agent.errors import describe
from ragcore import Document, Index
from ragcore.errors import IndexError_, ServerUnavailable
from ragcore.store import FILTER_FIELDS, NAME_FILE, Filter, QdrantStore, collection_for

qdrant_client = pytest.importorskip("qdrant_client", reason="the server path needs the extra")
models = qdrant_client.models


class Recording:
    """Stands in for `QdrantClient(url=...)`: records what the store asks of a server."""

    calls: list = []

    def __init__(self, **kwargs):
        Recording.calls = [("connect", kwargs)]
        self._exists = False

    def collection_exists(self, name):
        return self._exists

    def create_collection(self, name, **kwargs):
        self._exists = True
        Recording.calls.append(("create_collection", kwargs))

    def create_payload_index(self, name, field, field_schema):
        Recording.calls.append(("create_payload_index", field, field_schema))

    def query_points(self, name, **kwargs):
        Recording.calls.append(("query_points", kwargs))
        return type("Reply", (), {"points": []})()

    def close(self):
        pass


def test_a_server_collection_is_int8_hnsw_with_rescoring_and_a_payload_index_per_field(
    monkeypatch,
):
    monkeypatch.setattr(qdrant_client, "QdrantClient", Recording)
    store = QdrantStore(url="http://qdrant.example:6333", collection="memory-agent-x-gen-000001")
    store.create(384)
    (_, created), *indexes = Recording.calls[1:]
    dense = created["vectors_config"]["dense"]
    assert (dense.size, dense.distance, dense.on_disk) == (384, models.Distance.COSINE, True)
    assert (created["hnsw_config"].m, created["hnsw_config"].ef_construct) == (16, 128)
    scalar = created["quantization_config"].scalar
    assert scalar.type == models.ScalarType.INT8 and scalar.always_ram
    assert [i[1] for i in indexes] == list(FILTER_FIELDS)
    assert {i[2] for i in indexes} == {models.PayloadSchemaType.KEYWORD}
    store.search(np.ones(384, dtype=np.float32), 100, Filter(statuses=("active",)))
    _, query = Recording.calls[-1]
    assert query["search_params"].quantization.rescore is True
    assert query["search_params"].quantization.oversampling >= 2
    assert query["search_params"].hnsw_ef >= 100
    assert query["query_filter"] is not None  # pushed down


def test_the_local_engine_takes_the_same_schema_and_answers_exactly(tmp_path):
    store = QdrantStore(location=str(tmp_path / "q"), collection="c")
    store.create(8)
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((50, 8)).astype(np.float32)
    store.upsert([(f"d{i}#0", v, {"status": "active"}) for i, v in enumerate(vectors)])
    q = vectors[7] / np.linalg.norm(vectors[7])
    got = [c for c, _ in store.search(q, 5)]
    norms = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert got == [f"d{i}#0" for i in np.argsort(-(norms @ q))[:5]]
    store.close()


def test_a_servers_api_key_comes_from_the_environment_and_reaches_the_client(tmp_path, monkeypatch):
    from memory_agent import config
    from memory_agent.index.memory import Memory

    monkeypatch.setattr(qdrant_client, "QdrantClient", Recording)
    monkeypatch.setenv("MEMORY_AGENT_QDRANT_API_KEY", "qk-test-1234")
    cfg = config.load({"home": str(tmp_path / "h"), "qdrant_url": "https://q.example:6333"})
    index = Memory(cfg).index  # made, not opened: no model is loaded
    index._server_for("gen-000001")
    assert Recording.calls[0] == (
        "connect",
        {"url": "https://q.example:6333", "api_key": "qk-test-1234"},
    )
    local = config.load({"home": str(tmp_path / "h"), "qdrant_url": str(tmp_path / "q")})
    assert config.qdrant_of(local) == {"qdrant_location": str(tmp_path / "q")}
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "config.toml").write_text('qdrant_api_key = "qk-in-a-file"\n')
    with pytest.raises(Exception, match="never read from config.toml") as refused:
        config.load({"home": str(tmp_path / "k")})  # a key is never read from a file
    assert "MEMORY_AGENT_QDRANT_API_KEY" in refused.value.fix
    assert "qk-in-a-file" not in str(refused.value) + refused.value.fix


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on leaving: nothing listens there


def test_a_server_that_is_down_is_named_with_the_fix_and_a_build_leaves_nothing(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"
    store = QdrantStore(url=url, collection="c")
    with pytest.raises(ServerUnavailable, match="could not be reached") as caught:
        store.search(np.ones(8, dtype=np.float32), 10)
    assert url in caught.value.message
    info = describe(caught.value)
    assert info.code == "index" and "unset qdrant_url" in info.fix and url in info.fix

    index = Index(tmp_path / "index", ragcore.CachedEmbedder(_Flat(), None), qdrant_url=url)
    with pytest.raises(ServerUnavailable):
        index.build([Document(id="a", title="A", body="text", meta={"status": "active"})])
    assert not index.exists()  # no generation went live


class _Refusing(http.server.BaseHTTPRequestHandler):
    def _refuse(self):
        body = b'{"status": {"error": "Must provide an API key or an Authorization bearer token"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _refuse

    def log_message(self, *args):
        pass


def test_a_server_that_refuses_the_key_says_which_setting_to_fix():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        store = QdrantStore(url=url, collection="c", api_key="not-the-key")
        with pytest.raises(ServerUnavailable, match="refused the API key") as caught:
            store.exists()
        assert "MEMORY_AGENT_QDRANT_API_KEY" in caught.value.fix
    finally:
        server.shutdown()
        server.server_close()


class _Flat:
    model_id, dim, has_sparse = "flat-8", 8, False

    def embed_documents(self, texts):
        return [ragcore.Embedding(np.full(8, 8**-0.5, dtype=np.float32)) for _ in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_two_homes_whose_index_folders_share_a_path_never_share_a_collection(tmp_path):
    """Two machines of one user name keep their index at the same path: on one server their
    generations' collections must differ (they did: the name was the path's hash and the
    generation's number). Each home here is made at the same path in turn, on its own local
    engine; the collection each made is read back from that engine."""
    root = tmp_path / "index"
    made = []
    for machine in ("laptop", "desktop"):
        engine = tmp_path / f"engine-of-{machine}"
        index = Index(root, ragcore.CachedEmbedder(_Flat(), None), qdrant_location=str(engine))
        index.build([Document(id="a", title="A", body="text", meta={"status": "active"})])
        generation = index.current()
        kept = (root / generation / NAME_FILE).read_text().strip()
        index.close()
        client = qdrant_client.QdrantClient(path=str(engine / generation))
        names = [c.name for c in client.get_collections().collections]
        client.close()
        assert names == [kept]
        made.append((generation, kept))
        root.rename(tmp_path / f"index-of-{machine}")
    (generation, first), (again, second) = made
    assert generation == again == "gen-000001"
    assert first != second


def test_a_generation_made_before_the_kept_name_keeps_its_old_name(tmp_path):
    root = tmp_path / "index"
    (root / "gen-000003").mkdir(parents=True)
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:8]
    assert collection_for(root, "gen-000003") == f"memory-agent-{tag}-gen-000003"


@pytest.mark.parametrize(
    "url", ["http://admin:s3cret-key@127.0.0.1:6333", "http://127.0.0.1:6333/?api-key=s3cret-key"]
)
def test_a_server_url_holding_a_credential_is_refused_without_repeating_it(url):
    with pytest.raises(IndexError_) as caught:
        QdrantStore(url=url, collection="c")
    assert "s3cret" not in caught.value.message and "s3cret" not in caught.value.fix
    assert "MEMORY_AGENT_QDRANT_API_KEY" in caught.value.fix
