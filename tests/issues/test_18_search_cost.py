"""Issue 18, round 4: less work per search, the same answers. The edges a search expands are
memoised per index state across searches (they must follow every write), and only the hits
shown read their texts (their snippets must be the ones a full read gives). Through the real
daemon and CLI (MiniLM), real git, a real index; the fixture is issue 13's."""

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.recall import reads
from ragcore import search as relevance
from tests.issues.test_13_multihop import cli, home  # noqa: F401 - the fixture

QUERY = "how does the nightly ledger reconciliation work"


def test_a_write_gives_the_next_search_its_new_edges(home, shared_cache):  # noqa: F811
    """One daemon answers both searches, so the second is served from the memo the first
    filled - unless the write started a new one. A new entry naming the root's rare name
    (and nothing of the query) is reached through that name only after it is written."""
    _, before = cli(home, shared_cache, "search", QUERY, "--explain", "--limit", "8")
    assert before["hits"][0]["id"] == "ledger-root"
    assert any(
        h["why"].get("via") == "entity 'petrova' from ledger-root" for h in before["hits"]
    )  # the memo holds the root's edges now
    _, added = cli(
        home,
        shared_cache,
        "add",
        "--type",
        "fact",
        "--title",
        "Boiler room access",
        "--body",
        "The boiler room key hangs in the caretaker's office; Petrova has a spare.",
    )
    new_id = added["id"]
    _, after = cli(home, shared_cache, "search", QUERY, "--explain", "--limit", "8")
    hits = {h["id"]: h for h in after["hits"]}
    assert new_id in hits, [h["id"] for h in after["hits"]]
    assert hits[new_id]["why"].get("via") == "entity 'petrova' from ledger-root"
    assert hits[new_id]["why"]["signals"]["links"] > 0


def test_the_hits_shown_have_the_snippets_a_full_read_gives(home, shared_cache):  # noqa: F811
    DaemonClient(home).stop(wait=True)  # one process holds a home's index: this one, now
    memory = Memory(config.load({"home": str(home)}))
    try:
        with memory.session():
            memory.refresh()
            for query in (QUERY, "tomato beds", "pear trees in February", "bicycles"):
                hits = reads.search(memory, query, limit=3)["hits"]
                full = {
                    h.doc_id: h.snippet
                    for h in relevance(memory.index.snapshot(), query, limit=30).hits
                }
                shown = [h for h in hits if h["id"] in full]
                assert shown, query
                for h in shown:
                    assert h["snippet"] and h["snippet"] == full[h["id"]], (query, h["id"])
    finally:
        memory.close()
