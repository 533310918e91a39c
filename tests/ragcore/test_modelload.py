"""A generation's read model opens from the arrays saved beside its segment - and only when they
are this segment's, current or a few changes behind, and intact; otherwise from the rows."""

import json
import random
import shutil
import sqlite3
import struct
import zlib

import numpy as np
import pytest

from ragcore import CachedEmbedder, Document, Embedding, Filter, Index, SearchConfig, search
from ragcore.arrayfile import ArrayFile, ArrayFileError, write
from ragcore.modelload import FILE

WORDS = "alpha beta gamma delta omega sigma kappa theta lambda zeta ledger cache socket".split()
NAMES = ["caroline", "lisbon", "inc-0412", "melanie", "2023-05-08"]
MENTIONS = ["Caroline", "in Lisbon", "INC-0412", "with Melanie", "on 8 May, 2023", "", "", ""]
SEARCHES = [
    ("alpha omega", None),
    ("sigma ledger cache", Filter(statuses=("active",))),
    ("kappa theta", Filter(types=("fact", "decision"), tags=("ci",))),
    ("zeta socket", Filter(sources=("repo",), exclude_ids=frozenset({"d007"}))),
]
EVERY = SearchConfig(candidates=5000)  # every matching document in every channel


class Hashing:
    """Deterministic 32-d dense vectors and sparse weights from the tokens: exact answers to
    compare, and every channel (dense, lexical, learned sparse) in the saved arrays."""

    model_id, dim, has_sparse = "hashing-sparse-32", 32, True

    def _embed(self, text: str) -> Embedding:
        dense = np.full(self.dim, 0.01, dtype=np.float32)
        sparse: dict[int, float] = {}
        for token in text.lower().split():
            h = zlib.crc32(token.encode())
            dense[h % self.dim] += 1.0
            sparse[h & 0x7FFFFFFF] = sparse.get(h & 0x7FFFFFFF, 0.0) + 0.5
        return Embedding(dense / np.linalg.norm(dense), sparse)

    def embed_documents(self, texts):
        return [self._embed(t) for t in texts]

    def embed_query(self, text):
        return self._embed(text)


def _corpus(n=300, seed=3, salt=""):
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        meta = {
            "status": rng.choice(["active"] * 4 + ["archived", "superseded"]),
            "type": rng.choice(["note", "fact", "decision"]),
            "tags": rng.sample(["ci", "db", "ops"], rng.randint(0, 2)),
        }
        body = " ".join(rng.choice(WORDS + MENTIONS) for _ in range(rng.randint(5, 40))) + salt
        if i % 7 == 0:  # a few documents of several chunks
            body = "\n\n".join(f"## Part {k}\n{body} {WORDS[k]}" * 8 for k in range(3))
        docs.append(
            Document(
                f"d{i:03d}",
                f"Doc {i} {rng.choice(WORDS)}",
                body,
                meta,
                rng.choice(["kb", "repo"]),
                stamp=f"s{i}",
            )
        )
    return docs


def _index(root) -> Index:
    return Index(root, CachedEmbedder(Hashing(), None), max_chars=400)


def _answers(index):
    """Every search's hits, exactly (ids, chunks, scores, per-channel ranks), plus the docs."""
    out = []
    for query, flt in SEARCHES:
        for use_dense in (True, False):
            hits = search(index, query, limit=500, flt=flt, config=EVERY, use_dense=use_dense)
            out.append(
                [
                    (
                        h.doc_id,
                        h.chunk_id,
                        h.score,
                        {n: (c.rank, c.score, c.chunk_id) for n, c in h.channels.items()},
                    )
                    for h in hits.hits
                ]
            )
    names = {e: (sorted(index.entity_docs(e)), index.entity_count(e)) for e in NAMES}
    return out, (sorted(index.docs(), key=lambda d: d.id), names)


def _same(answers):
    """The answers up to what ties leave open: each search's documents with their fused and
    per-channel scores (which of two equal chunks is shown, and the order of equal scores,
    follow the slots, which a change renumbers); the documents exactly."""
    searches, docs = answers
    return [
        sorted(
            (-round(s, 5), d, sorted((n, round(cs, 5)) for n, (_, cs, _) in chans.items()))
            for d, _, s, chans in hits
        )
        for hits in searches
    ], docs


def _reopen(root):
    index = _index(root)
    index.open()
    return index, index.snapshot().origin


def _from_rows(root):
    """The answers of the live generation opened from its segment's rows alone."""
    scratch = root.parent / f"{root.name}-rows"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(root, scratch)
    (scratch / (scratch / "CURRENT").read_text().strip() / FILE).unlink()
    index, origin = _reopen(scratch)
    assert origin == "segment rows (no saved arrays)"
    answers = _answers(index)
    index.close()
    return answers


def test_results_with_and_without_the_saved_arrays_are_identical(tmp_path):
    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus())
    assert index.snapshot().origin == "segment rows (no saved arrays)"  # and saved them
    built = _answers(index)
    index.close()
    saved = root / "gen-000001" / FILE
    assert saved.is_file()
    index, origin = _reopen(root)
    assert origin == "saved arrays, 0 changes replayed"
    assert _answers(index) == built == _from_rows(root)
    assert any(hits for hits in built[0])  # the searches find something
    index.close()


def test_changes_since_the_arrays_were_saved_are_replayed(tmp_path):
    root = tmp_path / "index"
    index = _index(root)
    docs = _corpus()
    index.build(docs)
    changed = _corpus(40, seed=9, salt=" omega omega")  # d000-d039 rewritten
    index.apply(
        changed + [Document("new", "A new one", "ledger socket alpha", {}, "kb")],
        deletes=["d100", "d101", "d250"],
    )
    index.set_stamps({"d200": "touched"})
    live = _answers(index)
    index.close()
    index, origin = _reopen(root)
    assert origin == "saved arrays, 45 changes replayed"
    reopened = _answers(index)
    assert _same(reopened) == _same(live) == _same(_from_rows(root))
    assert index.doc("d200").stamp == "touched" and index.doc("d100") is None
    # the model from the saved arrays takes further changes (its arrays are read-only)
    index.apply(_corpus(120, seed=11, salt=" kappa"), deletes=[f"d{i}" for i in range(150, 160)])
    assert _same(_answers(index)) == _same(_from_rows(root))
    assert index.check().consistent
    index.close()


def test_a_moved_document_keeps_its_slots_when_replayed(tmp_path):
    """A file moved with its content unchanged (`set_stamps(moved=...)`, a `kb fanout`) is
    replayed as a new manifest entry, not written again: the reopened model keeps its chunks'
    slots (a graph over them stays valid). Moved, then rewritten: replayed as written."""
    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus())
    index.close()
    index, _ = _reopen(root)
    moved = {f"d{i:03d}": {"path": f"/kb/note/ab/d{i:03d}.md", "hash": f"h{i}"} for i in (7, 8)}
    index.set_stamps({d: "moved" for d in moved}, moved)
    index.apply(_corpus(9, seed=5, salt=" sigma")[8:])  # d008 moved, then rewritten
    slots = index.snapshot().model.slots_of("d007")
    live = _answers(index)
    index.close()
    index, origin = _reopen(root)
    assert origin == "saved arrays, 2 changes replayed"
    assert index.snapshot().model.slots_of("d007") == slots  # relabelled, not written again
    assert (index.doc("d007").path, index.doc("d007").hash) == ("/kb/note/ab/d007.md", "h7")
    assert index.doc("d008").hash != "h8"  # its rewrite is what the replay applied
    assert _same(_answers(index)) == _same(live) == _same(_from_rows(root))
    index.close()


def test_a_fan_out_of_every_document_still_opens_from_the_saved_arrays(tmp_path, monkeypatch):
    """Moves past the replay limit (a fan-out moves every entry) are still replayed on the
    saved arrays: only written documents count against it (at 1M the rows' read would renumber
    every slot and build the graph again)."""
    from ragcore import modelload

    monkeypatch.setattr(modelload, "REPLAY_MIN", 10)
    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus())
    index.close()
    index, _ = _reopen(root)
    moved = {d.id: {"path": f"/kb/x/{d.id}.md", "hash": f"h-{d.id}"} for d in index.docs()}
    index.set_stamps({d: "moved" for d in moved}, moved)
    index.close()
    index, origin = _reopen(root)
    assert origin == f"saved arrays, {len(moved)} changes replayed"
    assert index.doc("d123").path == "/kb/x/d123.md"
    index.close()


def test_saved_arrays_of_another_generation_are_not_used(tmp_path):
    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus(seed=3))
    first = _answers(index)
    index.build(_corpus(seed=4))  # gen-000002, different documents
    expected = _answers(index)
    assert expected != first
    index.close()
    shutil.copy(root / "gen-000001" / FILE, root / "gen-000002" / FILE)
    index, origin = _reopen(root)
    assert origin.startswith("segment rows (saved arrays not used: taken from another segment (")
    assert _answers(index) == expected
    index.close()
    index, origin = _reopen(root)  # the file was replaced by this generation's
    assert origin == "saved arrays, 0 changes replayed"
    index.close()


def test_saved_arrays_too_far_behind_or_ahead_of_the_segment_are_not_used(tmp_path, monkeypatch):
    from ragcore import modelload

    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus())
    monkeypatch.setattr(modelload, "REPLAY_MIN", 0)  # 300 documents: at most 15 replayed
    index.apply(_corpus(16, seed=5, salt=" sigma"))
    expected = _answers(index)
    index.close()
    index, origin = _reopen(root)
    assert origin.startswith("segment rows (saved arrays not used: 16 documents changed since")
    assert _same(_answers(index)) == _same(expected)
    index.close()
    # a segment that lost its last changes (a power loss): arrays taken later are not its own
    with sqlite3.connect(root / "gen-000001" / "segment.sqlite") as db:
        db.execute("UPDATE meta SET value = '1' WHERE key = 'seq'")
    index, origin = _reopen(root)
    assert "saved arrays not used: taken at change" in origin
    index.close()


def test_saved_arrays_of_another_python_are_not_used(tmp_path, monkeypatch):
    """The documents are kept in marshal's format, which Python may change between versions."""
    from ragcore import modelload

    root = tmp_path / "index"
    monkeypatch.setattr(modelload, "PYTHON", "3.10")  # the build saves as another Python would
    index = _index(root)
    index.build(_corpus())
    expected = _answers(index)
    index.close()
    monkeypatch.undo()
    index, origin = _reopen(root)
    assert origin.startswith("segment rows (saved arrays not used: taken from another python (3.10")
    assert _answers(index) == expected
    index.close()
    index, origin = _reopen(root)  # saved again, by this Python
    assert origin == "saved arrays, 0 changes replayed" and _answers(index) == expected
    index.close()


@pytest.mark.parametrize(
    "damage",
    ["truncated to half", "truncated by one byte", "empty", "a flipped bit", "not one"],
)
def test_a_damaged_file_is_rebuilt_and_answers_as_a_fresh_build(tmp_path, damage):
    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus())
    index.close()
    saved = root / "gen-000001" / FILE
    data = bytearray(saved.read_bytes())
    if damage == "truncated to half":
        data = data[: len(data) // 2]
    elif damage == "truncated by one byte":
        data = data[:-1]
    elif damage == "empty":
        data = bytearray()
    elif damage == "a flipped bit":
        data[len(data) // 3] ^= 0x10  # inside the arrays
    else:
        data = bytearray(b"{}" * 100)
    saved.write_bytes(bytes(data))
    index, origin = _reopen(root)
    assert origin.startswith("segment rows (saved arrays not used:")
    assert _answers(index) == _from_rows(root)
    index.close()
    ArrayFile(saved).arrays()  # rewritten whole
    assert _reopen(root)[1] == "saved arrays, 0 changes replayed"


def test_a_segment_of_the_format_before_gains_change_tracking_when_opened(tmp_path):
    root = tmp_path / "index"
    index = _index(root)
    index.build(_corpus(60))
    expected = _answers(index)
    index.close()
    (root / "gen-000001" / FILE).unlink()
    with sqlite3.connect(root / "gen-000001" / "segment.sqlite") as db:  # as format 2 wrote it
        db.execute("DROP INDEX docs_seq")
        db.execute("ALTER TABLE docs DROP COLUMN seq")
        db.execute("DROP TABLE gone")
        db.execute("DELETE FROM meta WHERE key IN ('uid', 'seq')")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
    index, origin = _reopen(root)
    assert origin == "segment rows (no saved arrays)" and _answers(index) == expected
    index.apply([Document("d001", "Changed", "omega ledger", {}, "kb")])
    index.close()
    index, origin = _reopen(root)
    assert origin == "saved arrays, 1 changes replayed"
    assert index.doc("d001").title == "Changed"
    index.close()


# -- the file format -------------------------------------------------------------------------
def test_an_array_file_gives_back_its_arrays_read_only_and_refuses_damage(tmp_path):
    path = tmp_path / "a.arrays"
    arrays = {
        "ints": np.arange(7, dtype=np.int32),
        "matrix": np.random.default_rng(0).random((5, 3)).astype(np.float32),
        "empty": np.zeros(0, dtype=np.int64),
        "json": np.frombuffer(json.dumps(["x", "ü"]).encode(), dtype=np.uint8),
    }
    write(path, arrays, {"key": [1, "a"]})
    got = ArrayFile(path)
    assert got.meta == {"key": [1, "a"]}
    back = got.arrays()
    assert set(back) == set(arrays)
    for name, a in arrays.items():
        assert back[name].dtype == a.dtype and np.array_equal(back[name], a)
    with pytest.raises(ValueError, match="read-only"):
        back["matrix"][0, 0] = 1.0
    read = got.arrays(read={"json", "matrix"})  # read into memory instead of mapped
    assert all(np.array_equal(read[name], a) for name, a in arrays.items())
    whole = path.read_bytes()
    path.write_bytes(whole[:-1])
    with pytest.raises(ArrayFileError, match="expected"):
        ArrayFile(path)
    damaged = bytearray(whole)
    damaged[whole.index(arrays["matrix"].tobytes()) + 5] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(ArrayFileError, match="fails its CRC"):
        ArrayFile(path).arrays()
    damaged = bytearray(whole)
    damaged[20] ^= 1  # the header
    path.write_bytes(bytes(damaged))
    with pytest.raises(ArrayFileError, match="header"):
        ArrayFile(path)


def _as_checked(path):
    """Write the stamp an earlier full check would have left for `path` as it stands now."""
    st = path.stat()
    header_crc = struct.unpack("<8sII", path.read_bytes()[:16])[2]
    identity = {
        "size": st.st_size,
        "inode": st.st_ino,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "header_crc": header_crc,
    }
    path.with_name(path.name + ".checked").write_text(json.dumps(identity))


def test_an_array_file_checked_whole_once_is_not_hashed_again_until_it_changes(tmp_path):
    path = tmp_path / "a.arrays"
    matrix = np.random.default_rng(1).random((50, 8)).astype(np.float32)
    docs = np.arange(9, dtype=np.uint8)
    write(path, {"matrix": matrix, "docs": docs}, {})
    stamp = path.with_name(path.name + ".checked")
    assert not stamp.exists()
    ArrayFile(path).arrays(read={"docs"})
    written = json.loads(stamp.read_text())  # every CRC held: recorded
    _as_checked(path)
    assert json.loads(stamp.read_text()) == written  # it names the file as it stands
    whole = bytearray(path.read_bytes())
    whole[bytes(whole).index(matrix.tobytes()) + 5] ^= 1
    with open(path, "r+b") as fh:  # written in place, after the check: new times
        fh.write(whole)
    with pytest.raises(ArrayFileError, match="matrix fails its CRC"):
        ArrayFile(path).arrays(read={"docs"})
    # Damage under a stamp that still names the file (a disk's bit rot): the mapped matrix is
    # not hashed again - the cost the stamp saves, and its documented limit.
    _as_checked(path)
    got = ArrayFile(path).arrays(read={"docs"})
    assert not np.array_equal(got["matrix"], matrix)
    # An array read into memory is checked at every read, stamp or not.
    whole[bytes(whole).index(docs.tobytes())] ^= 1
    path.write_bytes(bytes(whole))
    _as_checked(path)
    with pytest.raises(ArrayFileError, match="docs fails its CRC"):
        ArrayFile(path).arrays(read={"docs"})


def test_a_replaced_array_file_is_checked_again(tmp_path):
    path = tmp_path / "a.arrays"
    write(path, {"x": np.arange(100, dtype=np.int64)}, {"n": 1})
    ArrayFile(path).arrays()
    first = json.loads(path.with_name(path.name + ".checked").read_text())
    write(path, {"x": np.arange(100, dtype=np.int64) * 2}, {"n": 2})  # renamed in: a new inode
    assert np.array_equal(ArrayFile(path).arrays()["x"], np.arange(100) * 2)
    second = json.loads(path.with_name(path.name + ".checked").read_text())
    assert second != first and second["inode"] == path.stat().st_ino
