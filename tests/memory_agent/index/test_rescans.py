"""A read path that stays fast as the memory grows: a search with nothing changed reads and hashes
nothing, and without a change signal the resident memory rescans at most once a second. The fallback
without inotify can be chosen (MEMORY_AGENT_NO_INOTIFY=1, read when the scanner starts watching): an
edit is then found by the rescan, and an acknowledged write is searchable at once. (Issue 10, and
issue 18 item 17.)"""

import itertools
import os
from pathlib import Path

from memory_agent.recall import reads
from ragcore import Document
from tests.memory_agent.helpers import make_memory


def _entry(kb, n, text):
    path = kb / "note" / f"bulk-{n:04d}.md"
    path.write_text(
        f"---\nid: bulk-{n:04d}\ntitle: Bulk note {n}\ntype: note\nstatus: active\n"
        f"created: 2026-11-01T00:00:00Z\n---\n{text}\n"
    )
    return path


def test_a_search_with_nothing_changed_reads_and_hashes_nothing(
    env_home, minilm_model, monkeypatch
):
    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(embedder="minilm")
    (memory.kb_dir / "note").mkdir(exist_ok=True)
    for n in range(300):
        _entry(memory.kb_dir, n, f"Routine maintenance note number {n} about the build cache.")
    assert memory.start_watching()  # as the daemon does
    memory.require_home()
    reads.search(memory, "build cache maintenance")  # a full scan picks the 300 files up once
    hashes = itertools.count()
    original_hash = Document.content_hash
    monkeypatch.setattr(
        Document, "content_hash", property(lambda d: (next(hashes), original_hash.fget(d))[1])
    )
    stats = itertools.count()
    original_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda p, **kw: (next(stats), original_stat(p, **kw))[1])
    files_read = memory.scanner.reads
    for _ in range(5):
        reads.search(memory, "build cache maintenance")
    assert memory.scanner.reads == files_read  # no file read
    assert next(hashes) == 0  # no document hashed
    assert next(stats) <= 5 * 6  # a handful per search (repos.json, the index pointer), not 300
    # an editor's change is in the very next search
    path = memory.kb_dir / "note" / "bulk-0123.md"
    path.write_text(path.read_text().replace("build cache", "flux capacitor"))
    hits = reads.search(memory, "flux capacitor", limit=3)["hits"]
    assert hits[0]["id"] == "bulk-0123" and "flux capacitor" in hits[0]["snippet"]
    assert memory.scanner.reads == files_read + 1  # exactly that file
    path.unlink()
    assert "bulk-0123" not in {h["id"] for h in reads.search(memory, "flux capacitor")["hits"]}
    memory.close()


def test_without_a_change_signal_the_resident_memory_rescans_at_most_once_a_second(
    env_home, minilm_model, monkeypatch
):
    from memory_agent.index import memory as memory_mod

    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(demo=True, embedder="minilm")
    memory.require_home()
    reads.search(memory, "lock dependencies")
    full = memory.scanner.last_full
    # within the window no scan (the window made long: a slow first search on a loaded machine
    # must not make the second one fall due)
    monkeypatch.setattr(memory_mod, "RESCAN_EVERY_S", 3600.0)
    reads.search(memory, "lock dependencies")
    assert memory.scanner.last_full == full
    monkeypatch.setattr(memory_mod, "RESCAN_EVERY_S", 0.0)
    reads.search(memory, "lock dependencies")
    assert memory.scanner.last_full > full
    memory.close()


def test_no_inotify_switch_falls_back_to_rescans(env_home, minilm_model, monkeypatch):
    from memory_agent.index import memory as memory_mod

    monkeypatch.setenv("MEMORY_AGENT_NO_INOTIFY", "1")  # a setting like any other
    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(demo=True, embedder="minilm")
    memory.require_home()
    assert memory.start_watching() is False and memory.scanner.watcher is None
    reads.search(memory, "lock dependencies")
    monkeypatch.setattr(memory_mod, "RESCAN_EVERY_S", 0.0)  # the rescan is due at once
    _entry(env_home / "kb", 123, "the flux capacitor needs 1.21 gigawatts")
    hits = reads.search(memory, "flux capacitor gigawatts")["hits"]
    assert hits[0]["id"] == "bulk-0123"
    memory.close()
    monkeypatch.setenv("MEMORY_AGENT_NO_INOTIFY", "0")
    again = make_memory(env_home, minilm_model, resident=True)
    assert again.start_watching() is (os.uname().sysname == "Linux")
    again.close()


def test_without_inotify_an_acknowledged_write_is_searchable_at_once_and_dedup_sees_it(
    env_home, minilm_model, monkeypatch
):
    """A writer's refresh is not rate-limited: the entry a reply names is in the generation
    it names, and an identical add right after it is a duplicate (review of issue 18)."""
    from memory_agent.write.gateway import Gateway

    monkeypatch.setenv("MEMORY_AGENT_NO_INOTIFY", "1")
    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(demo=True, embedder="minilm")
    memory.require_home()
    assert memory.start_watching() is False
    gateway = Gateway(memory)
    body = "The zebra quokka migration needs the staging flag set before the backfill runs."
    first = gateway.add("Zebra quokka migration needs the staging flag", body, type="pitfall")
    assert first["status"] == "created"
    hits = reads.search(memory, "zebra quokka migration staging flag")["hits"]  # within the second
    assert hits and hits[0]["id"] == first["id"]
    again = gateway.add("Zebra quokka migration needs the staging flag", body, type="pitfall")
    assert again["status"] == "duplicate" and again["duplicate_of"] == first["id"]
    memory.close()
