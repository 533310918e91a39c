"""Loading a generation's read model: from the arrays saved beside its segment, or from the
segment's rows.

    index/gen-000007/readmodel.arrays   the read model's arrays as the segment stood after
                                        one change (its `seq`), memory-mapped when read

From the rows, one pass in Python over every chunk collects raw bytes and lengths; the arrays
are then made in bulk (`ModelArrays`): seconds at 100,000 entries. So the arrays are saved
(atomically, `ragcore.arrayfile`) and the next open maps them instead, then replays the
changes the segment took since (`SegmentFile.changes_since`). They are used only if they were
taken from this very segment (its random `uid`), with the same layout and model settings, at a
change the segment has reached, with at most `replay_limit` documents changed since, and if
every CRC holds and the result holds the chunks the segment lists; otherwise the model is built
from the rows and the file replaced. A stale, partial or damaged file is never served.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import marshal
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ragcore import ann
from ragcore.arrayfile import ArrayFile, write
from ragcore.atomic import temp_files
from ragcore.docinfo import DocInfo
from ragcore.postings import Base
from ragcore.readmodel import ModelArrays, ReadModel
from ragcore.segment import DocRow, SegmentFile
from ragcore.setindex import name_table

__all__ = ["FILE", "doc_info", "from_segment", "load_model", "replay", "replay_limit"]

FILE = "readmodel.arrays"
LAYOUT = 2  # of the saved arrays: a change to ModelArrays or to how it is packed bumps it
# The documents' rows are kept in marshal's format (decoded in a third of JSON's time), which
# may change between Python versions: saved arrays of another Python are not used.
PYTHON = "{}.{}".format(*sys.version_info[:2])
REPLAY_MIN = 2_000  # changes replayed on saved arrays at any size (a few tenths of a second)


def doc_info(row: DocRow) -> DocInfo:
    """A manifest row as the read model holds it."""
    return DocInfo(
        row.doc_id,
        str(row.info.get("title", "")),
        row.source,
        row.info.get("path"),
        bool(row.info.get("writable")),
        list(row.info.get("links") or []),
        dict(row.info.get("meta") or {}),
        row.hash,
        row.chunks,
        row.stamp,
        tuple(row.info.get("entities") or ()),
    )


def from_segment(segment: SegmentFile, dim: int, with_dense: bool) -> ModelArrays:
    """Every document and chunk of the segment as arrays (a chunk of no listed document is
    left out: the consistency check reports it)."""
    docs = [doc_info(row) for row in segment.docs()]
    doc_row = {info.id: row for row, info in enumerate(docs)}
    keys: list[str] = []
    terms, tfs, term_counts = [], [], []
    sp_terms, sp_weights, sp_counts = [], [], []
    dense_rows: list[bytes] = []
    ns: list[int] = []
    slot_docs: list[int] = []
    for cid, doc_id, n, dense, t, f, st, sw in segment.chunk_vectors(with_dense):
        row = doc_row.get(doc_id)
        if row is None:
            continue
        keys.append(cid)
        slot_docs.append(row)
        terms.append(t)
        tfs.append(f)
        term_counts.append(len(t) // 8)
        if st is not None:
            sp_terms.append(st)
            sp_weights.append(sw)
            sp_counts.append(len(st) // 8)
        else:
            sp_counts.append(0)
        if with_dense:
            dense_rows.append(dense)
        ns.append(n)
    size = len(keys)
    slots = np.arange(size, dtype=np.int32)
    matrix = None
    if with_dense:
        matrix = np.frombuffer(b"".join(dense_rows), dtype="<f4").reshape(size, dim)
    entry_slots = np.repeat(slots, term_counts).astype(np.int32)
    entry_tfs = np.frombuffer(b"".join(tfs), dtype="<f4")
    lengths = np.zeros(size, dtype=np.float32)
    if entry_slots.size:  # bincount: np.add.at is ~20x slower on millions of entries
        lengths[:] = np.bincount(entry_slots, weights=entry_tfs, minlength=size)
    lexical = Base.of_entries(entry_slots, np.frombuffer(b"".join(terms), dtype="<i8"), entry_tfs)
    sparse_alive = sparse = None
    if sp_terms:
        sp_slots = np.repeat(slots, sp_counts).astype(np.int32)
        sparse_alive = np.zeros(int(sp_slots.max()) + 1, dtype=bool)
        sparse_alive[sp_slots] = True
        sparse = Base.of_entries(
            sp_slots,
            np.frombuffer(b"".join(sp_terms), dtype="<i8"),
            np.frombuffer(b"".join(sp_weights), dtype="<f4"),
        )
    return ModelArrays(
        dim,
        with_dense,
        docs,
        keys,
        np.asarray(slot_docs, dtype=np.int32),
        np.asarray(ns, dtype=np.int32),
        matrix,
        lengths,
        lexical,
        sparse_alive,
        sparse,
        name_table([tuple(info.tags) for info in docs]),
        name_table([info.entities for info in docs]),
    )


def replay_limit(documents: int) -> int:
    """The most changed documents replayed on saved arrays of `documents` documents; beyond,
    the rows are read again (and saved)."""
    return max(REPLAY_MIN, documents // 20)


def load_model(
    segment: SegmentFile,
    saved: Path,
    dim: int,
    with_dense: bool,
    chunks: int,
    *,
    save: bool = True,
) -> tuple[ReadModel, str]:
    """The read model of a generation, and where it came from (for a log line). `saved` is
    the path of its saved arrays (beside the segment), `chunks` the number of chunks the
    segment lists and holds. The caller keeps writers off the segment meanwhile - unless
    `save` is False (a process that follows another's index, `ragcore.follow`): then the
    saved arrays are only read, never removed or written, and the model holds at least every
    change up to the segment's `seq` when the load began."""
    with _long_lived():
        return _load(segment, saved, dim, with_dense, chunks, save)


@contextlib.contextmanager
def _long_lived() -> Iterator[None]:
    """Build ~10^6 long-lived objects (documents, dicts, lists) without the cyclic collector:
    left on, it scans them again and again as they are made; paused, it would still scan them
    young once, then again in the middle generation. Afterwards they go straight to the
    oldest generation (`gc.freeze` then `gc.unfreeze`: a move, no scan), which a full
    collection visits as it visits every other long-lived object."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was:
            gc.enable()


def _load(
    segment: SegmentFile, saved: Path, dim: int, with_dense: bool, chunks: int, save: bool
) -> tuple[ReadModel, str]:
    uid, seq = segment.state()
    key = {"layout": LAYOUT, "python": PYTHON, "uid": uid, "dim": dim, "with_dense": with_dense}
    try:
        model, replayed = _from_saved(segment, ArrayFile(saved), key, seq, chunks)
        return model, f"saved arrays, {replayed} changes replayed"
    except FileNotFoundError:
        why = "no saved arrays"
    except Exception as exc:  # damaged, stale or unreadable: never used, whatever the cause
        why = f"saved arrays not used: {exc}"
    if save:  # without: another process's file, read and never touched (`ragcore.follow`)
        with contextlib.suppress(FileNotFoundError):
            saved.unlink()  # a failed save below must not leave the stale file for the next open
    arrays = from_segment(segment, dim, with_dense)
    model = ReadModel.from_arrays(arrays)
    if save:
        try:
            _save(saved, arrays, {**key, "seq": seq})
            model.arrays_key = {"uid": uid, "seq": seq}
        except (OSError, ValueError) as exc:  # ValueError: a value marshal cannot write
            why += f"; not saved ({exc})"
    return model, f"segment rows ({why})"


# Arrays only read to build the model, then dropped: read, not mapped.
_READ = frozenset(
    [
        "docs",
        "chunk_ids",
        "tags.names",
        "tags.offsets",
        "tags.ids",
        "entities.names",
        "entities.offsets",
        "entities.ids",
    ]
)


class _Unusable(Exception):
    """Saved arrays that are intact but not for this segment as it stands."""


def _from_saved(
    segment: SegmentFile, saved: ArrayFile, key: dict, seq: int, chunks: int
) -> tuple[ReadModel, int]:
    meta = saved.meta
    differ = [k for k in key if meta.get(k) != key[k]]
    if differ:
        names = {"uid": "segment", "with_dense": "dense setting", "dim": "dimension"}
        raise _Unusable(
            "taken from another "
            + ", ".join(f"{names.get(k, k)} ({meta.get(k)}, not {key[k]})" for k in differ)
        )
    if int(meta["seq"]) > seq:
        raise _Unusable(f"taken at change {meta['seq']}, the segment is at {seq}")
    changed = segment.count_changes_since(int(meta["seq"]))
    written = changed - len(segment.moved_since(int(meta["seq"])))  # a move: a new row only
    if written > replay_limit(int(meta["documents"])):
        raise _Unusable(f"{changed} documents changed since they were taken")
    model = ReadModel.from_arrays(_unpack(meta, saved.arrays(read=_READ)))
    model.arrays_key = {"uid": meta["uid"], "seq": int(meta["seq"])}
    if model.with_dense and model.hw >= ann.EXACT_BELOW:  # the graph saved with these arrays
        model.attach_graph(ann.open_graph(saved.path.with_name(ann.FILE), model.arrays_key))
    if changed:
        replay(model, segment, int(meta["seq"]))
    if (model.listed_chunks(), model.chunks) != (chunks, chunks):
        raise _Unusable(
            f"they hold {model.chunks} chunks ({model.listed_chunks()} listed), the segment "
            f"{chunks}"
        )
    return model, changed


def replay(model: ReadModel, segment: SegmentFile, since: int) -> int:
    """Apply to `model` what the segment changed after change `since`, and say how many
    documents that was (written or removed). A document whose content hash is unchanged (a
    touched file: a new stamp) or was this model's before a move (`moved_since`) only gets its
    new entry. Replaying a change the model already holds changes nothing (a follower may
    replay from a `seq` its load went past)."""
    rows, gone = segment.changes_since(since)
    removed, was = set(gone), segment.moved_since(since)
    changed, relabelled = [], []
    for info in map(doc_info, rows):
        known = model.docs.get(info.id)
        same = known is not None and known.chunks == info.chunks
        same = same and known.hash in (info.hash, was.get(info.id))  # moved: the same chunks
        (relabelled if same and info.id not in removed else changed).append(info)
    model.relabel(relabelled)
    model.apply(changed, segment.chunk_rows([i.id for i in changed], model.with_dense), gone)
    return len(rows) + len(gone)


def _save(path: Path, a: ModelArrays, meta: dict) -> None:
    for tmp, pid in temp_files(path):  # a save that died: the index has one writer at a time
        if pid == os.getpid() or not _alive(pid):
            tmp.unlink(missing_ok=True)
    arrays = {
        "docs": np.frombuffer(marshal.dumps([d.as_row() for d in a.docs]), dtype=np.uint8),
        "chunk_ids": np.frombuffer(json.dumps(a.chunk_ids).encode(), dtype=np.uint8),
        "slot_doc": a.slot_doc,
        "slot_n": a.slot_n,
        "lengths": a.lengths,
        **{f"lexical.{k}": v for k, v in a.lexical._asdict().items()},
    }
    if a.matrix is not None:
        arrays["matrix"] = a.matrix
    if a.sparse is not None and a.sparse_alive is not None:
        arrays["sparse_alive"] = a.sparse_alive
        arrays.update({f"sparse.{k}": v for k, v in a.sparse._asdict().items()})
    for table in ("tags", "entities"):
        names, offsets, ids = getattr(a, table)
        arrays[f"{table}.names"] = np.frombuffer(json.dumps(names).encode(), dtype=np.uint8)
        arrays[f"{table}.offsets"], arrays[f"{table}.ids"] = offsets, ids
    write(path, arrays, {**meta, "documents": len(a.docs)})


def _unpack(meta: dict, arrays: dict[str, np.ndarray]) -> ModelArrays:
    tags, entities = (
        (json.loads(arrays[f"{t}.names"].tobytes()), arrays[f"{t}.offsets"], arrays[f"{t}.ids"])
        for t in ("tags", "entities")
    )
    rows = marshal.loads(arrays["docs"])  # intact (its CRC held); written by `_save` only
    if len(entities[1]) != len(rows) + 1 or len(tags[1]) != len(rows) + 1:
        raise _Unusable("name tables of another size than the documents")
    named = list(map(entities[0].__getitem__, entities[2].tolist()))  # one string per name
    docs = [
        DocInfo.from_row(row, tuple(named[a:b]))
        for row, (a, b) in zip(rows, itertools.pairwise(entities[1].tolist()), strict=True)
    ]
    chunk_ids = json.loads(arrays["chunk_ids"].tobytes())
    n, dim = len(chunk_ids), int(meta["dim"])
    matrix = arrays.get("matrix")
    sizes = {arrays["slot_doc"].size, arrays["slot_n"].size, arrays["lengths"].size}
    if sizes != {n} or (matrix is not None and matrix.shape != (n, dim)):
        raise _Unusable("arrays of unequal sizes")
    sparse = None
    if "sparse_alive" in arrays:
        sparse = Base(*(arrays[f"sparse.{k}"] for k in Base._fields))
    return ModelArrays(
        dim,
        bool(meta["with_dense"]),
        docs,
        chunk_ids,
        arrays["slot_doc"],
        arrays["slot_n"],
        matrix,
        arrays["lengths"],
        Base(*(arrays[f"lexical.{k}"] for k in Base._fields)),
        arrays.get("sparse_alive"),
        sparse,
        tags,
        entities,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
