"""Issue 18, item 17: the fallback without inotify can be chosen (to measure what it costs, or
on a filesystem inotify misreads): MEMORY_AGENT_NO_INOTIFY=1, read when the daemon's scanner
starts watching. The resident memory then finds an edit by its rescan, as on macOS."""

import os

from memory_agent.recall import reads
from tests.issues.test_10_read_model import _entry
from tests.memory_agent.helpers import make_memory


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
