"""An index followed by another process (ADR 0028): after each of the owner's writes, and after
its switch to a new generation, the follower answers every search exactly as the owner does -
and it never writes the owner's files."""

from __future__ import annotations

import pickle
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ragcore import CachedEmbedder, Document, Follower, IndexInconsistent
from ragcore.modelload import FILE as ARRAYS
from ragcore.segment import FILE as SEGMENT
from tests.ragcore.test_modelload import Hashing, _answers, _corpus, _index, _same

ROOT = Path(__file__).resolve().parents[2]

# The follower: a process of its own, driven by one word per line on stdin, answering each with
# a pickled reply on stdout (length first).
FOLLOWER = """
import pickle, struct, sys
from ragcore import CachedEmbedder
from ragcore.follow import Follower
from tests.ragcore.test_modelload import Hashing, _answers, _same

follower = Follower(sys.argv[1], CachedEmbedder(Hashing(), None), max_chars=400,
                    with_dense=sys.argv[2] == "dense")
for line in sys.stdin:
    word = line.strip()
    if word == "follow":
        reply = follower.follow()
    elif word == "answers":  # as of the last follow
        snap = follower.current_snapshot()
        reply = (_same(_answers(snap)), follower.seen, snap.generation)
    elif word == "origin":
        reply = follower.current_snapshot().origin
    out = pickle.dumps(reply)
    sys.stdout.buffer.write(struct.pack("<I", len(out)) + out)
    sys.stdout.buffer.flush()
"""


class FollowerProcess:
    def __init__(self, root: Path, dense: bool = True):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FOLLOWER, str(root), "dense" if dense else "lexical"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )

    def ask(self, word: str):
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{word}\n".encode())
        self.proc.stdin.flush()
        size = self.proc.stdout.read(4)
        assert len(size) == 4, "the follower died (its stderr is above)"
        return pickle.loads(self.proc.stdout.read(struct.unpack("<I", size)[0]))

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def _files(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file of the index but SQLite's shared-memory index of its WAL (which a reader
    maps) and the saved arrays' check stamp (ADR 0026): (inode, size, mtime)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.endswith(("-shm", ".checked")):
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def test_a_follower_in_another_process_answers_as_the_owner_after_each_write(tmp_path):
    root = tmp_path / "index"
    owner = _index(root)
    docs = _corpus()
    owner.build(docs)
    owner.close()
    owner = _index(root)  # reopened: its read model from the arrays it saved
    before = _same(_answers(owner))
    follower = FollowerProcess(root)
    try:
        assert follower.ask("follow") == -1  # opened
        assert "saved arrays" in follower.ask("origin")
        answers, seen, generation = follower.ask("answers")
        assert answers == before
        assert follower.ask("follow") == 0  # nothing new

        # Writes: a changed document, a new one, a removed one - each its own change.
        changed = docs[5]
        owner.apply([Document(changed.id, changed.title, "omega sigma rewritten", changed.meta)])
        owner.apply([Document("new-1", "New", "alpha kappa ledger", {"type": "fact"}, "kb")])
        owner.apply([], [docs[9].id])
        after = _same(_answers(owner))
        assert after != before

        assert follower.ask("answers")[0] == before  # not followed yet: the state it had
        assert follower.ask("follow") == 3
        answers, seen_now, _ = follower.ask("answers")
        assert answers == after
        assert seen_now == seen + 3

        # The owner's rebuild: a new generation, CURRENT moved.
        owner.build(_corpus(salt=" rebuilt"))
        rebuilt = _same(_answers(owner))
        assert follower.ask("answers")[0] == after
        assert follower.ask("follow") == -1
        answers, _, new_generation = follower.ask("answers")
        assert new_generation != generation
        assert answers == rebuilt
    finally:
        follower.close()
        owner.close()


def test_a_follower_never_writes_the_owners_files(tmp_path):
    root = tmp_path / "index"
    owner = _index(root)
    owner.build(_corpus())
    owner.apply([Document("new-1", "New", "alpha kappa ledger", {"type": "fact"}, "kb")])
    generation = (root / "CURRENT").read_text().strip()
    files = _files(root)
    assert f"{generation}/{ARRAYS}" in files and f"{generation}/{SEGMENT}-wal" in files
    # Without dense vectors the saved arrays (taken with them) are not this follower's: it
    # reads the rows - and must leave the owner's arrays where they are, unreplaced.
    for dense in (True, False):
        follower = FollowerProcess(root, dense=dense)
        try:
            assert follower.ask("follow") == -1
            origin = follower.ask("origin")
            assert origin.startswith("saved arrays" if dense else "segment rows"), origin
        finally:
            follower.close()
        assert _files(root) == files
    # The owner gone first, the follower is the last to close the segment: a writable
    # connection would then checkpoint the owner's WAL into the file and delete it.
    follower = FollowerProcess(root)
    try:
        assert follower.ask("follow") == -1
        owner.close()
        files = _files(root)
        assert f"{generation}/{SEGMENT}-wal" in files
    finally:
        follower.close()
    assert _files(root) == files


def test_a_segment_without_change_numbers_is_refused_unchanged(tmp_path):
    """A segment of an older format (no `uid`, no `seq`) is upgraded by its owner when it
    opens it; a follower must not do it behind the owner's back (the two would race)."""
    root = tmp_path / "index"
    owner = _index(root)
    owner.build(_corpus())
    owner.close()
    path = root / (root / "CURRENT").read_text().strip() / SEGMENT
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM meta WHERE key = 'uid'")
    db.close()
    files = _files(root)
    follower = Follower(root, CachedEmbedder(Hashing(), None), max_chars=400)
    with pytest.raises(IndexInconsistent, match="no change numbers") as err:
        follower.follow()
    assert "owner" in err.value.fix
    follower.close()
    after = _files(root)
    # SQLite's read-only open of a WAL file no one has open makes an empty WAL beside it (what
    # the owner's own open makes); nothing else may differ.
    wal = f"{path.parent.name}/{SEGMENT}-wal"
    assert after.pop(wal, (0, 0, 0))[1] == 0
    assert after == files


def test_a_generation_the_follower_cannot_read_is_named_with_the_fix(tmp_path):
    root = tmp_path / "index"
    owner = _index(root)
    owner.build(_corpus())
    owner.close()
    follower = Follower(root, CachedEmbedder(Hashing(), None), max_chars=400)
    (root / "gen-000009").mkdir()
    (root / "CURRENT").write_text("gen-000009")
    with pytest.raises(IndexInconsistent, match="gen-000009 has no readable segment"):
        follower.follow()
    (root / "gen-000009" / SEGMENT).write_bytes(b"not a database at all" * 100)
    with pytest.raises(IndexInconsistent, match="gen-000009 has no readable segment") as err:
        follower.follow()
    assert "rebuild" in err.value.fix


def test_a_replaced_generation_stays_readable_then_is_closed(tmp_path):
    root = tmp_path / "index"
    owner = _index(root)
    owner.build(_corpus())
    follower = Follower(root, CachedEmbedder(Hashing(), None), max_chars=400)
    try:
        follower.follow()
        held = follower.current_snapshot()  # a search in flight holds it
        owner.build(_corpus(salt=" second"))
        assert follower.follow() == -1
        assert _answers(held)  # still readable: its segment is open for RETIRE_AFTER_S
        follower.retire_after_s = 0.0
        owner.build(_corpus(salt=" third"))
        assert follower.follow() == -1
        with pytest.raises(sqlite3.ProgrammingError):  # closed, not left to the collector
            held.segment.meta()
    finally:
        follower.close()
        owner.close()


def test_a_write_landing_while_the_follower_reads_the_changes_is_seen_whole_or_not_at_all(
    tmp_path, monkeypatch
):
    """The owner rewrites a document between the follower's read of the changed documents and
    its read of their chunks: the follower must not pair the old manifest row with the new
    chunks (a snapshot that lists one chunk and holds several fails every search's check)."""
    root = tmp_path / "index"
    owner = _index(root)
    docs = _corpus()
    owner.build(docs)
    follower = Follower(root, CachedEmbedder(Hashing(), None), max_chars=400)
    try:
        assert follower.follow() == -1
        x = docs[3]
        owner.apply([Document(x.id, x.title, "alpha short", x.meta, x.source)])  # one chunk
        first = _same(_answers(owner))
        segment = follower.current_snapshot().segment
        real, wrote = segment.chunk_rows, []

        def owner_writes_first(doc_ids, with_dense=True):
            if not wrote:  # the owner's second write lands in the middle of the replay
                long = "\n\n".join(f"## Part {k}\n" + "omega sigma " * 40 for k in range(4))
                owner.apply([Document(x.id, x.title, long, x.meta, x.source)])
                wrote.append(x.id)
            return real(doc_ids, with_dense)

        monkeypatch.setattr(segment, "chunk_rows", owner_writes_first)
        assert follower.follow() == 1
        assert wrote == [x.id]
        snap = follower.current_snapshot()
        assert snap.check().consistent, snap.check().problems
        assert _same(_answers(snap)) == first  # the first write, whole
        assert follower.follow() == 1  # then the second
        assert _same(_answers(follower.current_snapshot())) == _same(_answers(owner))
        assert follower.current_snapshot().doc(x.id).chunks > 1
    finally:
        follower.close()
        owner.close()


def test_a_dense_graph_the_owner_saves_later_is_picked_up(tmp_path, monkeypatch):
    """Above `ann.EXACT_BELOW` chunks the owner builds its dense graph in the background after
    an open; a follower that opened before the graph was on disk scans exactly until then, and
    takes the graph at its first follow after the owner saved it (thresholds scaled down)."""
    import os

    from ragcore import Index, ann, dense
    from tests.ragcore.test_dense_graph import Clustered, docs, wait_for_graph

    monkeypatch.setattr(ann, "EXACT_BELOW", 1000)
    monkeypatch.setattr(dense, "EXACT_BELOW", 1000)
    root = tmp_path / "index"
    owner = Index(root, CachedEmbedder(Clustered(), None))
    owner.build(docs(0, 3000))
    snap = wait_for_graph(owner)
    graph = root / snap.generation / ann.FILE
    saved = [graph, graph.with_name(graph.name + ".json")]
    for path in saved:  # not on disk yet when the follower opens
        os.replace(path, path.with_name(path.name + ".later"))
    follower = Follower(root, CachedEmbedder(Clustered(), None))
    try:
        follower.follow()
        assert follower.current_snapshot().model.graph is None  # exact meanwhile
        follower.follow()
        assert follower.current_snapshot().model.graph is None
        for path in saved:  # the owner's save lands
            os.replace(path.with_name(path.name + ".later"), path)
        follower.follow()
        picked = follower.current_snapshot()
        assert picked.model.graph is not None and len(picked.model.graph) == 3000
        query = follower.embedder.embed_query("q1").dense
        mine = [picked.doc_of(c) for c, _ in picked.channels(None).dense(query, 10)]
        theirs = [snap.doc_of(c) for c, _ in snap.channels(None).dense(query, 10)]
        assert mine == theirs
    finally:
        follower.close()
        owner.close()
