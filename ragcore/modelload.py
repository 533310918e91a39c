"""Loading a generation's read model from its segment's rows.

One pass in Python over every chunk row collects raw bytes and lengths; the arrays are then
made in bulk (`ModelArrays`) and the model built from them (`ReadModel.from_arrays`).
"""

from __future__ import annotations

import numpy as np

from ragcore.docinfo import DocInfo
from ragcore.postings import Base
from ragcore.readmodel import ModelArrays, ReadModel
from ragcore.segment import DocRow, SegmentFile

__all__ = ["doc_info", "from_segment", "load_model"]


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
    )


def load_model(segment: SegmentFile, dim: int, with_dense: bool) -> ReadModel:
    """The read model of a generation."""
    return ReadModel.from_arrays(from_segment(segment, dim, with_dense))
