"""The lexical channels: BM25 over term frequencies, and the model's learned sparse weights,
each on an in-memory inverted index.

Documents arrive as term-frequency sparse vectors (`ragcore.tokenizer`). `BM25Index` keeps them
as an inverted index (`ragcore.postings.Postings`: a numpy CSR base plus a delta, compacted in
bulk) and scores exact BM25 (Lucene variant) with the corpus statistics of the moment, which
keeps incremental updates exact (docs/adr/0001-lexical-channel-in-process.md). `SparseIndex`
does the same for a model's learned sparse weights (dot product instead of BM25).
"""

from __future__ import annotations

import threading

import numpy as np

from ragcore.cow import CowDict, CowList
from ragcore.postings import Base, Postings, top, top_arrays
from ragcore.tokenizer import term_id

__all__ = ["BM25Index", "SparseIndex"]

# A term with at least this many postings is where the top-k pruning is checked (below it a
# term costs less than the check). experiments/million, "The lexical channel at 1M".
PRUNE_TERMS_OVER = 20_000


class BM25Index:
    """Exact BM25 (Lucene variant) over an inverted index of term-frequency vectors.

    k1 = 0.9, b = 0.4 are Anserini's defaults; on all three benchmarks they beat Lucene's
    1.2 / 0.75 (experiments/retrieval-baselines).

    Keys are strings (chunk ids); each has an integer slot (given by the caller, or the next
    free one). `add`/`remove` keep the statistics exact (document frequency counts live slots
    only); `search` returns the top `limit` keys by BM25, optionally restricted to `allowed`
    keys, and `search_slots` the top slots restricted by a boolean mask over slots.
    """

    def __init__(self, k1: float = 0.9, b: float = 0.4):
        self.k1 = k1
        self.b = b
        self._slot: CowDict[str, int] = CowDict()  # copied per clone: its changes only
        self._keys: CowList[str | None] = CowList()
        self._length = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._postings = Postings()
        self._total_length = 0.0
        self._lock = threading.Lock()
        self._norms: np.ndarray | None = None  # each slot's length norm, until a change
        self.prune = True  # the top-k pruning of `_scores` (False: every posting is scored)
        self.pruned_terms = 0  # terms the last search scored on touched slots only

    def __len__(self) -> int:
        return len(self._slot)

    def clone(self) -> BM25Index:
        """A copy to change while this one keeps serving (see `Postings.clone`)."""
        with self._lock:
            new = BM25Index(self.k1, self.b)
            new._slot = self._slot.copy()
            new._keys = self._keys.copy()
            new._length = self._length.copy()
            new._alive = self._alive.copy()
            new._postings = self._postings.clone()
            new._total_length = self._total_length
            return new

    def __contains__(self, key: str) -> bool:
        return key in self._slot

    def _grow(self, size: int) -> None:
        if size > self._length.size:
            cap = max(size, 2 * self._length.size, 64)
            self._length = np.concatenate(
                [self._length, np.zeros(cap - self._length.size, dtype=np.float32)]
            )
            self._alive = np.concatenate(
                [self._alive, np.zeros(cap - self._alive.size, dtype=bool)]
            )
        while len(self._keys) < size:
            self._keys.append(None)

    def add(self, key: str, tf: dict[int, float], slot: int | None = None) -> int:
        """Index `key` (replacing an earlier version); returns its slot."""
        terms = np.fromiter(tf.keys(), dtype=np.int64, count=len(tf))
        weights = np.fromiter(tf.values(), dtype=np.float32, count=len(tf))
        return self.add_arrays(key, terms, weights, slot)

    def add_arrays(
        self, key: str, terms: np.ndarray, tfs: np.ndarray, slot: int | None = None
    ) -> int:
        with self._lock:
            if key in self._slot:
                self._remove(key)
            if slot is None:
                slot = len(self._keys)
            self._grow(slot + 1)
            if self._alive[slot]:
                raise ValueError(f"slot {slot} is taken")
            self._keys[slot] = key
            self._slot[key] = slot
            length = float(tfs.sum())
            self._length[slot] = length
            self._alive[slot] = True
            self._total_length += length
            self._postings.add(slot, terms, tfs)
            self._norms = None
            self._maybe_compact()
            return slot

    def load_base(self, keys: list[str], lengths: np.ndarray, base: Base) -> None:
        """Bulk load: `keys[i]` lives in slot i, `lengths[i]` is its token count; `base` holds
        the postings (its arrays are kept, never written)."""
        with self._lock:
            size = len(keys)
            self._keys = CowList(list(keys))
            self._slot = CowDict({key: slot for slot, key in enumerate(self._keys)})
            self._length = np.array(lengths, dtype=np.float32)  # a copy: removes write it
            self._alive = np.ones(size, dtype=bool)
            self._total_length = float(self._length.sum())
            self._postings.set_base(base)
            self._norms = None

    def remove(self, key: str) -> None:
        with self._lock:
            self._remove(key)

    def _remove(self, key: str) -> None:
        slot = self._slot.pop(key, None)
        if slot is None:
            return
        self._total_length -= float(self._length[slot])
        self._norms = None
        self._length[slot] = 0.0
        self._alive[slot] = False
        self._keys[slot] = None

    def _maybe_compact(self) -> None:
        base = self._postings.base_entries
        if self._postings.delta_entries > max(20_000, base // 8):
            self._postings.compact(self._alive)

    def renumber(self, mapping: np.ndarray, size: int) -> None:
        """Move every live slot s to `mapping[s]` (a vacuum of the caller's slot space)."""
        with self._lock:
            old_alive = self._alive.copy()
            keys = [(k, mapping[s]) for k, s in self._slot.items()]
            lengths = self._length[: old_alive.size][old_alive]
            new_slots = mapping[np.flatnonzero(old_alive)]
            self._postings.compact(old_alive, mapping)
            slot_of: dict[str, int] = {}
            key_of: list[str | None] = [None] * size
            self._length = np.zeros(max(size, 64), dtype=np.float32)
            self._alive = np.zeros(max(size, 64), dtype=bool)
            self._length[new_slots] = lengths
            self._alive[new_slots] = True
            self._norms = None
            for key, slot in keys:
                slot_of[key] = int(slot)
                key_of[int(slot)] = key
            self._slot, self._keys = CowDict(slot_of), CowList(key_of)

    def idf(self, term: int) -> float:
        n = len(self._slot)
        postings = self._postings.get(term)
        df = int(self._alive[postings[0]].sum()) if postings is not None else 0
        return float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))

    def token_idf(self, token: str) -> float:
        """IDF of a token as the tokenizer spells it (0-ish for a term in every document)."""
        return self.idf(term_id(token))

    def _scores(
        self, query_tf: dict[int, float], limit: int = 0, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Each slot's BM25 score, and which slots any query term touched. With `limit`,
        exact pruning for the top `limit` (of the slots `mask` allows): the terms go rarest
        first, and once the `limit`-th best score so far is above what every term left could
        still add (each term adds less than qtf * idf * (k1 + 1)), a slot no term has touched
        yet cannot reach the top: the common terms left are scored on the touched slots only
        (a term in half the documents then costs a gather, not a scatter of every posting).
        The top `limit` and their scores are those of the full sum."""
        n = len(self._slot)
        if n == 0 or not query_tf:
            return None
        size = len(self._keys)
        norms = self._norms
        if norms is None:  # once per state, not per query term: a gather less per term
            avgdl = max(self._total_length / n, 1e-9)
            norms = self.k1 * (1.0 - self.b + self.b * self._length / avgdl)
            self._norms = norms = norms.astype(np.float32)
        some_dead = n < size  # every slot below size is live when none was removed
        terms = []
        for term, qtf in query_tf.items():
            postings = self._postings.get(term)
            if postings is None:
                continue
            slots, tfs = postings
            if some_dead:
                live = self._alive[slots]
                if not live.all():
                    slots, tfs = slots[live], tfs[live]
            if slots.size:
                terms.append((slots, tfs, qtf))
        if limit and any(slots.size >= PRUNE_TERMS_OVER for slots, _, _ in terms):
            terms.sort(key=lambda t: t[0].size)  # rarest first: the most each can add, first
        else:
            limit = 0  # nothing to prune: the sum in the query's order, as it always was
        bounds = [qtf * self._idf(slots.size, n) * (self.k1 + 1.0) for slots, _, qtf in terms]
        left = float(sum(bounds))  # what the terms not yet scored could still add, at most
        scores = np.zeros(size, dtype=np.float32)
        touched = np.zeros(size, dtype=bool)
        pruning = False
        self.pruned_terms = 0
        for (slots, tfs, qtf), bound in zip(terms, bounds, strict=True):
            idf = self._idf(slots.size, n)  # of every live posting, pruned or not
            if not pruning and limit and slots.size >= PRUNE_TERMS_OVER:
                pruning = self._cannot_reach(scores, touched, limit, mask, left)
            if pruning:
                on = touched[slots]
                slots, tfs = slots[on], tfs[on]
                self.pruned_terms += 1
            scores[slots] += qtf * idf * tfs * (self.k1 + 1.0) / (tfs + norms[slots])
            if not pruning:
                touched[slots] = True
            left -= bound
        return scores, touched

    @staticmethod
    def _cannot_reach(
        scores: np.ndarray, touched: np.ndarray, limit: int, mask, left: float
    ) -> bool:
        """Whether the `limit`-th best allowed score so far is above `left` (then a slot no
        term touched yet cannot reach the top)."""
        slots = np.flatnonzero(touched)
        if mask is not None:
            slots = slots[slots < mask.size]
            slots = slots[mask[slots]]
        if slots.size < limit:
            return False
        kth = float(np.partition(scores[slots], slots.size - limit)[slots.size - limit])
        return kth > left * (1.0 + 1e-5) + 1e-6  # float32 sums: a margin for their rounding

    def _idf(self, df: int, n: int) -> float:
        return float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))

    def search_slots(
        self, query_tf: dict[int, float], limit: int, mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """Top (slot, score) pairs; `mask[slot]` False excludes a slot."""
        slots, scores = self.search_arrays(query_tf, limit, mask)
        return list(zip(slots.tolist(), scores.tolist(), strict=True))

    def search_arrays(
        self, query_tf: dict[int, float], limit: int, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`search_slots` as two arrays, the slots and their scores, best first."""
        with self._lock:
            found = self._scores(query_tf, limit if self.prune else 0, mask)
            if found is None:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            scores, touched = found
            if mask is not None:
                m = mask[: touched.size]
                touched[: m.size] &= m
                touched[m.size :] = False
            candidates = np.flatnonzero(touched)
            return top_arrays(candidates, scores[candidates], limit)

    def search(
        self, query_tf: dict[int, float], limit: int, allowed: set[str] | None = None
    ) -> list[tuple[str, float]]:
        mask = None
        if allowed is not None:
            mask = np.zeros(len(self._keys), dtype=bool)
            slots = [self._slot[k] for k in allowed if k in self._slot]
            mask[slots] = True
        hits = self.search_slots(query_tf, limit, mask)
        # ties in key order, not slot order: slots depend on the history of adds and removes
        return sorted(((self._keys[s], score) for s, score in hits), key=lambda h: (-h[1], h[0]))  # type: ignore[misc]


class SparseIndex:
    """The model's learned sparse weights (BGE-M3) on an inverted index: a query scores each
    slot by the dot product of the two weight vectors, over the query's terms only."""

    def __init__(self) -> None:
        self._postings = Postings()
        self._alive = np.zeros(0, dtype=bool)
        self._lock = threading.Lock()
        self.size = 0

    def __len__(self) -> int:
        return int(self._alive.sum())

    def clone(self) -> SparseIndex:
        """A copy to change while this one keeps serving (see `Postings.clone`)."""
        with self._lock:
            new = SparseIndex()
            new._postings = self._postings.clone()
            new._alive = self._alive.copy()
            new.size = self.size
            return new

    def _grow(self, size: int) -> None:
        if size > self._alive.size:
            cap = max(size, 2 * self._alive.size, 64)
            self._alive = np.concatenate([self._alive, np.zeros(cap - self._alive.size, bool)])
        self.size = max(self.size, size)

    def add(self, slot: int, weights: dict[int, float]) -> None:
        with self._lock:
            self._grow(slot + 1)
            self._alive[slot] = True
            terms = np.fromiter(weights.keys(), dtype=np.int64, count=len(weights))
            values = np.fromiter(weights.values(), dtype=np.float32, count=len(weights))
            self._postings.add(slot, terms, values)
            if self._postings.delta_entries > max(20_000, self._postings.base_entries // 8):
                self._postings.compact(self._alive)

    def load_base(self, alive: np.ndarray, base: Base) -> None:
        """Bulk load: `alive[slot]` says which slots hold weights; `base` holds the postings
        (its arrays are kept, never written)."""
        with self._lock:
            self._alive = np.array(alive, dtype=bool)  # a copy: removes write it
            self.size = int(self._alive.size)
            self._postings.set_base(base)

    def remove(self, slot: int) -> None:
        with self._lock:
            if slot < self._alive.size:
                self._alive[slot] = False

    def renumber(self, mapping: np.ndarray, size: int) -> None:
        with self._lock:
            old_alive = self._alive.copy()
            self._postings.compact(old_alive, mapping)
            self._alive = np.zeros(max(size, 64), dtype=bool)
            self._alive[mapping[np.flatnonzero(old_alive)]] = True
            self.size = size

    def search_slots(
        self, query: dict[int, float], limit: int, mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        with self._lock:
            if not query or not self.size:
                return []
            scores = np.zeros(self.size, dtype=np.float32)
            touched = np.zeros(self.size, dtype=bool)
            for term, weight in query.items():
                postings = self._postings.get(term)
                if postings is None:
                    continue
                slots, values = postings
                live = self._alive[slots]
                slots, values = slots[live], values[live]
                scores[slots] += weight * values
                touched[slots] = True
            touched &= scores > 0
            if mask is not None:
                m = mask[: touched.size]
                touched[: m.size] &= m
                touched[m.size :] = False
            candidates = np.flatnonzero(touched)
            return top(candidates, scores[candidates], limit)
