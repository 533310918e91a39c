"""A daemon's search in two stages - the query embedded on the caller's thread (queries at once
share a model run), ranked on one of a few ranker threads. The same answers as in one stage, the
errors as before, and a file written by hand is found by the search that follows. Real MiniLM, a
real index of the demo KB, real git, in one process (every search of the daemon takes this path, so
its own tests cover the wiring). (Issue 18, round 5.)"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memory_agent import config
from memory_agent.errors import Invalid
from memory_agent.index.memory import Memory
from memory_agent.recall.injection import recall
from memory_agent.recall.reads import run_search
from ragcore import Embedding
from ragcore import search as relevance

QUERIES = [
    "how do we run database migrations",
    "which python version do we use",
    "tests are flaky when run in parallel",
    "why did we choose this design",
    "deploy to staging",
]


@pytest.fixture
def memory(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", "2026-12-01T09:00:00Z")
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm")
    memory = Memory(config.load({"home": str(home)}), resident=True)
    memory.require_home()
    memory.start_watching()  # as the daemon does
    with memory.session():
        memory.refresh()
    yield memory
    memory.close()


def _hits(found) -> list[tuple[str, float, dict]]:
    return [(h["id"], h["score"], h["why"]["signals"]) for h in found.reply["hits"]]


def test_ten_searches_at_once_on_two_rankers_answer_as_one_stage_does(memory):
    """Fails if the ranking stage answers from another query's vector, another state, or
    drops the signals (every hit's id, score and signals are compared)."""
    alone = {q: _hits(run_search(memory, q, limit=5, explain=True)) for q in QUERIES}
    assert all(alone.values())
    rankers = ThreadPoolExecutor(2, thread_name_prefix="test-rank")
    got: dict[tuple[int, str], list] = {}
    errors: list[BaseException] = []

    def client(c: int) -> None:
        try:
            for q in QUERIES[c % 5 :] + QUERIES[: c % 5]:
                got[c, q] = _hits(run_search(memory, q, limit=5, explain=True, ranker=rankers))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    rankers.shutdown()
    assert not errors, errors
    assert len(got) == 50
    for (c, q), hits in got.items():
        assert hits == alone[q], (c, q)


def test_a_bad_search_is_refused_before_either_stage(memory):
    rankers = ThreadPoolExecutor(1)
    try:
        with pytest.raises(Invalid, match="query: empty"):
            run_search(memory, "   ", ranker=rankers)
        with pytest.raises(Invalid, match="limit"):
            run_search(memory, "migrations", limit=0, ranker=rankers)
    finally:
        rankers.shutdown()


def test_a_file_written_by_hand_is_found_by_the_next_two_stage_search(memory):
    """The first stage refreshes the index with what the watcher saw change; the second ranks
    the state it left. Fails if the ranking reads a snapshot taken before."""
    path = memory.kb_dir / "fact" / "zephyrine-quota.md"
    path.write_text(
        "---\nid: zephyrine-quota\ntitle: The zephyrine quota\ntype: fact\nstatus: active\n"
        "created: 2026-11-30T10:00:00Z\n---\n\nThe zephyrine quota is nine crates a week.\n"
    )
    rankers = ThreadPoolExecutor(2)
    try:
        found = run_search(memory, "zephyrine quota crates", limit=3, ranker=rankers)
    finally:
        rankers.shutdown()
    assert found.reply["hits"][0]["id"] == "zephyrine-quota", found.reply["hits"]


def _dense(result) -> dict[str, float]:
    """{document: its dense channel's score} of a ragcore result."""
    return {h.doc_id: h.channels["dense"].score for h in result.hits if "dense" in h.channels}


def test_the_search_ranks_by_the_vector_it_is_given(memory):
    """ragcore's `query_embedding`: the dense channel follows the vector given (another
    query's here), and a vector of another width is not trusted (the query is embedded)."""
    snapshot = memory.index.snapshot()
    embedder = memory.index.embedder
    a, b = QUERIES[0], QUERIES[2]
    of_a = _dense(relevance(snapshot, a, limit=10))
    of_b = _dense(relevance(snapshot, b, limit=10))
    given_b = _dense(relevance(snapshot, a, limit=10, query_embedding=embedder.embed_query(b)))
    assert given_b != of_a
    shared = set(given_b) & set(of_b)
    assert shared and all(abs(given_b[d] - of_b[d]) < 1e-5 for d in shared)
    wrong = Embedding(dense=embedder.embed_query(b).dense[:100])
    assert _dense(relevance(snapshot, a, limit=10, query_embedding=wrong)) == of_a


def test_the_recall_hook_in_two_stages_injects_what_one_stage_does(memory):
    """`injection.recall` shares the stages (`recall.stages`): the same context and ids.
    Fails if its ranking answers from another vector or another state."""
    prompt = "How do we run the database migrations before a deploy?"
    alone = recall(memory, prompt, None, project=None)
    assert alone.ids
    rankers = ThreadPoolExecutor(2)
    try:
        staged = [recall(memory, prompt, None, ranker=rankers) for _ in range(3)]
    finally:
        rankers.shutdown()
    for r in staged:
        assert (r.text, r.ids) == (alone.text, alone.ids)
