"""The dense vectors of a read model and its dense search: exact below a size, on an HNSW
graph (`ragcore.ann`) with exact rescoring above it.

`DenseRows` holds one float32 row per slot in two parts: the base, as the model was loaded
(possibly memory-mapped from the saved arrays, never written), and a tail for the slots added
since, which grows by copies of itself only. A clone shares both (a change writes only beyond
every published high-water mark, as before); a vacuum makes a new one. So an add at a million
rows copies no 1.5 GB matrix, and a mapped base stays a file's pages.

`search` is the one decision: exact when the model is small, has no graph, or the filter leaves
few rows; otherwise graph candidates (over-fetched by the filter's share), the allowed ones and
the slots the graph does not cover (added since it was built) rescored exactly, best first.
"""

from __future__ import annotations

import numpy as np

from ragcore.ann import EXACT_BELOW, FILTER_EXACT_BELOW, DenseGraph, fetch_for
from ragcore.postings import top_arrays

__all__ = ["DenseRows", "search"]


class DenseRows:
    def __init__(self, dim: int, base: np.ndarray | None = None):
        self.dim = dim
        self.base = base if base is not None else np.zeros((0, dim), dtype=np.float32)
        self.n0 = int(self.base.shape[0])
        self.tail = np.zeros((0, dim), dtype=np.float32)

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

    def scores(self, vector: np.ndarray, hw: int) -> np.ndarray:
        """The cosine of every slot below `hw`."""
        head = self.base[: min(hw, self.n0)] @ vector
        if hw <= self.n0:
            return head
        return np.concatenate([head, self.tail[: hw - self.n0] @ vector])

    def compacted(self, live: np.ndarray) -> DenseRows:
        """The rows of `live` slots, renumbered 0..n-1, in memory (a vacuum)."""
        return DenseRows(self.dim, self.take(live))


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
    if candidates.size * 4 < hw:  # a selective filter: score only what it allows
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
