"""Index generations: an old snapshot answers unchanged after writes and a rebuild, a write
acknowledged during a rebuild is in the new generation, and a CURRENT that names a missing
generation makes the status inconsistent. (Issues 9 and 18.)"""

from __future__ import annotations

import time

import pytest

from memory_agent.errors import describe
from memory_agent.recall import reads
from ragcore import Document, Index, IndexInconsistent
from tests.memory_agent.helpers import make_memory


def test_an_old_snapshot_answers_unchanged_after_writes_and_a_rebuild(tmp_path, minilm_model):
    """The read model a search took stays whole while writes and a rebuild publish new ones."""
    index = Index(tmp_path / "index", minilm_model)
    docs = [
        Document(f"d{i}", f"Note {i} on the {w} subsystem", f"The {w} subsystem: detail {i}.")
        for i, w in enumerate(["ingest", "billing", "search", "auth", "cache", "queue"] * 5)
    ]
    index.build(docs)
    old = index.snapshot()
    from ragcore import search

    before = [(h.doc_id, round(h.score, 6)) for h in search(old, "billing subsystem").hits]
    ids_before = {d.id for d in old.docs()}
    index.apply(
        [
            Document("d1", "Note 1, rewritten", "Nothing about money any more."),
            Document("new", "Billing subsystem overview", "The billing subsystem, whole."),
        ],
        ["d7", "d13"],
    )
    index.set_stamps({"d2": "stamp"})
    index.build([*docs[:4], Document("later", "Billing later", "Billing, later on.")])
    # the old snapshot is exactly what it was: same documents, same answers
    assert {d.id for d in old.docs()} == ids_before and old.doc(
        "d1"
    ).title == "Note 1 on the billing subsystem"
    assert [(h.doc_id, round(h.score, 6)) for h in search(old, "billing subsystem").hits] == before
    assert old.doc("new") is None and old.doc("d2").stamp is None
    # and the index serves the newest state
    now = {d.id for d in index.snapshot().docs()}
    assert now == {"d0", "d1", "d2", "d3", "later"}
    assert index.snapshot().generation != old.generation


def test_a_write_acknowledged_during_a_rebuild_is_in_the_new_generation(
    env_home, minilm_model, monkeypatch
):
    """The rebuild scans, builds the new generation with no lock held, then switches: a write
    that lands in between is applied to the old generation, and the watcher's event for it is
    used up - the new generation must still hold it (review of issue 18)."""
    import threading

    from memory_agent.write.gateway import Gateway
    from tests.memory_agent.helpers import make_memory

    monkeypatch.setenv("MEMORY_AGENT_FAULT", "pause-rebuild")
    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(demo=True, embedder="minilm")
    memory.require_home()
    memory.start_watching()
    reads.search(memory, "lock dependencies")  # the watches are set
    gateway = Gateway(memory)
    done: dict = {}
    rebuild = threading.Thread(target=lambda: done.update(memory.rebuild()))
    rebuild.start()
    marker = memory.run_dir / "fault-pause-rebuild"
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "the rebuild never reached its pause point"
    added = gateway.add(
        "Zebra quokka pitfall written during a rebuild",
        "A write that lands while the new generation is being built must survive the switch.",
        type="pitfall",
    )
    assert added["status"] == "created"
    (memory.run_dir / "fault-continue").touch()
    rebuild.join(120)
    assert not rebuild.is_alive() and done["generation"] != added["generation"]
    hits = reads.search(memory, "zebra quokka pitfall written during a rebuild")["hits"]
    assert hits and hits[0]["id"] == added["id"]
    assert memory.status()["consistent"]
    memory.close()


def test_status_is_inconsistent_when_current_names_a_missing_generation(env_home, minilm_model):
    memory = make_memory(env_home, minilm_model, resident=True)  # as the daemon holds it
    memory.init(embedder="minilm")
    assert memory.status()["consistent"]
    (memory.cfg.index_dir / "CURRENT").write_text("gen-000042\n")
    status = memory.status()
    assert status["consistent"] is False
    assert "gen-000042" in status["problems"][0] and "missing" in status["problems"][0]
    with pytest.raises(IndexInconsistent) as refused:
        reads.search(memory, "how do we lock dependencies")
    assert "memory-agent rebuild" in describe(refused.value).fix  # the product's words
