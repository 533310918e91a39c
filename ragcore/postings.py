"""An inverted index over integer slots (`Postings`), and the best-of selection every channel
ends with (`top`).

`Postings` maps a term to the (slot, weight) pairs that hold it: a compact base (CSR, built with
numpy; as plain arrays a `Base`, which is what a saved read model stores) plus a delta of what
was added since, folded in bulk. The lexical channel (`ragcore.lexical.BM25Index`) keeps term
frequencies in one, the learned sparse channel (`ragcore.lexical.SparseIndex`) the model's
weights.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Base", "Postings", "top", "top_arrays"]


class Base(NamedTuple):
    """A compact posting base as plain arrays (CSR): the distinct terms, sorted; where each
    term's entries start (`offsets`, one longer than `terms`); the entries' slots and weights."""

    terms: np.ndarray  # int64
    offsets: np.ndarray  # int64
    slots: np.ndarray  # int32
    weights: np.ndarray  # float32

    @classmethod
    def of_entries(cls, slots: np.ndarray, terms: np.ndarray, weights: np.ndarray) -> Base:
        """The base holding these entries (parallel arrays, in any order)."""
        order = np.argsort(terms, kind="stable")
        terms, slots, weights = terms[order], slots[order], weights[order]
        unique, starts = np.unique(terms, return_index=True)
        return cls(
            unique.astype(np.int64),
            np.append(starts, terms.size).astype(np.int64),
            slots.astype(np.int32),
            weights.astype(np.float32),
        )


class Postings:
    """An inverted index over integer slots: term -> (slots, weights).

    A compact base (CSR: sorted term ids, offsets, slots, weights, built with numpy) plus a
    delta of what was added since (a dict of small lists). Removing a slot only marks it dead
    in the caller's `alive` array; its entries stay until the next `compact`, which folds the
    delta in and drops dead entries, vectorised. So an add or a remove costs O(its own terms),
    and a query touches only the posting lists of its terms."""

    def __init__(self) -> None:
        self._terms = np.empty(0, dtype=np.int64)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._slots = np.empty(0, dtype=np.int32)
        self._weights = np.empty(0, dtype=np.float32)
        self._delta: dict[int, tuple[list[int], list[float]]] = {}
        self.delta_entries = 0
        self._shared: set[int] = set()  # delta terms whose lists a clone's original also holds

    @property
    def base_entries(self) -> int:
        return int(self._slots.size)

    def clone(self) -> Postings:
        """A copy to change while this one keeps serving: the base arrays are shared (they are
        only ever replaced, never written in place); a delta list is copied when first changed."""
        new = Postings.__new__(Postings)
        new._terms, new._offsets = self._terms, self._offsets
        new._slots, new._weights = self._slots, self._weights
        new._delta = dict(self._delta)
        new.delta_entries = self.delta_entries
        new._shared = set(self._delta)
        return new

    def add(self, slot: int, terms: np.ndarray, weights: np.ndarray) -> None:
        for term, weight in zip(terms.tolist(), weights.tolist(), strict=True):
            entry = self._delta.get(term)
            if entry is None:
                entry = self._delta[term] = ([], [])
            elif term in self._shared:
                entry = self._delta[term] = (list(entry[0]), list(entry[1]))
                self._shared.discard(term)
            entry[0].append(slot)
            entry[1].append(weight)
        self.delta_entries += len(terms)

    def get(self, term: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Every (slot, weight) of `term`, dead slots included (the caller masks them)."""
        i = int(np.searchsorted(self._terms, term))
        base = None
        if i < self._terms.size and self._terms[i] == term:
            lo, hi = self._offsets[i], self._offsets[i + 1]
            base = (self._slots[lo:hi], self._weights[lo:hi])
        extra = self._delta.get(term)
        if extra is None:
            return base
        more = (np.asarray(extra[0], dtype=np.int32), np.asarray(extra[1], dtype=np.float32))
        if base is None:
            return more
        return np.concatenate([base[0], more[0]]), np.concatenate([base[1], more[1]])

    def load(self, slots: np.ndarray, terms: np.ndarray, weights: np.ndarray) -> None:
        """Replace everything with these entries (parallel arrays), as one compact base."""
        self.set_base(Base.of_entries(slots, terms, weights))

    def set_base(self, base: Base) -> None:
        """Replace everything with `base`. Its arrays are kept, never written (they may be
        read-only: memory-mapped from a saved read model)."""
        self._terms, self._offsets, self._slots, self._weights = base
        self._delta = {}
        self._shared = set()
        self.delta_entries = 0

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All (slots, terms, weights), base then delta."""
        counts = np.diff(self._offsets)
        base_terms = np.repeat(self._terms, counts)
        d_slots, d_terms, d_weights = [], [], []
        for term, (slots, weights) in self._delta.items():
            d_slots.extend(slots)
            d_terms.extend([term] * len(slots))
            d_weights.extend(weights)
        return (
            np.concatenate([self._slots, np.asarray(d_slots, dtype=np.int32)]),
            np.concatenate([base_terms, np.asarray(d_terms, dtype=np.int64)]),
            np.concatenate([self._weights, np.asarray(d_weights, dtype=np.float32)]),
        )

    def compact(self, alive: np.ndarray, renumber: np.ndarray | None = None) -> None:
        """Fold the delta into the base and drop the entries of dead slots; `renumber` maps
        old slots to new ones (a vacuum of the slot space)."""
        slots, terms, weights = self.entries()
        keep = alive[slots] if slots.size else np.zeros(0, dtype=bool)
        slots, terms, weights = slots[keep], terms[keep], weights[keep]
        if renumber is not None:
            slots = renumber[slots]
        self.load(slots, terms, weights)


def top(candidates: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The `limit` best (candidate, score) pairs, best first (ties by candidate order)."""
    found, values = top_arrays(candidates, scores, limit)
    return list(zip(found.tolist(), values.tolist(), strict=True))


def top_arrays(
    candidates: np.ndarray, scores: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """`top` as two arrays, the candidates and their scores, best first: a search's channels
    keep them so (`ragcore.hits`), and make Python objects only for what they show."""
    if candidates.size == 0 or limit <= 0:
        return candidates[:0], scores[:0]
    if candidates.size > limit:
        top = np.argpartition(-scores, limit - 1)[:limit]
    else:
        top = np.arange(candidates.size)
    order = top[np.argsort(-scores[top], kind="stable")]
    return candidates[order], scores[order]
