"""The tokenizer of the lexical channels: English and Chinese text to tokens, and tokens to
term-frequency vectors.

Tokens: text is lower-cased; runs of ASCII letters and digits become English words (stop words
dropped, Snowball-stemmed); runs of CJK characters become jieba search-mode words plus the
character unigrams and bigrams of the run. Bigrams make the channel robust where jieba segments
a name one way in the question and another way in the text, and unigrams catch one-character
words; `experiments/retrieval-baselines` has the measurement behind that choice.

A document is stored as a term-frequency sparse vector whose term ids are stable 31-bit hashes
of the tokens (`term_id`), so a segment can persist it and any process reads it the same way.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ragcore.documents import fold_text

__all__ = ["Tokenizer", "term_frequencies", "term_id"]

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
