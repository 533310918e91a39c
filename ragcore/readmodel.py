"""The read model of one generation: everything a search needs, in memory, in numpy.

- documents: a `DocInfo` per document (the manifest entry plus the metadata filters and the
  ranking read), and per-document filter columns (status, type, source as small-integer codes,
  tags as sets of rows);
- chunks: integer slots; a float32 matrix of their dense vectors (one row per slot), the
  lexical channel (`BM25Index`) and the model's sparse channel (`SparseIndex`) over the same
  slots. Chunk text is not held here: a search reads the text of its hits from the segment.

A model is built in bulk from plain arrays (`ModelArrays`, `ReadModel.from_arrays`) - read from
the segment's rows or from the arrays saved beside it (`ragcore.modelload`) - and then changed
in place, one document at a time (`apply`, on a `clone` while the original keeps serving). Tags
and entities map to document rows (`ragcore.setindex`).

A filter is a boolean mask over slots, built with a few vectorised operations. A dense search
(`ragcore.dense`) scores every row with one matrix-vector product and keeps the best of the
allowed ones - or, on a large model with a graph attached (`attach_graph`, `ragcore.ann`),
rescores the graph's candidates exactly: no Python loop over points either way. Removing a
chunk marks its slot dead; when a quarter of the slots are dead they are renumbered.

Design and measurements: docs/adr/0008-an-in-memory-read-model-over-a-sqlite-segment.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragcore.ann import DenseGraph
from ragcore.cow import CowDict, CowList
from ragcore.dense import DenseRows
from ragcore.dense import search as search_rows
from ragcore.docinfo import DocInfo
from ragcore.hits import SlotHits, as_slots
from ragcore.lexical import BM25Index, SparseIndex
from ragcore.postings import Base
from ragcore.segment import ChunkRow
from ragcore.setindex import SetIndex
from ragcore.store import Filter

__all__ = ["ModelArrays", "ReadModel"]

VACUUM_DEAD_FRACTION = 0.25
NameTable = tuple[list[str], np.ndarray, np.ndarray]  # names, offsets by row, name ids
_REVISIONS = itertools.count(1)  # unique across read models: a revision names one state


class _Codes:
    """Small-integer codes for the values of one field (0 = absent)."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}

    def of(self, value: str) -> int:
        code = self.code.get(value)
        if code is None:
            code = self.code[value] = len(self.code) + 1
        return code

    def of_each(self, values: list[str]) -> np.ndarray:
        """The code of each value (new values get theirs in the order first seen)."""
        for value in dict.fromkeys(values):
            self.of(value)
        return np.fromiter(map(self.code.__getitem__, values), dtype=np.int16, count=len(values))

    def copy(self) -> _Codes:
        new = _Codes()
        new.code = dict(self.code)
        return new

    def rows_in(self, values: Iterable[str], column: np.ndarray) -> np.ndarray:
        table = np.zeros(len(self.code) + 1, dtype=bool)  # a lookup: np.isin is ~7x slower
        table[[self.code[v] for v in values if v in self.code]] = True
        return table[column]


@dataclass
class _Columns:
    status: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16))
    type: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16))
    source: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16))
    scope: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int16))


COLUMNS = ("status", "type", "source", "scope")  # the filter's one-value fields, a code per row


@dataclass
class ModelArrays:
    """A read model as plain data, every slot live: what `ReadModel.from_arrays` builds from.
    Arrays may be read-only (memory-mapped): the model never writes into them."""

    dim: int
    with_dense: bool
    docs: list[DocInfo]  # one per document row
    chunk_ids: list[str]  # one per slot
    slot_doc: np.ndarray  # int32: the document row of each slot
    slot_n: np.ndarray  # int32: the chunk's number within its document
    matrix: np.ndarray | None  # float32 (slots, dim); None without dense vectors
    lengths: np.ndarray  # float32: each slot's token count (BM25)
    lexical: Base  # term frequencies
    sparse_alive: np.ndarray | None  # bool: the slots with learned sparse weights
    sparse: Base | None  # learned sparse weights (None: the model gives none)
    tags: NameTable  # each document row's tags (`ragcore.setindex.name_table`)
    entities: NameTable  # each document row's entities, in DocInfo.entities order


class ReadModel:
    def __init__(self, dim: int, *, with_dense: bool = True):
        self.dim = dim
        self.with_dense = with_dense
        self.revision = 0
        # documents
        self.docs: CowDict[str, DocInfo] = CowDict()
        self._listed = 0  # sum of docs' chunk counts
        self._doc_row: CowDict[str, int] = CowDict()
        self._row_doc: CowList[str | None] = CowList()
        self._free_rows: list[int] = []
        self._cols = _Columns()
        self._codes = {name: _Codes() for name in COLUMNS}
        self._tags = SetIndex()  # tag -> the rows of the documents carrying it
        self._entities = SetIndex()  # entity -> the rows of the documents naming it
        self._doc_slots: CowDict[str, list[int]] = CowDict()
        # chunks
        self.hw = 0  # slots in use (high-water mark)
        self._slot_chunk: CowList[str | None] = CowList()
        self._chunk_slot: CowDict[str, int] = CowDict()
        self._slot_doc = np.zeros(0, dtype=np.int32)
        self._slot_n = np.zeros(0, dtype=np.int32)
        self._alive = np.zeros(0, dtype=bool)
        self._rows = DenseRows(dim)
        self._graph: DenseGraph | None = None
        self.vacuums = 0  # renumberings so far (a graph built before one no longer fits)
        self.arrays_key: dict | None = None  # the saved arrays the base rows are (uid, seq)
        self._masks: dict[Filter, np.ndarray] = {}  # filter -> its mask, on this state only
        self.bm25 = BM25Index()
        self.sparse = SparseIndex()
        self.has_sparse = False

    def clone(self) -> ReadModel:
        """A copy to change (`apply`) while this one keeps serving searches, unchanged.

        Copy-on-write: the maps by document and by chunk copy only their changes since their
        shared base (`ragcore.cow`); what a change writes in place (the `alive` flags, the
        filter columns, the slot -> chunk list) is copied; what a change only appends to
        beyond this model's high-water mark (the dense matrix, the slot arrays) or replaces
        whole (the posting bases) is shared; a tag's or entity's set is copied when first
        changed. The dense matrix is never copied."""
        new = ReadModel.__new__(ReadModel)
        new.dim, new.with_dense, new.revision = self.dim, self.with_dense, self.revision
        new.docs = self.docs.copy()
        new._listed = self._listed
        new._doc_row = self._doc_row.copy()
        new._row_doc = self._row_doc.copy()
        new._free_rows = list(self._free_rows)
        new._cols = _Columns(*(getattr(self._cols, name).copy() for name in COLUMNS))
        new._codes = {name: codes.copy() for name, codes in self._codes.items()}
        new._tags = self._tags.clone()
        new._entities = self._entities.clone()
        new._doc_slots = self._doc_slots.copy()  # lists are replaced, never changed in place
        new.hw = self.hw
        new._slot_chunk = self._slot_chunk.copy()
        new._chunk_slot = self._chunk_slot.copy()
        new._slot_doc, new._slot_n = self._slot_doc, self._slot_n  # written beyond hw only
        new._alive = self._alive.copy()
        new._rows = self._rows  # written beyond hw only; a vacuum makes new rows
        new._graph, new.vacuums = self._graph, self.vacuums  # a graph is never changed
        new.arrays_key = self.arrays_key
        new._masks = {}
        new.bm25 = self.bm25.clone()
        new.sparse = self.sparse.clone()
        new.has_sparse = self.has_sparse
        return new

    # -- sizes --------------------------------------------------------------------------------
    @property
    def chunks(self) -> int:
        return len(self._chunk_slot)

    def listed_chunks(self) -> int:
        """Chunks the manifest lists (kept as a running total: the check runs per search)."""
        return self._listed

    # -- documents ----------------------------------------------------------------------------
    def _grow_docs(self, size: int) -> None:
        if size > self._cols.status.size:
            cap = max(size, 2 * self._cols.status.size, 64)
            for name in COLUMNS:
                old = getattr(self._cols, name)
                new = np.zeros(cap, dtype=np.int16)
                new[: old.size] = old
                setattr(self._cols, name, new)
        while len(self._row_doc) < size:
            self._row_doc.append(None)

    def _put_doc(self, info: DocInfo) -> int:
        row = self._doc_row.get(info.id)
        if row is None:
            row = self._free_rows.pop() if self._free_rows else len(self._row_doc)
            self._grow_docs(row + 1)
            self._doc_row[info.id] = row
            self._row_doc[row] = info.id
        else:
            self._forget_names(self.docs[info.id], row)
            self._listed -= self.docs[info.id].chunks
        self.docs[info.id] = info
        self._listed += info.chunks
        self._cols.status[row] = self._codes["status"].of(info.status)
        self._cols.type[row] = self._codes["type"].of(info.type)
        self._cols.source[row] = self._codes["source"].of(info.source)
        self._cols.scope[row] = self._codes["scope"].of(info.scope)
        for tag in info.tags:
            self._tags.add(tag, row)
        for entity in info.entities:
            self._entities.add(entity, row)
        return row

    def _put_docs(self, infos: Sequence[DocInfo], tags: NameTable, entities: NameTable) -> None:
        """Every document of an empty model at once, in rows 0..n-1, with their tags and
        entities by row."""
        n = len(infos)
        self._grow_docs(n)
        ids: list[str | None] = [info.id for info in infos]
        self._doc_row = CowDict({doc_id: row for row, doc_id in enumerate(ids)})  # type: ignore[misc]
        self.docs = CowDict(dict(zip(ids, infos, strict=True)))  # type: ignore[arg-type]
        self._row_doc = CowList(ids)
        self._listed = sum(info.chunks for info in infos)
        metas = [info.meta for info in infos]
        self._cols.status[:n] = self._codes["status"].of_each(
            [str(m.get("status") or "active") for m in metas]  # as DocInfo.status
        )
        self._cols.type[:n] = self._codes["type"].of_each(
            [str(m.get("type") or "note") for m in metas]  # as DocInfo.type
        )
        self._cols.source[:n] = self._codes["source"].of_each([info.source for info in infos])
        self._cols.scope[:n] = self._codes["scope"].of_each(
            [str(m.get("scope") or "global") for m in metas]  # as DocInfo.scope
        )
        self._tags = SetIndex.build(*tags)
        self._entities = SetIndex.build(*entities)

    def _forget_names(self, info: DocInfo, row: int) -> None:
        for tag in info.tags:
            self._tags.discard(tag, row)
        for entity in info.entities:
            self._entities.discard(entity, row)

    def entity_docs(self, entity: str) -> set[str]:
        """The documents that name `entity`."""
        return {self._row_doc[row] for row in self._entities.rows(entity)}  # type: ignore[misc]

    def entity_count(self, entity: str) -> int:
        """How many documents name `entity`."""
        return self._entities.count(entity)

    def _drop_doc(self, doc_id: str) -> None:
        info = self.docs.pop(doc_id, None)
        if info is None:
            return
        self._listed -= info.chunks
        for slot in self._doc_slots.pop(doc_id, []):
            self._drop_slot(slot)
        row = self._doc_row.pop(doc_id)
        self._forget_names(info, row)
        self._row_doc[row] = None
        for name in COLUMNS:
            getattr(self._cols, name)[row] = 0
        self._free_rows.append(row)

    # -- chunks -------------------------------------------------------------------------------
    def _grow_slots(self, size: int) -> None:
        if size <= self._alive.size:
            return
        cap = max(size, 2 * self._alive.size, 64)
        grow = cap - self._alive.size
        self._slot_doc = np.concatenate([self._slot_doc, np.zeros(grow, dtype=np.int32)])
        self._slot_n = np.concatenate([self._slot_n, np.zeros(grow, dtype=np.int32)])
        self._alive = np.concatenate([self._alive, np.zeros(grow, dtype=bool)])

    def _put_slot(self, chunk_id: str, doc_row: int, n: int, dense, terms, tfs, sparse) -> int:
        slot = self.hw
        self.hw += 1
        self._grow_slots(self.hw)
        self._slot_chunk.append(chunk_id)
        self._chunk_slot[chunk_id] = slot
        self._slot_doc[slot] = doc_row
        self._slot_n[slot] = n
        self._alive[slot] = True
        if self.with_dense:
            self._rows.put(slot, dense)
        self.bm25.add_arrays(chunk_id, terms, tfs, slot=slot)
        if sparse:
            self.sparse.add(slot, sparse)
            self.has_sparse = True
        return slot

    def _drop_slot(self, slot: int) -> None:
        chunk_id = self._slot_chunk[slot]
        if chunk_id is None:
            return
        self._slot_chunk[slot] = None
        self._chunk_slot.pop(chunk_id, None)
        self._alive[slot] = False
        self.bm25.remove(chunk_id)
        self.sparse.remove(slot)

    # -- changes ------------------------------------------------------------------------------
    def apply(self, infos: Sequence[DocInfo], rows: Sequence[ChunkRow], gone: Iterable[str]):
        """Replace the documents `infos` (with their chunk `rows`) and drop the ids `gone`."""
        for doc_id in [*gone, *(i.id for i in infos)]:
            self._drop_doc(doc_id)
        by_doc: dict[str, list[ChunkRow]] = {}
        for row in rows:
            by_doc.setdefault(row.doc_id, []).append(row)
        for info in infos:
            doc_row = self._put_doc(info)
            slots = []
            for c in by_doc.get(info.id, []):
                slots.append(
                    self._put_slot(c.chunk_id, doc_row, c.n, c.dense, c.terms, c.tfs, c.sparse)
                )
            self._doc_slots[info.id] = slots
        self.revision = next(_REVISIONS)
        self._masks = {}
        if self.hw > 1000 and self.hw - self.chunks > VACUUM_DEAD_FRACTION * self.hw:
            self.vacuum()

    @classmethod
    def from_arrays(cls, a: ModelArrays) -> ReadModel:
        """A model holding exactly `a` (its big arrays are shared, not copied: a change
        appends beyond them into new arrays, or replaces them whole)."""
        model = cls(a.dim, with_dense=a.with_dense)
        model._put_docs(a.docs, a.tags, a.entities)
        n = len(a.chunk_ids)
        model.hw = n
        model._slot_chunk = CowList(list(a.chunk_ids))
        model._chunk_slot = CowDict({c: s for s, c in enumerate(a.chunk_ids)})
        order = np.argsort(a.slot_doc, kind="stable")
        bounds = np.searchsorted(a.slot_doc[order], np.arange(len(a.docs) + 1)).tolist()
        slots = order.tolist()
        model._doc_slots = CowDict(
            {info.id: slots[bounds[row] : bounds[row + 1]] for row, info in enumerate(a.docs)}
        )
        # every per-slot array exactly n long: the first new slot grows them all into copies
        model._slot_doc, model._slot_n = a.slot_doc, a.slot_n
        model._alive = np.ones(n, dtype=bool)
        if a.with_dense:
            model._rows = DenseRows(a.dim, a.matrix)
        model.bm25.load_base(a.chunk_ids, a.lengths, a.lexical)
        if a.sparse is not None and a.sparse_alive is not None:
            model.sparse.load_base(a.sparse_alive, a.sparse)
            model.has_sparse = True
        model.revision = next(_REVISIONS)
        return model

    def relabel(self, infos: Iterable[DocInfo]) -> None:
        """New manifest entries for indexed documents whose content (hash) is unchanged, e.g.
        a touched file's stamp: their chunks, filter columns and entities stay, and so does
        the revision (nothing a search reads changed)."""
        for info in infos:
            if info.id in self.docs:
                self.docs[info.id] = info

    def vacuum(self) -> None:
        """Renumber the live slots 0..n-1 and drop the dead ones everywhere."""
        live = np.flatnonzero(self._alive[: self.hw])
        self.vacuums += 1
        self._masks = {}
        mapping = np.full(max(self.hw, 1), -1, dtype=np.int64)
        mapping[live] = np.arange(live.size)
        size = int(live.size)
        self.bm25.renumber(mapping, size)
        self.sparse.renumber(mapping, size)
        chunks = list(self._slot_chunk)
        kept = [chunks[s] for s in live.tolist()]
        self._slot_chunk = CowList(kept)
        self._chunk_slot = CowDict({c: i for i, c in enumerate(kept)})  # type: ignore[misc]
        self._doc_slots = CowDict(
            {doc_id: [int(mapping[s]) for s in slots] for doc_id, slots in self._doc_slots.items()}
        )
        cap = max(size, 64)
        for name, dtype in (("_slot_doc", np.int32), ("_slot_n", np.int32)):
            new = np.zeros(cap, dtype=dtype)
            new[:size] = getattr(self, name)[live]
            setattr(self, name, new)
        if self._graph is not None:
            cover = int(np.count_nonzero(self._alive[: self._graph.cover]))
            self._graph = self._graph.remap(mapping, cover)
        alive = np.zeros(cap, dtype=bool)
        alive[:size] = True
        self._alive = alive
        if self.with_dense:
            self._rows = self._rows.compacted(live)
        self.hw = size

    # -- reads --------------------------------------------------------------------------------
    def doc_of(self, chunk_id: str) -> str | None:
        slot = self._chunk_slot.get(chunk_id)
        return None if slot is None else self._row_doc[int(self._slot_doc[slot])]

    def chunk_of(self, slot: int) -> str:
        return self._slot_chunk[slot]  # type: ignore[return-value]

    def slots_of(self, doc_id: str) -> list[int]:
        return self._doc_slots.get(doc_id, [])

    def mask(self, flt: Filter | None) -> np.ndarray | None:
        """Which slots the filter allows (dead slots never), or None for "every live slot".
        Kept per filter on this model (a published model never changes; a clone starts with
        none): every search with the default filters reuses one mask, read-only."""
        if flt is None or flt.is_empty():
            return None
        masks = self._masks
        try:
            found = masks.get(flt)
        except TypeError:  # a filter built with lists: not hashable, computed each time
            return self._mask(flt)
        if found is None:
            found = self._mask(flt)
            found.flags.writeable = False
            if len(masks) >= 8:
                masks.clear()
            masks[flt] = found
        return found

    def _mask(self, flt: Filter) -> np.ndarray:
        rows = np.ones(len(self._row_doc), dtype=bool)
        n = rows.size
        for name, values in (
            ("status", flt.statuses),
            ("type", flt.types),
            ("source", flt.sources),
            ("scope", flt.scopes),
        ):
            if values is not None:
                rows &= self._codes[name].rows_in(values, getattr(self._cols, name)[:n])
        if flt.tags is not None:
            tagged = np.zeros(n, dtype=bool)
            for tag in flt.tags:
                if hit := self._tags.rows(tag):
                    tagged[list(hit)] = True
            rows &= tagged
        if flt.doc_ids is not None:
            listed = np.zeros(n, dtype=bool)
            listed[[self._doc_row[d] for d in flt.doc_ids if d in self._doc_row]] = True
            rows &= listed
        if flt.exclude_ids:
            rows[[self._doc_row[d] for d in flt.exclude_ids if d in self._doc_row]] = False
        return rows[self._slot_doc[: self.hw]] & self._alive[: self.hw]

    def dense_search(
        self, vector: np.ndarray, limit: int, mask: np.ndarray | None, also: Sequence = ()
    ) -> SlotHits:
        """Cosine top `limit` (chunk id, score) among the allowed slots (`ragcore.dense`:
        exact, or the graph's candidates and the chunks `also` names rescored exactly)."""
        if self.hw == 0:
            return self._hits(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        allowed = self._alive[: self.hw] if mask is None else mask
        extra = as_slots(also, self._chunk_slot)
        found = search_rows(self._rows, self._graph, vector, limit, allowed, self.hw, extra)
        return self._hits(*found)

    def _hits(self, slots: np.ndarray, scores: np.ndarray) -> SlotHits:
        return SlotHits(slots, scores, self._slot_chunk, self._slot_doc, self._row_doc)

    @property
    def graph(self) -> DenseGraph | None:
        return self._graph

    @property
    def base_rows(self) -> np.ndarray:
        """The dense rows the model was loaded with (slots 0..n-1; a graph's keys)."""
        return self._rows.base

    def attach_graph(self, graph: DenseGraph | None) -> None:
        """Search dense vectors on `graph` (over slots 0..graph.cover-1, before any vacuum
        since; on a clone about to be published). The exact scan's int8 copy is let go."""
        self._graph = graph
        if graph is not None:
            self._rows.let_go_int8()

    def vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        out = {}
        for cid in chunk_ids:
            slot = self._chunk_slot.get(cid)
            if slot is not None and self.with_dense:
                out[cid] = self._rows.row(slot)
        return out

    def lexical_search(self, query_tf, limit: int, mask) -> SlotHits:
        return self._hits(*self.bm25.search_arrays(query_tf, limit, mask))

    def sparse_search(self, query, limit: int, mask) -> list[tuple[str, float]]:
        return [(self._slot_chunk[s], sc) for s, sc in self.sparse.search_slots(query, limit, mask)]  # type: ignore[misc]

    def iter_docs(self) -> Iterator[DocInfo]:
        return iter(list(self.docs.values()))
