"""How similar a hit is to the query, on an absolute scale - unlike its `score`, which is
relative to the best hit of the same search (ragcore's fusion normalises each channel per
query, so the best hit of any query scores about 1, whether it answers it or not).

- `similarities`: each hit's `similarity` (`recall.reads.rank`): its cosine to the query (its
  closest chunk), or the share of the query's words it holds, whichever says more;
- `covers`: whether the embedder was trained for the query's language (MiniLM: English), where
  a similarity means something;
- `min_score` on a search (`check_min_score`, `judge`) leaves out hits below it; when nothing in
  the session's project reaches it (or the embedder's injection floor,
  `recall.policy.inject_floor`), `judge` says which other projects' entries do ("more in other
  projects"). The injection's own floor is `recall.injection`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from memory_agent.errors import Invalid
from memory_agent.recall import policy
from ragcore import Embedding, Index, query_language

__all__ = ["check_min_score", "covers", "judge", "similarities"]


def similarities(
    index: Index,
    query: str,
    embedding: Embedding | None,
    doc_ids: list[str],
    found: list[Any],
) -> dict[str, float]:
    """How much each document is about the query, on an absolute scale (rounded): the larger
    of two measures that do not depend on the other hits -

    - the cosine of the query's vector and the document's closest chunk (the embedder's scale:
      MiniLM's unrelated texts sit near 0, its paraphrases above 0.5) - the dense channel's
      score where it ranked the document, else the chunks' stored vectors, read for these
      documents alone; not for a query in a language the embedder was not trained for;
    - `policy.LEXICAL_SHARE_WEIGHT` times the share of the query's words, weighted by their
      rarity, that the document's best chunk matches (its BM25 score over the score of a
      chunk holding each query word once at an average length: 1 for a full match) - an
      exact name or error text the embedder does not see as close (`except Exception: pass`).

    Empty without the query's vector (the model loading)."""
    if embedding is None:
        return {}
    out: dict[str, float] = {}
    if covers(index, query):
        out = {h.doc_id: float(h.channels["dense"].score) for h in found if "dense" in h.channels}
        missing = [d for d in doc_ids if d not in out]
        chunks = {}
        for doc_id in missing:
            info = index.doc(doc_id)
            chunks.update({f"{doc_id}#{n}": doc_id for n in range(info.chunks if info else 0)})
        vector = np.asarray(embedding.dense, dtype=np.float32)
        for chunk_id, stored in index.snapshot().dense_vectors(list(chunks)).items():
            score = float(np.asarray(stored, dtype=np.float32) @ vector)
            doc_id = chunks[chunk_id]
            out[doc_id] = max(out.get(doc_id, score), score)
    tokens = Counter(index.tokenizer(query))
    weight = sum(n * index.token_idf(t) for t, n in tokens.items())
    for h in found if weight > 0 else ():
        if "lexical" in h.channels:
            share = policy.LEXICAL_SHARE_WEIGHT * float(h.channels["lexical"].score) / weight
            out[h.doc_id] = max(out.get(h.doc_id, share), share)
    return {d: round(out.get(d, 0.0), 4) for d in doc_ids}


def covers(index: Any, query: str) -> bool:
    """Whether the embedder of `index` was trained for the query's language (one that says
    nothing covers every language)."""
    languages = getattr(getattr(index, "embedder", None), "languages", None)
    return languages is None or query_language(query) in languages


def check_min_score(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
        raise Invalid(
            f"min_score: {value!r} is not a similarity from -1 to 1",
            "pass e.g. 0.3 (MiniLM: unrelated text sits near 0, close paraphrases above 0.5)",
        )
    return float(value)


def judge(
    reply: dict[str, Any],
    *,
    min_score: float | None,
    embedder: str,
    covered: bool,
    dense: bool,
    scopes: tuple[str, ...] | None,
    elsewhere: Callable[[], list[dict[str, Any]]],
) -> None:
    """`reply` (a search's, in place) without the hits below `min_score`; with `elsewhere`,
    the other projects whose KB entries reach the floor, when none in `scopes` (the session's
    project and global) does. `elsewhere()`: the same search over every scope."""
    hits = reply["hits"]
    if min_score is not None and not dense:
        reply["degraded"] += "; min_score not applied (no similarity without the model)"
    elif min_score is not None:
        hits = [h for h in hits if h["similarity"] is not None and h["similarity"] >= min_score]
        reply["hits"] = hits
    floor = min_score if min_score is not None else policy.inject_floor(embedder, covered)
    if floor is None or scopes is None or not dense:
        return
    if any(h["similarity"] is not None and h["similarity"] >= floor for h in hits):
        return
    names = {
        h["scope"]
        for h in elsewhere()
        if h["scope"] not in scopes and h["kb"] and (h["similarity"] or -1.0) >= floor
    }
    if names:
        reply["elsewhere"] = sorted(names)
