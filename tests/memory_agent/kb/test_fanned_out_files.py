"""A fanned-out KB (`kb/<type>/<xx>/<id>.md`, ADR 0031) as the daemon's change-driven scan and
a full scan see it: a file written by hand into its subfolder is found, one in the wrong
subfolder is reported with its right place, a flat file and a fanned-out one with the same id
follow the duplicate rule (the flat one owns it); the lookups find either place. Real git, the
real daemon.

(`home` is kb/conftest.py's.)"""

from __future__ import annotations

from memory_agent.client import DaemonClient
from memory_agent.kb.entries import shard
from memory_agent.kb.files import entry_file, entry_of, kb_claims, name_taken
from tests.memory_agent.kb.git_by_hand import add
from tests.memory_agent.kb.test_hand_written_files import (
    _entry,
    _full_rescan,
    _kb_problems,
    _search_ids,
    _until,
)


def test_the_place_of_an_entry_in_either_layout():
    assert shard("use-uv-for-locking") == "58"  # the first byte of its SHA-256, on any machine
    assert entry_of("note/use-uv-for-locking.md") == ("note", "use-uv-for-locking")
    assert entry_of("note/58/use-uv-for-locking.md") == ("note", "use-uv-for-locking")
    assert entry_of("note/ab/use-uv-for-locking.md") is None  # not its subfolder
    assert entry_of("note/58/x/use-uv-for-locking.md") is None
    assert entry_of("notes/use-uv-for-locking.md") is None
    assert entry_of("note/.hidden.md") is None


def test_hand_written_files_of_a_fanned_out_kb_follow_the_scans_rules(home):
    kb = home / "kb"
    client = DaemonClient(home)
    assert client.admin("fanout?confirm=1")["status"] == "fanned_out"
    add(home, "Warm the daemon", "The first add loads the model.")  # the daemon watches now
    # a new file by hand in its subfolder (the folder exists: the watcher watches it)
    owned = "tidal-ledger-cobalt"
    folder = kb / "note" / shard(owned)
    folder.mkdir(exist_ok=True)
    (folder / f"{owned}.md").write_text(
        _entry(owned, "note", "Tidal ledger cobalt", "Tidal ledger cobalt saffron lantern.")
    )
    _until(lambda: owned in _search_ids(home, "tidal ledger cobalt saffron"), "not found")
    assert client.call_tool("memory_get", {"id": owned})["path"] == str(folder / f"{owned}.md")
    # a file in another id's subfolder
    stray = "amber-quorum-fjord"
    wrong = "00" if shard(stray) != "00" else "01"
    (kb / "note" / wrong).mkdir(exist_ok=True)
    (kb / "note" / wrong / f"{stray}.md").write_text(
        _entry(stray, "note", "Amber quorum fjord", "Amber quorum fjord.")
    )
    right = f"note/{shard(stray)}/{stray}.md"
    _until(lambda: any(right in p for p in _full_rescan(home)[0]), "stray not reported")
    assert stray not in _search_ids(home, "amber quorum fjord")
    # the same id flat and fanned out: the flat file owns it (the order of `kb_claims`)
    flat = kb / "note" / f"{owned}.md"
    flat.write_text(_entry(owned, "note", "Tidal ledger flat", "The flat copy."))
    _until(lambda: any("already used by" in p for p in _kb_problems(home)), "no duplicate")
    assert client.call_tool("memory_get", {"id": owned})["path"] == str(flat)
    assert entry_file(kb, owned) == flat and name_taken(kb, owned)
    owner, problems = kb_claims(kb, owned)
    assert owner == flat and list(problems) == [str(folder / f"{owned}.md")]
    problems, _ = _full_rescan(home)
    assert sorted(_kb_problems(home)) == sorted(p for p in problems if stray not in p)
