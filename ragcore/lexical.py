"""The lexical channel: a tokenizer for English and Chinese, and BM25 over an in-memory
inverted index.

Tokens: text is lower-cased; runs of ASCII letters and digits become English words (stop words
dropped, Snowball-stemmed); runs of CJK characters become jieba search-mode words plus the
character unigrams and bigrams of the run. Bigrams make the channel robust where jieba segments
a name one way in the question and another way in the text, and unigrams catch one-character
words; `experiments/retrieval-baselines` has the
measurement behind that choice.

Documents are stored as term-frequency sparse vectors (term ids are stable 31-bit hashes of the
tokens), so a store can persist them; `BM25Index` keeps them as an inverted index and scores
exact BM25 (Lucene variant) with the corpus statistics of the moment, which keeps incremental
updates exact (docs/adr/0001-lexical-channel-in-process.md).
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

__all__ = ["BM25Index", "Tokenizer", "term_id", "term_frequencies"]

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


class BM25Index:
    """Inverted index of term-frequency vectors with exact BM25 scoring.

    k1 = 0.9, b = 0.4 are Anserini's defaults; on all three benchmarks they beat Lucene's
    1.2 / 0.75 (experiments/retrieval-baselines).

    Keys are arbitrary strings (chunk ids). `add`/`remove` keep the statistics exact; `search`
    returns the top `limit` keys by BM25 with their scores, optionally restricted to `allowed`.
    """

    def __init__(self, k1: float = 0.9, b: float = 0.4):
        self.k1 = k1
        self.b = b
        self._slot: dict[str, int] = {}
        self._keys: list[str | None] = []
        self._length: list[float] = []
        self._free: list[int] = []
        self._postings: dict[int, dict[int, float]] = {}
        self._doc_terms: dict[int, dict[int, float]] = {}
        self._total_length = 0.0
        self._arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, key: str) -> bool:
        return key in self._slot

    def add(self, key: str, tf: dict[int, float]) -> None:
        with self._lock:
            if key in self._slot:
                self._remove(key)
            slot = self._free.pop() if self._free else len(self._keys)
            if slot == len(self._keys):
                self._keys.append(key)
                self._length.append(0.0)
            self._keys[slot] = key
            length = float(sum(tf.values()))
            self._length[slot] = length
            self._total_length += length
            self._slot[key] = slot
            self._doc_terms[slot] = dict(tf)
            for term, count in tf.items():
                self._postings.setdefault(term, {})[slot] = count
                self._arrays.pop(term, None)

    def remove(self, key: str) -> None:
        with self._lock:
            self._remove(key)

    def _remove(self, key: str) -> None:
        slot = self._slot.pop(key, None)
        if slot is None:
            return
        for term in self._doc_terms.pop(slot):
            posting = self._postings[term]
            posting.pop(slot, None)
            if not posting:
                del self._postings[term]
            self._arrays.pop(term, None)
        self._total_length -= self._length[slot]
        self._keys[slot] = None
        self._length[slot] = 0.0
        self._free.append(slot)

    def _posting_arrays(self, term: int) -> tuple[np.ndarray, np.ndarray] | None:
        arrays = self._arrays.get(term)
        if arrays is None:
            posting = self._postings.get(term)
            if not posting:
                return None
            slots = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
            tfs = np.fromiter(posting.values(), dtype=np.float32, count=len(posting))
            arrays = self._arrays[term] = (slots, tfs)
        return arrays

    def idf(self, term: int) -> float:
        n = len(self._slot)
        df = len(self._postings.get(term, ()))
        return float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))

    def token_idf(self, token: str) -> float:
        """IDF of a token as the tokenizer spells it (0-ish for a term in every document)."""
        return self.idf(term_id(token))

    def search(
        self,
        query_tf: dict[int, float],
        limit: int,
        allowed: set[str] | None = None,
    ) -> list[tuple[str, float]]:
        with self._lock:
            n = len(self._slot)
            if n == 0 or not query_tf:
                return []
            avgdl = self._total_length / n if n else 1.0
            lengths = np.asarray(self._length, dtype=np.float32)
            scores = np.zeros(len(self._keys), dtype=np.float32)
            touched = np.zeros(len(self._keys), dtype=bool)
            for term, qtf in query_tf.items():
                arrays = self._posting_arrays(term)
                if arrays is None:
                    continue
                slots, tfs = arrays
                idf = self.idf(term)
                norm = self.k1 * (1.0 - self.b + self.b * lengths[slots] / max(avgdl, 1e-9))
                scores[slots] += qtf * idf * tfs * (self.k1 + 1.0) / (tfs + norm)
                touched[slots] = True
            candidates = np.nonzero(touched)[0]
            if allowed is not None:
                allowed_slots = {self._slot[k] for k in allowed if k in self._slot}
                candidates = np.array([s for s in candidates if s in allowed_slots], dtype=np.int64)
            if candidates.size == 0:
                return []
            cand_scores = scores[candidates]
            if candidates.size > limit:
                top = np.argpartition(-cand_scores, limit - 1)[:limit]
            else:
                top = np.arange(candidates.size)
            order = top[np.argsort(-cand_scores[top], kind="stable")]
            return [(self._keys[candidates[i]], float(cand_scores[i])) for i in order]  # type: ignore[misc]
