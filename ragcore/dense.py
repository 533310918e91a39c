"""The dense vectors of a read model and its dense search: exact below a size, on an HNSW
graph (`ragcore.ann`) with exact rescoring above it.

`DenseRows` holds one float32 row per slot in two parts: the base, as the model was loaded
(possibly memory-mapped from the saved arrays, never written), and a tail for the slots added
since, which grows by copies of itself only. A clone shares both (a change writes only beyond
every published high-water mark, as before); a vacuum makes a new one. So an add at a million
rows copies no 1.5 GB matrix, and a mapped base stays a file's pages.

`search` is the one decision: exact when the model is small, has no graph, or the filter leaves
few rows (from 8,192 slots through an int8 shortlist rescored in float32: `ragcore.int8_scan`,
ADR 0029); otherwise graph candidates (over-fetched by the filter's share), the allowed ones and
the slots the graph does not cover (added since it was built) rescored exactly, best first.
"""

from __future__ import annotations

import threading

import numpy as np

from ragcore import int8_scan
from ragcore.ann import EXACT_BELOW, FILTER_EXACT_BELOW, DenseGraph, fetch_for
from ragcore.postings import top_arrays

__all__ = ["DenseRows", "search"]


class DenseRows:
    def __init__(self, dim: int, base: np.ndarray | None = None):
        self.dim = dim
        self.base = base if base is not None else np.zeros((0, dim), dtype=np.float32)
        self.n0 = int(self.base.shape[0])
        self.tail = np.zeros((0, dim), dtype=np.float32)
        self._int8: int8_scan.Int8Rows | None = None  # rows 0..its n-1, replaced whole
        self._int8_lock = threading.Lock()

    def put(self, slot: int, vector) -> None:
        """Write the row of a new slot (at or beyond every published high-water mark)."""
        i = slot - self.n0
        if i < 0:
            raise ValueError(f"slot {slot} is in the read-only base")
        if i >= self.tail.shape[0]:
            cap = max(i + 1, 2 * self.tail.shape[0], 64)
            tail = np.zeros((cap, self.dim), dtype=np.float32)
            tail[: self.tail.shape[0]] = self.tail
            self.tail = tail  # one assignment: a reader sees the old rows either way
        self.tail[i] = vector

    def row(self, slot: int) -> np.ndarray:
        return self.base[slot] if slot < self.n0 else self.tail[slot - self.n0]

    def take(self, slots: np.ndarray) -> np.ndarray:
        """The rows of `slots` (a copy), in their order."""
        if slots.size == 0 or (self.n0 and slots.max() < self.n0):
            return self.base[slots]
        tail = self.tail
        out = np.empty((slots.size, self.dim), dtype=np.float32)
        low = slots < self.n0
        out[low] = self.base[slots[low]]
        out[~low] = tail[slots[~low] - self.n0]
        return out

    def scores(self, vector: np.ndarray, hw: int, start: int = 0) -> np.ndarray:
        """The cosine of every slot from `start` to below `hw`."""
        head = self.base[min(start, self.n0) : min(hw, self.n0)] @ vector
        if hw <= self.n0:
            return head
        tail = self.tail[max(start - self.n0, 0) : hw - self.n0] @ vector
        return np.concatenate([head, tail]) if head.size else tail

    def shortlist_scores(self, vector: np.ndarray, hw: int) -> np.ndarray | None:
        """Scores of every slot below `hw` good enough to pick a shortlist by: the int8
        copy's (`ragcore.int8_scan`) for the slots it holds, float32 beyond. None where the
        float32 scan is as fast or the graph's job (outside SCAN_FROM..SCAN_UP_TO), or
        without onnxruntime."""
        if not int8_scan.SCAN_FROM <= hw <= int8_scan.SCAN_UP_TO or not int8_scan.available():
            return None
        copy = self._int8
        if _stale(copy, hw):
            copy = self._requantize(hw) or copy
            if copy is None:
                return None
        held = min(copy.n, hw)
        try:
            scores = copy.scores(vector)[:held]
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime failed: float32 answers
            int8_scan.scan_failed(exc)
            return None
        return scores if held == hw else np.concatenate([scores, self.scores(vector, hw, held)])

    def _requantize(self, hw: int) -> int8_scan.Int8Rows | None:
        """A new int8 copy of slots 0..hw-1; None if another search is making one (this
        one goes on with the copy there is, or float32)."""
        if not self._int8_lock.acquire(blocking=False):
            return None
        try:
            if not _stale(self._int8, hw):  # another search made it meanwhile
                return self._int8
            parts = [self.base[: min(hw, self.n0)]]
            if hw > self.n0:
                parts.append(self.tail[: hw - self.n0])
            self._int8 = int8_scan.Int8Rows(parts, self.dim)
            return self._int8
        finally:
            self._int8_lock.release()

    def let_go_int8(self) -> None:
        """Drop the int8 copy (a graph now answers; a search that still needs one remakes it)."""
        self._int8 = None

    def compacted(self, live: np.ndarray) -> DenseRows:
        """The rows of `live` slots, renumbered 0..n-1, in memory (a vacuum)."""
        return DenseRows(self.dim, self.take(live))


def _stale(copy: int8_scan.Int8Rows | None, hw: int) -> bool:
    """No int8 copy yet, or slots written after it are over a quarter of it."""
    return copy is None or hw - copy.n > max(int8_scan.SCAN_FROM, copy.n // 4)


def _shortlisted(limit: int, candidates: np.ndarray, rough: np.ndarray) -> np.ndarray:
    """The slots to rescore: the best `shortlist(limit)` by int8 score, and every one within
    MARGIN of the `limit`-th best (at most MOST)."""
    scores = rough[candidates]
    count = int8_scan.shortlist(limit)
    if 0 < limit < scores.size:
        floor = np.partition(scores, scores.size - limit)[scores.size - limit] - int8_scan.MARGIN
        count = max(count, min(int(np.count_nonzero(scores >= floor)), int8_scan.MOST))
    return top_arrays(candidates, scores, count)[0]


def search(
    rows: DenseRows,
    graph: DenseGraph | None,
    vector: np.ndarray,
    limit: int,
    allowed: np.ndarray,
    hw: int,
    also: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The best `limit` slots and their cosines among the `allowed` slots below `hw`, best
    first (two arrays: `ragcore.hits`).
    `also`: slots to score exactly beside the graph's candidates (a search passes its lexical
    candidates: one the graph missed keeps its dense score, as in the exact scan)."""
    vector = np.asarray(vector, dtype=np.float32)
    if graph is not None and hw >= EXACT_BELOW:
        n_allowed = int(np.count_nonzero(allowed))
        if n_allowed > FILTER_EXACT_BELOW:
            found = _on_graph(rows, graph, vector, limit, allowed, hw, n_allowed, also)
            if found is not None:
                return found
    candidates = np.flatnonzero(allowed)
    selective = candidates.size * 4 < hw  # a selective filter: score only what it allows
    if not selective or candidates.size >= int8_scan.TAKE_BELOW:
        rough = rows.shortlist_scores(vector, hw)
        if rough is not None:  # the int8 scan's shortlist, rescored exactly
            short = _shortlisted(limit, candidates, rough)
            return top_arrays(short, rows.take(short) @ vector, limit)
    if selective:
        return top_arrays(candidates, rows.take(candidates) @ vector, limit)
    scores = rows.scores(vector, hw)
    return top_arrays(candidates, scores[candidates], limit)


def _on_graph(rows, graph, vector, limit, allowed, hw, n_allowed, also=None):
    cover = min(graph.cover, hw)
    slots = graph.candidates(vector, fetch_for(limit, n_allowed / hw))
    slots = slots[slots < cover]
    slots = slots[allowed[slots]]
    covered_allowed = n_allowed - int(np.count_nonzero(allowed[cover:hw]))
    if slots.size < min(limit, covered_allowed):
        return None  # the filter hid most of the graph's answer: the exact scan decides
    tail = np.flatnonzero(allowed[cover:hw]) + cover
    candidates = np.concatenate([slots, tail]) if tail.size else slots
    if also is not None and also.size:
        also = also[(also >= 0) & (also < hw)]
        candidates = np.union1d(candidates, also[allowed[also]])
    return top_arrays(candidates, rows.take(candidates) @ vector, limit)
