"""Recall across hops: typed links validated by the gateway, an entity layer kept in the index
generation, two-hop expansion with its path explained; the edges a search expands memoised per index
state (and following every write), and only the hits shown read their texts. Through the real CLI
and daemon (MiniLM), real git, a real index. (Issue 13, and issue 18 round 4.)"""

import json
import os
import signal
import subprocess
import sys

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.recall import policy, reads
from ragcore import extract_entities
from ragcore import search as relevance
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import daemon_pids, env_for


def _entry(kb, entry_id, title, body, links=None):
    path = kb / "fact" / f"{entry_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = ""
    if links:
        extra = "links:\n" + "".join(
            f"  {kind}: [{', '.join(ids)}]\n" for kind, ids in links.items()
        )
    path.write_text(
        f"---\nid: {entry_id}\ntitle: '{title}'\ntype: fact\nstatus: active\n"
        f"created: 2026-11-01T09:00:00Z\n{extra}---\n{body}\n"
    )


# The query matches only `ledger-root`. Two entries are equally far from it (the same text
# but for one word); one is linked by its author, the other shares a rare name with it.
ENTRIES = {
    "ledger-root": (
        "The ledger reconciliation runs nightly",
        "The nightly ledger reconciliation compares card settlements with bank statements. "
        "Petrova owns it.",
        {"references": ["runbook-authored"], "contradicts": ["old-claim"]},
    ),
    "runbook-authored": (
        "Greenhouse watering schedule",
        "Water the tomato beds on Tuesdays and the herbs on Fridays.",
        None,
    ),
    "shares-a-name": (
        "Greenhouse watering schedule too",
        "Water the tomato beds on Tuesdays and the herbs on Fridays, Petrova said.",
        None,
    ),
    "second-hop": (
        "Orchard pruning calendar",
        "Prune the apple trees in February. Ask Okonkwo-Vale about the pear trees.",
        None,
    ),
    "old-claim": (
        "Bicycle storage rules",
        "Bicycles go in the basement rack, never in the corridor.",
        None,
    ),
}


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", "2026-12-01T09:00:00Z")  # a month after `created`
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    kb = home / "kb"
    for entry_id, (title, body, links) in ENTRIES.items():
        _entry(kb, entry_id, title, body, links)
    # the runbook names the second hop's rare name: root -references-> runbook -entity-> hop
    runbook = kb / "fact" / "runbook-authored.md"
    runbook.write_text(runbook.read_text().replace("Fridays.", "Fridays. Okonkwo-Vale checks."))
    git(kb, "add", "-A")
    git(kb, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "entries")
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")  # the model loaded and the index built
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def cli(home, shared_cache, *args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        env=env_for(home, shared_cache),
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr or proc.stdout)
    return proc.returncode, json.loads(proc.stdout)


def test_entities_are_names_places_codes_and_dates():
    found = extract_entities(
        "Caroline, 1:56 pm on 8 May, 2023: When Caroline met Dr Petrova in New York about "
        "INC-0412, the EKS nodes and asyncpg.Pool were fine."
    )
    assert found[:1] == ["2023-05-08"]
    assert {"caroline", "new york", "inc-0412", "eks", "asyncpg.pool"} <= set(found)
    assert "when" not in found and "the" not in found
    assert {"张伟", "上海"} <= set(
        extract_entities("张伟 昨天在上海的会议上说，2023年5月8日上线。")
    )
    assert "2023-05-08" in extract_entities("2023年5月8日上线")


def test_authored_link_outranks_entity_two_hops_explained_contradicts_never_boosts(
    home, shared_cache
):
    _, reply = cli(
        home,
        shared_cache,
        "search",
        "how does the nightly ledger reconciliation work",
        "--explain",
        "--limit",
        "5",
    )
    hits = {h["id"]: h for h in reply["hits"]}
    order = [h["id"] for h in reply["hits"]]
    assert order[0] == "ledger-root"
    root = hits["ledger-root"]
    assert {"kind": "references", "id": "runbook-authored"} in root["why"]["edges"]
    assert {"kind": "contradicts", "id": "old-claim"} in root["why"]["edges"]
    authored, inferred = hits["runbook-authored"], hits["shares-a-name"]
    # the authored link outranks the inferred co-occurrence (the texts are equally far)
    assert authored["why"]["signals"]["links"] > inferred["why"]["signals"]["links"] > 0
    assert order.index("runbook-authored") < order.index("shares-a-name")
    assert authored["why"]["via"] == "references from ledger-root"
    assert inferred["why"]["via"] == "entity 'petrova' from ledger-root"
    # neither is lifted past the hit it came from
    assert root["score"] > authored["score"] and root["score"] > inferred["score"]
    # two hops: root -references-> runbook -shared 'okonkwo-vale'-> second-hop
    hop = hits["second-hop"]
    assert hop["why"]["via"] == (
        "entity 'okonkwo-vale' from runbook-authored, references from ledger-root"
    )
    assert 0 < hop["why"]["signals"]["links"] < authored["why"]["signals"]["links"]
    # contradicts: shown (above, and by memory_get), never a boost
    assert hits["old-claim"]["why"]["signals"]["links"] == 0
    assert "via" not in hits["old-claim"]["why"]
    _, got = cli(home, shared_cache, "get", "ledger-root")
    assert got["links"] == {"references": ["runbook-authored"], "contradicts": ["old-claim"]}


def test_without_entity_edges_the_inferred_neighbour_gets_nothing(home, shared_cache):
    """The entity signal comes from the entity layer: switched off, it is gone."""
    from memory_agent.recall import reads

    DaemonClient(home).stop(wait=True)  # one process holds a home's index: this one, now
    memory = Memory(config.load({"home": str(home)}))
    saved = policy.EDGE_WEIGHTS["entity"]
    try:
        found = reads.run_search(
            memory, "how does the nightly ledger reconciliation work", explain=True, limit=5
        )
        with_entities = {h["id"]: h for h in found.reply["hits"]}
        policy.EDGE_WEIGHTS["entity"] = 0.0
        found = reads.run_search(
            memory, "how does the nightly ledger reconciliation work", explain=True, limit=5
        )
        without = {h["id"]: h for h in found.reply["hits"]}
    finally:
        policy.EDGE_WEIGHTS["entity"] = saved
        memory.close()
    assert with_entities["shares-a-name"]["why"]["signals"]["links"] > 0
    assert without["shares-a-name"]["why"]["signals"]["links"] == 0
    assert without["runbook-authored"]["why"]["signals"]["links"] > 0


def test_entities_live_in_the_generation_and_are_rebuilt_with_it(home, shared_cache):
    cli(home, shared_cache, "rebuild")
    DaemonClient(home).stop(wait=True)
    memory = Memory(config.load({"home": str(home)}))
    try:
        with memory.session():
            memory.refresh()
            assert memory.index.entity_docs("petrova") == {"ledger-root", "shares-a-name"}
            assert "okonkwo-vale" in memory.index.doc("second-hop").entities
    finally:
        memory.close()
    # never written into the Markdown
    assert (
        "petrova"
        not in (home / "kb" / "fact" / "ledger-root.md").read_text().lower().split("---")[1]
    )


def test_typed_links_are_validated_by_the_gateway(home, shared_cache):
    kb = home / "kb"
    head = git(kb, "rev-parse", "HEAD").strip()
    code, reply = cli(
        home,
        shared_cache,
        "add",
        "--title",
        "Rack layout",
        "--body",
        "Row B.",
        "--link",
        "inspired_by:ledger-root",
        check=False,
    )
    assert code == 2 and reply["error"]["code"] == "invalid"
    assert (
        "inspired_by" in reply["error"]["message"] and "derived_from" in reply["error"]["message"]
    )
    code, reply = cli(
        home,
        shared_cache,
        "add",
        "--title",
        "Rack layout",
        "--body",
        "Row B.",
        "--link",
        "derived_from:no-such-entry",
        check=False,
    )
    assert code == 2 and "no-such-entry" in reply["error"]["message"]
    assert git(kb, "rev-parse", "HEAD").strip() == head  # nothing written
    _, reply = cli(
        home,
        shared_cache,
        "add",
        "--title",
        "Rack layout",
        "--body",
        "Row B.",
        "--link",
        "derived_from:ledger-root",
        "--link",
        "contradicts:old-claim",
    )
    assert reply["status"] == "created"
    text = (kb / "note" / f"{reply['id']}.md").read_text()
    assert "links:\n  contradicts:\n  - old-claim\n  derived_from:\n  - ledger-root\n" in text
    assert git(kb, "show", "--stat", "--format=", "HEAD").count("|") == 1
    # a hand-edited file with a bad link kind is reported, not indexed as valid
    _entry(kb, "hand-edited", "Hand edited", "Body.", {"bogus": ["ledger-root"]})
    _, status = cli(home, shared_cache, "status")
    problems = [p for source in status["sources"] for p in source.get("problems", [])]
    assert any("hand-edited" in p and "bogus" in p for p in problems), status


QUERY = "how does the nightly ledger reconciliation work"


def test_a_write_gives_the_next_search_its_new_edges(home, shared_cache):
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


def test_the_hits_shown_have_the_snippets_a_full_read_gives(home, shared_cache):
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
