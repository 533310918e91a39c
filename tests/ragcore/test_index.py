import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ragcore import (
    CachedEmbedder,
    Document,
    EmbeddingCache,
    Filter,
    Index,
    IndexError_,
    IndexInconsistent,
    search,
)


def _ids(result):
    return [h.doc_id for h in result.hits]


def test_build_switches_current_and_search_finds_documents(tmp_path, cached_minilm, notes):
    index = Index(tmp_path / "index", cached_minilm)
    report = index.build(notes)
    assert report.generation == "gen-000001" and report.documents == len(notes)
    assert (tmp_path / "index" / "CURRENT").read_text().strip() == "gen-000001"
    assert (
        _ids(search(index, "which process may open the qdrant storage path", limit=3))[0]
        == "qdrant-lock"
    )
    assert _ids(search(index, "人名 分词", limit=3))[0] == "jieba-names"
    status = index.check()
    assert status.consistent and status.points == status.manifest_points == len(notes)


def test_a_second_build_of_unchanged_text_makes_zero_model_calls(tmp_path, minilm, notes):
    cache = EmbeddingCache(tmp_path / "cache")
    first = CachedEmbedder(minilm, cache)
    Index(tmp_path / "a", first).build(notes)
    assert first.stats.texts_embedded == len(notes)
    second = CachedEmbedder(minilm, cache)
    index = Index(tmp_path / "b", second)
    index.build(notes)
    assert second.stats.model_calls == 0 and second.stats.texts_embedded == 0
    assert _ids(search(index, "git add -A", limit=1)) == ["git-add-all"]


def test_rebuild_keeps_the_previous_generation_and_removes_older_ones(
    tmp_path, cached_minilm, notes
):
    index = Index(tmp_path / "index", cached_minilm)
    index.build(notes)
    index.build(notes[:3])
    report = index.build(notes[:2])
    assert report.generation == "gen-000003"
    assert report.removed_generations == ["gen-000001"]
    assert index.generations() == ["gen-000002", "gen-000003"]
    assert index.check().points == 2


def test_refresh_embeds_only_changed_documents_and_removes_deleted_ones(
    tmp_path, cached_minilm, notes
):
    index = Index(tmp_path / "index", cached_minilm)
    index.build(notes)
    before = cached_minilm.stats.texts_embedded
    edited = [
        Document(d.id, d.title, d.body + " Edited: also applies to CI.", d.meta, d.source)
        if d.id == "torch-threads"
        else d
        for d in notes[1:]
    ]
    new = Document(
        "new-note",
        "Socket permissions",
        "The daemon socket is created with mode 0600.",
        {"type": "decision"},
        "kb",
    )
    report = index.refresh(edited + [new])
    assert report.added == ["new-note"] and report.updated == ["torch-threads"]
    assert report.removed == [notes[0].id]
    assert cached_minilm.stats.texts_embedded - before == 2
    assert index.check().points == len(notes)  # -1 removed, +1 added
    assert _ids(search(index, "socket mode 0600", limit=1)) == ["new-note"]
    assert notes[0].id not in _ids(search(index, "tmp_path fixture test files", limit=10))
    # nothing changed: nothing to do
    assert not index.refresh(edited + [new]).changed


def test_refresh_leaves_other_sources_alone(tmp_path, cached_minilm, notes):
    index = Index(tmp_path / "index", cached_minilm)
    other = Document("repo/README.md", "Repo readme", "How to build the repo.", {}, "repo")
    index.build(notes + [other])
    report = index.refresh(notes[:2], sources=["kb"])
    assert "repo/README.md" not in report.removed and len(report.removed) == len(notes) - 2
    assert index.doc("repo/README.md").source == "repo"


def test_points_removed_behind_the_manifests_back_make_search_raise(tmp_path, cached_minilm, notes):
    index = Index(tmp_path / "index", cached_minilm)
    index.build(notes)
    gen = index.generation
    index.close()
    with sqlite3.connect(tmp_path / "index" / gen / "segment.sqlite") as db:
        db.execute(
            "DELETE FROM chunks WHERE chunk_id IN (?, ?)", (f"{notes[0].id}#0", f"{notes[1].id}#0")
        )
    with pytest.raises(IndexInconsistent) as err:
        index.open()
    assert "segment holds 4 chunks but the manifest lists 6" in str(err.value)
    assert "rebuild the index" in err.value.fix and "memory-agent" not in err.value.fix
    broken = Index(tmp_path / "index", cached_minilm)
    with pytest.raises(IndexInconsistent):
        search(broken, "qdrant")


def test_an_index_built_with_another_embedder_refuses_to_open(tmp_path, cached_minilm, notes):
    index = Index(tmp_path / "index", cached_minilm)
    index.build(notes)
    index.close()
    with sqlite3.connect(tmp_path / "index" / "gen-000001" / "segment.sqlite") as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'embedder'", (json.dumps("bge-m3:x"),))
    with pytest.raises(IndexError_, match="built with embedder bge-m3:x") as err:
        Index(tmp_path / "index", cached_minilm).open()
    assert "rebuild the index" in err.value.fix and "memory-agent" not in err.value.fix


def test_no_index_raises_naming_rebuild(tmp_path, cached_minilm):
    with pytest.raises(IndexError_, match="no index under") as err:
        search(Index(tmp_path / "none", cached_minilm), "anything")
    assert "rebuild the index" in err.value.fix and "memory-agent" not in err.value.fix


def test_filters_explain_and_status(tmp_path, cached_minilm, notes):
    docs = notes + [
        Document(
            "old",
            "Old decision on sockets",
            "Use TCP sockets everywhere.",
            {"type": "decision", "status": "superseded"},
            "kb",
        )
    ]
    index = Index(tmp_path / "index", cached_minilm)
    index.build(docs)
    active = search(index, "sockets", flt=Filter(statuses=("active",)), limit=10)
    assert "old" not in _ids(active)
    assert _ids(search(index, "sockets", flt=Filter(types=("decision",)), limit=10)) == ["old"]
    hit = search(index, "git add -A commit", limit=1).hits[0]
    explained = hit.explain()
    assert set(explained["channels"]) == {"dense", "lexical"}
    assert explained["channels"]["lexical"]["rank"] >= 1
    assert (
        abs(sum(c["contribution"] for c in explained["channels"].values()) - explained["fused"])
        < 1e-6
    )


def test_empty_query_returns_nothing_without_touching_the_model(tmp_path, cached_minilm, notes):
    index = Index(tmp_path / "index", cached_minilm)
    index.build(notes)
    calls = cached_minilm.stats.model_calls
    assert search(index, "   ").hits == []
    assert cached_minilm.stats.model_calls == calls


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ragcore import CachedEmbedder, Document, Index, MiniLMEmbedder
    index = Index(Path(sys.argv[1]), CachedEmbedder(MiniLMEmbedder(), None))
    docs = [Document(f"d{i}", f"Note {i}", f"Unique text number {i} about topic {i * 7919 % 1000}.")
            for i in range(3000)]
    def progress(stage, done, total):
        print(f"{stage} {done}/{total}", flush=True)
    index.build(docs, progress=progress)
    print("finished", flush=True)
""")


def test_a_rebuild_killed_midway_leaves_the_old_generation_serving(tmp_path, cached_minilm, notes):
    root = tmp_path / "index"
    index = Index(root, cached_minilm)
    index.build(notes)
    index.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        line = proc.stdout.readline()
        while not line.startswith("embed") and time.monotonic() < deadline:
            line = proc.stdout.readline()
        assert line.startswith("embed"), "the rebuild never reported progress"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert (root / "CURRENT").read_text().strip() == "gen-000001"
    assert (root / "gen-000002").is_dir()  # the orphan
    index = Index(root, cached_minilm)
    assert [h.doc_id for h in search(index, "git add -A", limit=1).hits] == ["git-add-all"]
    report = index.build(notes)
    assert report.generation == "gen-000003"
    assert "gen-000002" in report.removed_generations
    assert index.generations() == ["gen-000001", "gen-000003"]


# -- the open on a thread of its own (issue 19: a daemon opens while it gets ready) ---------------
class _Loads(Index):
    """An index that notes which thread read a generation into a snapshot."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loads: list[str] = []

    def _load(self, name):
        self.loads.append(threading.current_thread().name)
        return super()._load(name)


def _until_blocked(thread: threading.Thread) -> None:
    """Until `thread` waits for the index's lock (in `_ensure_open`) or has finished."""
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident)
        while frame is not None and frame.f_code.co_name != "_ensure_open":
            frame = frame.f_back
        if frame is not None:
            return
        time.sleep(0.01)


def test_a_search_during_a_background_open_waits_for_it_and_the_generation_is_read_once(
    tmp_path, cached_minilm, notes
):
    Index(tmp_path / "index", cached_minilm).build(notes)
    index = _Loads(tmp_path / "index", cached_minilm)
    inside, go, after = threading.Event(), threading.Event(), []

    def before():  # the open is under way (the index's lock held) until the test says go
        inside.set()
        assert go.wait(timeout=60)

    assert index.open_in_background(before, after.append)
    assert inside.wait(timeout=60)
    found = []
    reader = threading.Thread(
        target=lambda: found.append(
            _ids(search(index, "which process may open the qdrant storage path", limit=3))
        )
    )
    reader.start()
    _until_blocked(reader)  # the search has asked for the snapshot (or, wrongly, answered)
    go.set()
    reader.join(timeout=60)
    assert found and found[0][0] == "qdrant-lock"  # the answer of an open index
    assert index.loads == ["index-open"]  # read once, by the background open, not by the search
    assert after == [index.snapshot()] and index.open_error is None
    assert not index.open_in_background(before, after.append)  # open: nothing to start


def test_a_background_open_that_fails_keeps_the_error_and_the_next_reader_raises_it(
    tmp_path, cached_minilm, notes
):
    Index(tmp_path / "index", cached_minilm).build(notes)
    with sqlite3.connect(tmp_path / "index" / "gen-000001" / "segment.sqlite") as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'embedder'", (json.dumps("bge-m3:x"),))
    index = Index(tmp_path / "index", cached_minilm)
    done = threading.Event()
    after = []
    assert index.open_in_background(lambda: None, lambda snap: (after.append(snap), done.set()))
    assert done.wait(timeout=60)
    assert after == [None]  # told it failed
    assert isinstance(index.open_error, IndexError_)
    assert "built with embedder bge-m3:x" in str(index.open_error)
    with pytest.raises(IndexError_, match="built with embedder bge-m3:x") as err:
        search(index, "qdrant")  # the search opens again and says why, with the fix
    assert "rebuild the index" in err.value.fix


def test_a_background_open_of_no_index_starts_nothing(tmp_path, cached_minilm):
    index = Index(tmp_path / "none", cached_minilm)
    assert not index.open_in_background(lambda: None, lambda snap: None)
    assert index.open_error is None
