"""Fusion of channel rankings into one document score.

Input: per channel, {doc id: hit} where a hit has a 1-based `rank` and a raw `score`.
Output: {doc id: fused score}, each document's contribution per channel, and the weights used.

Methods:
- `score` (default): a weighted sum of each channel's scores after min-max normalisation over
  that channel's candidate list (the best candidate scores 1, the last 0, a document the
  channel did not return 0). Raw scores carry how much better the first hit is than the
  rest; ranks throw that away. That is why it holds up when one channel is weak: MiniLM on
  Chinese gives a flat spread of cosines, so its normalised scores barely move the lexical
  order, whereas reciprocal-rank fusion gives its (wrong) first place as much weight as the
  lexical channel's (right) first place.
- `rrf`: weighted reciprocal rank fusion, sum of w / (k + rank), kept for comparison.

An embedder that declares the languages it was trained for (MiniLM: English) gets half its
dense weight for queries in any other language (`query_language`).

The defaults (method, weights) were chosen by measurement on three benchmarks; the numbers,
and what did not help, are in `experiments/retrieval-baselines/README.md`; the decision is
docs/adr/0003-score-fusion-with-language-aware-dense-weight.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_WEIGHTS", "FusionConfig", "fuse", "query_language"]

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def query_language(text: str) -> str:
    """'zh' when CJK characters outnumber Latin letters / 4 (a Chinese word is one or two
    characters, an English word about five letters), else 'en'. Coarse on purpose: it only
    decides whether an English-only embedder understands the query."""
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    return "zh" if cjk > 0 and cjk >= latin / 4 else "en"


# Weight of each channel in the `score` method. The lexical channel leads: BM25 over a good
# tokenizer is the strongest single channel on all three benchmarks with MiniLM, and the
# dense channel adds recall for paraphrases. `sparse` (BGE-M3 lexical weights) is untuned here
# (no BGE-M3 weights on the measuring machine) and starts as a fraction of lexical.
DEFAULT_WEIGHTS = {"lexical": 0.6, "dense": 0.4, "sparse": 0.2}
# Factor on the dense weight when the query's language is not one the embedder was trained for
# (MiniLM on a Chinese query): its cosines then carry little signal.
UNCOVERED_LANGUAGE_FACTOR = 0.5


@dataclass(frozen=True)
class FusionConfig:
    method: str = "score"
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    rrf_k: float = 60.0
    uncovered_language_factor: float = UNCOVERED_LANGUAGE_FACTOR

    def __post_init__(self) -> None:
        if self.method not in ("score", "rrf"):
            raise ValueError(f"unknown fusion method {self.method!r}: use 'score' or 'rrf'")


def _minmax(hits: dict[str, Any], floor: float | None) -> dict[str, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits.values()]
    lo, hi = (min(scores) if floor is None else floor), max(scores)
    if hi <= lo:
        return dict.fromkeys(hits, 1.0)
    return {doc: (h.score - lo) / (hi - lo) for doc, h in hits.items()}


def fuse(
    channels: dict[str, dict[str, Any]],
    config: FusionConfig,
    floors: dict[str, float] | None = None,
    *,
    dense_covers_query: bool = True,
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, float]]:
    """Fuse channel hits. `floors[c]`, when given, is the score every document missing from
    channel c has (0 for a lexical channel that returned all its matches); without it the
    channel's lowest candidate is taken as the floor. `dense_covers_query=False` (the query is
    in a language the embedder was not trained for) scales the dense weight down."""
    floors = floors or {}
    weights = {name: config.weights.get(name, 0.0) for name in channels}
    if not dense_covers_query and "dense" in weights:
        weights["dense"] *= config.uncovered_language_factor
    total = sum(weights.values()) or 1.0
    weights = {name: w / total for name, w in weights.items()}
    fused: dict[str, float] = {}
    contributions: dict[str, dict[str, float]] = {}
    for name, hits in channels.items():
        w = weights[name]
        if config.method == "rrf":
            parts = {doc: w / (config.rrf_k + h.rank) for doc, h in hits.items()}
        else:
            parts = {doc: w * v for doc, v in _minmax(hits, floors.get(name)).items()}
        for doc, c in parts.items():
            fused[doc] = fused.get(doc, 0.0) + c
            contributions.setdefault(doc, {})[name] = c
    return fused, contributions, weights
