"""Search: channels -> per-document aggregation -> fusion -> MMR -> hits (with `explain`).

Channels: `dense` (cosine over the model's vectors, in the store), `lexical` (BM25 over the
in-memory inverted index) and `sparse` (the model's lexical weights, when it has them). Each
channel's chunk hits are aggregated per document (a document scores as its best chunk), then
the channels are fused (`ragcore.fusion`), then MMR reorders the head of the list for
diversity. `explain=True` attaches, to each hit, its rank and score in every channel and the
contribution of each to the fused score.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragcore.embedding import Embedding
from ragcore.fusion import FusionConfig, fuse, query_language
from ragcore.hits import SlotHits
from ragcore.index import Index
from ragcore.snapshot import Snapshot
from ragcore.store import Filter
from ragcore.tokenizer import term_frequencies

__all__ = ["ChannelHit", "Hit", "SearchConfig", "SearchResult", "search", "snippets_of"]


@dataclass(frozen=True)
class SearchConfig:
    candidates: int = 100  # chunk hits asked of each channel
    mmr_lambda: float = 1.0  # 1.0 = relevance only; lower trades relevance for diversity
    mmr_window: int = 20  # MMR reorders this many of the top documents
    snippet_chars: int = 240
    fusion: FusionConfig = field(default_factory=FusionConfig)


@dataclass
class ChannelHit:
    rank: int  # 1-based rank of the document in this channel
    score: float  # the channel's raw score of the document's best chunk
    chunk_id: str


@dataclass
class Hit:
    doc_id: str
    score: float
    chunk_id: str
    title: str
    heading: str
    snippet: str
    payload: dict[str, Any]
    channels: dict[str, ChannelHit] = field(default_factory=dict)
    contributions: dict[str, float] = field(default_factory=dict)

    def explain(self) -> dict[str, Any]:
        return {
            "fused": round(self.score, 6),
            "channels": {
                name: {
                    "rank": c.rank,
                    "score": round(c.score, 6),
                    "chunk": c.chunk_id,
                    "contribution": round(self.contributions.get(name, 0.0), 6),
                }
                for name, c in self.channels.items()
            },
        }


@dataclass
class SearchResult:
    hits: list[Hit]
    generation: str | None
    degraded: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)


def _per_document(
    index: Snapshot, chunk_hits: Sequence[tuple[str, float]]
) -> dict[str, ChannelHit]:
    """Best chunk per document, ranked by score (1-based)."""
    if isinstance(chunk_hits, SlotHits):  # the read model's: chosen over its arrays
        found = chunk_hits.per_document()
        return {
            doc: ChannelHit(rank, score, chunk) for rank, (doc, chunk, score) in enumerate(found, 1)
        }
    best: dict[str, tuple[str, float]] = {}
    for chunk_id, score in chunk_hits:
        doc_id = index.doc_of(chunk_id)
        if doc_id is None:
            continue
        if doc_id not in best or score > best[doc_id][1]:
            best[doc_id] = (chunk_id, score)
    ordered = sorted(best.items(), key=lambda kv: -kv[1][1])
    return {
        doc: ChannelHit(rank, score, chunk)
        for rank, (doc, (chunk, score)) in enumerate(ordered, start=1)
    }


def _snippet(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def snippets_of(
    index: Index | Snapshot, chunk_ids: Sequence[str], config: SearchConfig | None = None
) -> dict[str, str]:
    """{chunk id: the snippet `search` shows for it} - for hits found with `snippets=False`;
    read from `index` (the snapshot the search used)."""
    n = (config or SearchConfig()).snippet_chars
    payloads = index.snapshot().chunk_payloads(list(chunk_ids))
    return {
        cid: _snippet(p.get("text", "") or p.get("title", ""), n) for cid, p in payloads.items()
    }


def search(
    index: Index | Snapshot,
    query: str,
    *,
    limit: int = 10,
    flt: Filter | None = None,
    config: SearchConfig | None = None,
    use_dense: bool = True,
    snippets: bool = True,
    query_embedding: Embedding | None = None,
) -> SearchResult:
    """Top `limit` documents for `query`. Raises `IndexInconsistent` rather than answering from
    a damaged index. `use_dense=False` answers from the lexical channels alone (used while the
    model loads); the result then says `degraded`. `snippets=False`: the hits' texts are not
    read (snippet, heading and text empty) - for a caller that shows only some of them and
    reads those with `snippets_of`. `query_embedding`: the query's vectors, embedded by the
    caller (a daemon embeds queries in one stage and ranks them in another); one of another
    width than the index's (its model changed meanwhile) is embedded again."""
    config = config or SearchConfig()
    timings: dict[str, float] = {}
    # One snapshot for the whole search, and no lock: a write publishes a new snapshot
    # meanwhile and this search answers from the one it took (every write whole or absent).
    index = index.snapshot()
    t0 = time.perf_counter()
    index.check(raise_on_error=True)
    query = query.strip()
    if not query:
        return SearchResult([], index.generation)
    view = index.channels(flt)  # the filter's mask, computed once
    channels: dict[str, dict[str, ChannelHit]] = {}
    degraded = None
    q_emb = None
    t = time.perf_counter()
    q_tf = term_frequencies(index.tokenizer(query))
    lexical_hits = view.lexical(q_tf, config.candidates)
    channels["lexical"] = _per_document(index, lexical_hits)
    floors: dict[str, float] = {}
    if len(lexical_hits) < config.candidates:  # every match is in: the rest score 0
        floors["lexical"] = 0.0
    timings["lexical"] = (time.perf_counter() - t) * 1000
    if use_dense:
        t = time.perf_counter()
        q_emb = query_embedding
        if q_emb is None or np.shape(q_emb.dense) != (index.embedder.dim,):
            q_emb = index.embedder.embed_query(query)
        timings["embed"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        # The lexical candidates are scored exactly too: on a graph (large indexes) one the
        # graph missed keeps the dense score the exact scan gives it (experiments/million).
        dense_hits = view.dense(q_emb.dense, config.candidates, lexical_hits)
        channels["dense"] = _per_document(index, dense_hits)
        timings["dense"] = (time.perf_counter() - t) * 1000
        if q_emb.sparse and view.has_sparse:
            sparse_hits = view.sparse(q_emb.sparse, config.candidates)
            channels["sparse"] = _per_document(index, sparse_hits)
            if len(sparse_hits) < config.candidates:
                floors["sparse"] = 0.0
    else:
        degraded = "model loading: lexical channel only"
    languages = getattr(index.embedder, "languages", None)
    covered = languages is None or query_language(query) in languages
    fused, contributions, weights = fuse(
        channels, config.fusion, floors, dense_covers_query=covered
    )
    ranked = sorted(fused.items(), key=lambda kv: -kv[1])
    if config.mmr_lambda < 1.0 and q_emb is not None and len(ranked) > 1:
        ranked = _mmr(index, ranked, channels, config)
    hits = []
    shown: dict[str, ChannelHit] = {}
    for doc_id, _ in ranked[:limit]:
        doc_channels = [ch[doc_id] for ch in channels.values() if doc_id in ch]
        # The chunk shown for the document: its best-ranked one across channels.
        shown[doc_id] = min(doc_channels, key=lambda c: c.rank)
    payloads = index.chunk_payloads([c.chunk_id for c in shown.values()], texts=snippets)
    for doc_id, score in ranked[:limit]:
        doc_channels = {name: ch[doc_id] for name, ch in channels.items() if doc_id in ch}
        best = shown[doc_id]
        payload = payloads[best.chunk_id]
        hits.append(
            Hit(
                doc_id=doc_id,
                score=score,
                chunk_id=best.chunk_id,
                title=payload.get("title", ""),
                heading=payload.get("heading", ""),
                snippet=_snippet(
                    payload.get("text", "") or payload.get("title", ""), config.snippet_chars
                ),
                payload=payload,
                channels=doc_channels,
                contributions=contributions.get(doc_id, {}),
            )
        )
    timings["total"] = (time.perf_counter() - t0) * 1000
    return SearchResult(hits, index.generation, degraded, timings, weights)


def _mmr(
    index: Snapshot,
    ranked: list[tuple[str, float]],
    channels: dict[str, dict[str, ChannelHit]],
    config: SearchConfig,
) -> list[tuple[str, float]]:
    """Maximal marginal relevance over the top `mmr_window` documents (dense vectors of each
    document's best dense chunk); the tail keeps its order."""
    window = ranked[: config.mmr_window]
    dense = channels.get("dense", {})
    chunk_of = {d: (dense[d].chunk_id if d in dense else None) for d, _ in window}
    vectors = index.dense_vectors([c for c in chunk_of.values() if c])
    scores = np.array([s for _, s in window], dtype=np.float64)
    rel = scores / scores.max() if scores.max() > 0 else np.ones_like(scores)
    chosen: list[int] = []
    rest = list(range(len(window)))
    lam = config.mmr_lambda
    while rest:
        best_i, best_val = rest[0], -np.inf
        for i in rest:
            vi = vectors.get(chunk_of[window[i][0]] or "")
            sim = 0.0
            if vi is not None and chosen:
                sims = [
                    float(vi @ vectors[chunk_of[window[j][0]]])
                    for j in chosen
                    if chunk_of[window[j][0]] in vectors
                ]
                sim = max(sims) if sims else 0.0
            val = lam * rel[i] - (1 - lam) * sim
            if val > best_val:
                best_i, best_val = i, val
        chosen.append(best_i)
        rest.remove(best_i)
    return [window[i] for i in chosen] + ranked[config.mmr_window :]
