"""Files written by hand in the KB, as the daemon's change-driven scan sees them: a copy under an id
already used, a symbolic link, a file whose folder disagrees with its type - the same rules as a
full scan, for search and `memory_get` alike; and an entry with five thousand links read only up to
the bound. Real git, the real daemon. (Issue 18, items 5 and 6.)

(`home` is kb/conftest.py's.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.errors import ToolCallError
from memory_agent.index.links import link_graph
from memory_agent.index.memory import Memory
from memory_agent.kb.entries import MAX_LINKS_READ
from tests.memory_agent.kb.git_by_hand import _stop, add


def _entry(entry_id: str, entry_type: str, title: str, body: str) -> str:
    return (
        f"---\nid: {entry_id}\ntitle: {title}\ntype: {entry_type}\nstatus: active\n"
        f"created: 2026-11-01T10:00:00Z\n---\n{body}\n"
    )


def _search_ids(home: Path, query: str) -> list[str]:
    reply = DaemonClient(home).call_tool("memory_search", {"query": query, "limit": 10})
    return [h["id"] for h in reply["hits"]]


def _kb_problems(home: Path) -> list[str]:
    status = DaemonClient(home).call_tool("memory_index_status", {})
    (kb,) = [s for s in status["sources"] if s["label"] == "kb"]
    return kb.get("problems", [])


def _until(check, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():  # each call is a sync: the daemon reads the kernel's change events
        assert time.monotonic() < deadline, what


def _full_rescan(home: Path) -> tuple[list[str], dict]:
    m = Memory(config.load({"home": str(home)}))
    try:
        m.scanner.full(lambda _: None, lambda: (), [])
        return m.scanner.sources({})["kb"].problems, m.scanner
    finally:
        m.close()


# Before: the change-driven scan let the copy take over the id in search; deleting the copy
# dropped the original from search while status said consistent; a removed symlink stayed in
# status; memory_get served a misplaced file as a writable entry while status rejected it.
def test_the_change_driven_scan_applies_the_full_scans_rules(home):
    kb = home / "kb"
    client = DaemonClient(home)
    add(home, "Warm the daemon", "The first add loads the model.")  # the daemon watches now
    original = kb / "decision" / "use-uv-for-locking.md"
    assert "use-uv-for-locking" in _search_ids(home, "uv lock file")
    # a copy with the same id in another type folder
    copy = kb / "note" / "use-uv-for-locking.md"
    copy.write_text(
        _entry(
            "use-uv-for-locking",
            "note",
            "Zebra quartz velvet",
            "Zebra quartz velvet marmalade harpsichord.",
        )
    )
    _until(lambda: any("already used by" in p for p in _kb_problems(home)), "no duplicate problem")
    assert client.call_tool("memory_get", {"id": "use-uv-for-locking"})["path"] == str(original)
    hits = client.call_tool("memory_search", {"query": "zebra quartz velvet marmalade"})["hits"]
    assert all(h["title"] != "Zebra quartz velvet" for h in hits)
    problems, _ = _full_rescan(home)
    assert _kb_problems(home) == problems
    copy.unlink()
    _until(lambda: not any("already used by" in p for p in _kb_problems(home)), "stale duplicate")
    assert "use-uv-for-locking" in _search_ids(home, "uv lock file")
    status = client.call_tool("memory_index_status", {})
    assert status["consistent"] and status["entries"] > 40
    # a symbolic link, added and removed
    link = kb / "note" / "linked-entry.md"
    link.symlink_to(original)
    _until(lambda: any("linked-entry.md" in p for p in _kb_problems(home)), "link not reported")
    link.unlink()
    _until(lambda: not any("linked-entry.md" in p for p in _kb_problems(home)), "link stays")
    # a file whose folder disagrees with its type
    misplaced = kb / "note" / "misplaced-decision.md"
    misplaced.write_text(
        _entry(
            "misplaced-decision",
            "decision",
            "Misplaced decision",
            "Kept in the note folder though it says decision.",
        )
    )
    _until(lambda: any("misplaced-decision" in p for p in _kb_problems(home)), "misplaced file")
    with pytest.raises(ToolCallError) as caught:
        client.call_tool("memory_get", {"id": "misplaced-decision"})
    assert "decision/misplaced-decision.md" in caught.value.message
    assert "misplaced-decision" not in _search_ids(home, "misplaced decision note folder")
    problems, _ = _full_rescan(home)
    assert _kb_problems(home) == problems


# Before: every link of a hand-written file was read into the graph the ranking walks (5,000
# edges for one entry, all listed by an explained search).
def test_an_entry_with_five_thousand_links_is_read_only_up_to_the_bound(home):
    kb = home / "kb"
    add(home, "Warm the daemon", "The first add loads the model.")
    targets = sorted(p.stem for p in kb.rglob("*.md") if ".git" not in p.parts)
    # 5,000 links: 1,000 [[wikilinks]] in the body (its 100,000 characters allow no more of
    # these), 4,000 typed links in the frontmatter; many to existing entries, many repeated
    wikilinks = " ".join(f"[[{targets[n % len(targets)]}]] [[missing-{n}]]" for n in range(500))
    typed = ", ".join(targets[n % len(targets)] for n in range(4000))
    (kb / "note" / "hub-of-links.md").write_text(
        "---\nid: hub-of-links\ntitle: Hub of links about locking\ntype: note\nstatus: active\n"
        f"created: 2026-11-01T10:00:00Z\nlinks: {{references: [{typed}]}}\n---\n"
        f"Hub of links about locking and uv.\n\n{wikilinks}\n"
    )
    reply = DaemonClient(home).call_tool(
        "memory_search", {"query": "hub of links about locking", "explain": True, "limit": 5}
    )
    (hub,) = [h for h in reply["hits"] if h["id"] == "hub-of-links"]
    assert len(hub["why"]["edges"]) <= MAX_LINKS_READ
    m = Memory(config.load({"home": str(home)}), embedder=None)
    _stop(home)  # the index is the daemon's while it runs
    try:
        with m.session():
            graph = link_graph(m.index)
        assert len(graph["hub-of-links"]) <= MAX_LINKS_READ
        assert all(len(edges) <= len(targets) + MAX_LINKS_READ for edges in graph.values())
    finally:
        m.close()
