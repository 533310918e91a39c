"""A channel's answer as arrays (`SlotHits`): the slots it found and their scores, best first,
over one read model - and each document's best chunk among them (`per_document`).

A search asks two or three channels for 100 chunks each and keeps one chunk per document.
Made as (chunk id, score) pairs, that was a chunk id string per hit, then a lookup of each
id's slot and document, then a dict of the best per document: most of ragcore's Python per
search at 10,000 entries (experiments/concurrency, round 9). Here the best chunk of each
document is chosen over the arrays (the slot -> document row map the read model keeps), and
ids are made only for the chunks kept. A `SlotHits` still reads as the sequence of (chunk id,
score) pairs it was, for every other caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["SlotHits"]


class SlotHits(Sequence[tuple[str, float]]):
    """(chunk id, score) pairs, best first, kept as `slots` and `scores` arrays over one
    published read model (its maps are never written below its high-water mark)."""

    __slots__ = ("_row_doc", "_slot_chunk", "_slot_doc", "scores", "slots")

    def __init__(self, slots: np.ndarray, scores: np.ndarray, slot_chunk, slot_doc, row_doc):
        self.slots, self.scores = slots, scores
        self._slot_chunk, self._slot_doc, self._row_doc = slot_chunk, slot_doc, row_doc

    def __len__(self) -> int:
        return int(self.slots.size)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._slot_chunk[int(self.slots[i])], float(self.scores[i])

    def __iter__(self) -> Iterator[tuple[str, float]]:
        chunk = self._slot_chunk
        return iter(
            [(chunk[s], v) for s, v in zip(self.slots.tolist(), self.scores.tolist(), strict=True)]
        )

    def per_document(self) -> list[tuple[str, str, float]]:
        """(document id, its best chunk's id, that chunk's score), best first - as a loop over
        the pairs would keep them: of a document's chunks the first with its highest score;
        documents by that score, ties in the order each document first appears."""
        n = self.slots.size
        if n == 0:
            return []
        rows = self._slot_doc[self.slots]
        at = np.arange(n)
        by_row = np.lexsort((at, -self.scores, rows))  # each row's best hit first
        sorted_rows = rows[by_row]
        starts = np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])
        best = by_row[starts]
        first_seen = np.minimum.reduceat(by_row, starts)
        keep = best[np.lexsort((first_seen, -self.scores[best]))]
        row_doc, chunk = self._row_doc, self._slot_chunk
        return [
            (doc, chunk[s], v)
            for r, s, v in zip(
                rows[keep].tolist(),
                self.slots[keep].tolist(),
                self.scores[keep].tolist(),
                strict=True,
            )
            if (doc := row_doc[r]) is not None
        ]


def as_slots(found: Sequence[Any], chunk_slot) -> np.ndarray:
    """The slots of `found` - a `SlotHits`, chunk ids, or (chunk id, score) pairs (a list made
    of another channel's hits) - with -1 for a chunk not in the model."""
    if isinstance(found, SlotHits):
        return found.slots.astype(np.int64, copy=False)
    ids = [c if isinstance(c, str) else c[0] for c in found]
    return np.array([chunk_slot.get(c, -1) for c in ids], dtype=np.int64)
