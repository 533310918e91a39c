"""The lexical channel: a tokenizer for English and Chinese, and BM25 over an in-memory
inverted index.

Tokens: text is lower-cased; runs of ASCII letters and digits become English words (stop words
dropped, Snowball-stemmed); runs of CJK characters become jieba search-mode words plus the
character unigrams and bigrams of the run. Bigrams make the channel robust where jieba segments
a name one way in the question and another way in the text, and unigrams catch one-character
words; `experiments/retrieval-baselines` has the
measurement behind that choice.

Documents are stored as term-frequency sparse vectors (term ids are stable 31-bit hashes of the
tokens), so a store can persist them; `BM25Index` keeps them as an inverted index (`Postings`: a
numpy CSR base plus a delta, compacted in bulk) and scores exact BM25 (Lucene variant) with the
corpus statistics of the moment, which keeps incremental updates exact
(docs/adr/0001-lexical-channel-in-process.md). `SparseIndex` does the same for a model's learned
sparse weights (dot product instead of BM25).
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ragcore.documents import fold_text

__all__ = ["BM25Index", "Postings", "SparseIndex", "Tokenizer", "term_id", "term_frequencies"]

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# A small English stop list (function words only: content words, even common ones, stay).
ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be been being but by did do does doing for from had has have having he
    her hers him his how i if in into is it its itself me my of on or our ours she so than that
    the their theirs them then there these they this those to too was we were what when where
    which while who whom why will with would you your yours""".split()
)
CHINESE_STOPWORDS = frozenset(
    "的 了 是 在 和 与 及 或 也 就 都 而 被 把 之 其 这 那 个 吗 呢 吧 啊".split()
)


@dataclass(frozen=True)
class Tokenizer:
    """English + Chinese tokenizer. The switches exist for the measurements in
    `experiments/retrieval-baselines`; the defaults are what the product uses."""

    stem: bool = True
    jieba: bool = True
    bigrams: bool = True
    unigrams: bool = True

    def __call__(self, text: str) -> list[str]:
        tokens: list[str] = []
        for match in _WORD.finditer(fold_text(text)):
            word = match.group(0)
            if _CJK.match(word):
                tokens.extend(self._chinese(word))
            else:
                word = word.split("'")[0]
                if word in ENGLISH_STOPWORDS:
                    continue
                tokens.append(_stem(word) if self.stem else word)
        return tokens

    def _chinese(self, run: str) -> list[str]:
        out: list[str] = []
        if self.jieba:
            out.extend(w for w in _jieba_words(run) if w not in CHINESE_STOPWORDS)
        if self.bigrams:
            out.extend("~" + run[i : i + 2] for i in range(len(run) - 1))
        if self.unigrams or (len(run) == 1 and not self.jieba):
            out.extend(c for c in run if c not in CHINESE_STOPWORDS)
        return out


_stemmer = None
_jieba = None
_init_lock = threading.Lock()


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        import Stemmer

        _stemmer = Stemmer.Stemmer("english")
    return _stemmer.stemWord(word)


def _jieba_words(run: str) -> list[str]:
    global _jieba
    if _jieba is None:
        with _init_lock:
            if _jieba is None:
                import logging

                import jieba

                jieba.setLogLevel(logging.WARNING)  # jieba logs its dictionary load otherwise
                jieba.initialize()
                _jieba = jieba
    return [w for w in _jieba.cut_for_search(run) if w.strip()]


def term_id(token: str) -> int:
    """A stable 31-bit id for a token (the same in every process and on every machine)."""
    return zlib.crc32(token.encode("utf-8")) & 0x7FFFFFFF


def term_frequencies(tokens: Iterable[str]) -> dict[int, float]:
    """Sparse term-frequency vector {term id: count}."""
    counts = Counter(term_id(t) for t in tokens)
    return {k: float(v) for k, v in sorted(counts.items())}


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
        order = np.argsort(terms, kind="stable")
        terms, slots, weights = terms[order], slots[order], weights[order]
        unique, starts = np.unique(terms, return_index=True)
        self._terms = unique.astype(np.int64)
        self._offsets = np.append(starts, terms.size).astype(np.int64)
        self._slots = slots.astype(np.int32)
        self._weights = weights.astype(np.float32)
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
        self._slot: dict[str, int] = {}
        self._keys: list[str | None] = []
        self._length = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._postings = Postings()
        self._total_length = 0.0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slot)

    def clone(self) -> BM25Index:
        """A copy to change while this one keeps serving (see `Postings.clone`)."""
        with self._lock:
            new = BM25Index(self.k1, self.b)
            new._slot = dict(self._slot)
            new._keys = list(self._keys)
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
            self._maybe_compact()
            return slot

    def load(
        self, keys: list[str], slots: np.ndarray, terms: np.ndarray, tfs: np.ndarray,
        entry_slots: np.ndarray,
    ) -> None:  # fmt: skip
        """Bulk load: `keys[i]` lives in `slots[i]`; the postings are parallel arrays
        (`entry_slots`, `terms`, `tfs`)."""
        with self._lock:
            size = int(slots.max()) + 1 if slots.size else 0
            self._grow(size)
            for key, slot in zip(keys, slots.tolist(), strict=True):
                self._keys[slot] = key
                self._slot[key] = slot
                self._alive[slot] = True
            self._length[: self._length.size] = 0
            if entry_slots.size:  # bincount: np.add.at is ~20x slower on millions of entries
                summed = np.bincount(entry_slots, weights=tfs, minlength=size)
                self._length[: summed.size] = summed
            self._total_length = float(self._length.sum())
            self._postings.load(entry_slots, terms, tfs)

    def remove(self, key: str) -> None:
        with self._lock:
            self._remove(key)

    def _remove(self, key: str) -> None:
        slot = self._slot.pop(key, None)
        if slot is None:
            return
        self._total_length -= float(self._length[slot])
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
            self._slot, self._keys = {}, [None] * size
            self._length = np.zeros(max(size, 64), dtype=np.float32)
            self._alive = np.zeros(max(size, 64), dtype=bool)
            self._length[new_slots] = lengths
            self._alive[new_slots] = True
            for key, slot in keys:
                self._slot[key] = int(slot)
                self._keys[int(slot)] = key

    def idf(self, term: int) -> float:
        n = len(self._slot)
        postings = self._postings.get(term)
        df = int(self._alive[postings[0]].sum()) if postings is not None else 0
        return float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))

    def token_idf(self, token: str) -> float:
        """IDF of a token as the tokenizer spells it (0-ish for a term in every document)."""
        return self.idf(term_id(token))

    def _scores(self, query_tf: dict[int, float]) -> tuple[np.ndarray, np.ndarray] | None:
        n = len(self._slot)
        if n == 0 or not query_tf:
            return None
        size = len(self._keys)
        avgdl = max(self._total_length / n, 1e-9)
        scores = np.zeros(size, dtype=np.float32)
        touched = np.zeros(size, dtype=bool)
        for term, qtf in query_tf.items():
            postings = self._postings.get(term)
            if postings is None:
                continue
            slots, tfs = postings
            live = self._alive[slots]
            if not live.all():
                slots, tfs = slots[live], tfs[live]
            df = slots.size
            if df == 0:
                continue
            idf = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
            norm = self.k1 * (1.0 - self.b + self.b * self._length[slots] / avgdl)
            scores[slots] += qtf * idf * tfs * (self.k1 + 1.0) / (tfs + norm)
            touched[slots] = True
        return scores, touched

    def search_slots(
        self, query_tf: dict[int, float], limit: int, mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """Top (slot, score) pairs; `mask[slot]` False excludes a slot."""
        with self._lock:
            found = self._scores(query_tf)
            if found is None:
                return []
            scores, touched = found
            if mask is not None:
                m = mask[: touched.size]
                touched[: m.size] &= m
                touched[m.size :] = False
            candidates = np.flatnonzero(touched)
            return _top(candidates, scores[candidates], limit)

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

    def load(self, slots: np.ndarray, entry_slots: np.ndarray, terms, weights) -> None:
        with self._lock:
            self._grow(int(slots.max()) + 1 if slots.size else 0)
            self._alive[slots] = True
            self._postings.load(entry_slots, terms, weights)

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
            return _top(candidates, scores[candidates], limit)


def _top(candidates: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The `limit` best (candidate, score) pairs, best first (ties by candidate order)."""
    if candidates.size == 0 or limit <= 0:
        return []
    if candidates.size > limit:
        top = np.argpartition(-scores, limit - 1)[:limit]
    else:
        top = np.arange(candidates.size)
    order = top[np.argsort(-scores[top], kind="stable")]
    return [(int(candidates[i]), float(scores[i])) for i in order]
