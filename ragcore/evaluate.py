"""Retrieval evaluation over a benchmark folder, through the production index and search path.

A benchmark folder holds `corpus.jsonl` ({"id","title","text"} a line), `queries.jsonl`
({"qid","query"} a line) and `qrels.tsv` (qid, doc id, relevance; no header). Metrics follow
`shared/bench/README.md`: Recall@k = relevant found in the top k / relevant; MRR@10 = 1/rank of
the first relevant in the top 10; nDCG@10 with gains = relevance and log2(rank + 1) discounts,
ideal DCG from the sorted relevance labels. Queries without qrels are skipped.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragcore.documents import Document, normalize_text
from ragcore.embedding import CachedEmbedder, Embedder, EmbeddingCache
from ragcore.errors import RagcoreError
from ragcore.index import Index
from ragcore.search import SearchConfig, search

__all__ = [
    "EvalReport",
    "evaluate",
    "load_qrels",
    "metrics",
    "metrics_by",
    "read_corpus",
    "read_queries",
]


def read_corpus(path: Path) -> Iterator[Document]:
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                yield Document(
                    id=str(row["id"]),
                    title=normalize_text(row.get("title") or ""),
                    body=normalize_text(row.get("text") or ""),
                    source="bench",
                )
            except (ValueError, KeyError) as exc:
                raise RagcoreError(f"{path}:{line_no}: not a corpus row ({exc})") from exc


def read_queries(path: Path) -> list[tuple[str, str]]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                out.append((str(row["qid"]), row["query"]))
    return out


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or not parts[0]:
                continue
            try:
                grade = int(parts[2])
            except ValueError:
                if line_no == 1:
                    continue  # a header such as BEIR's "query-id corpus-id score"
                raise RagcoreError(
                    f"{path}:{line_no}: relevance {parts[2]!r} is not a whole number",
                    "each line is query-id TAB doc-id TAB grade (0, 1, 2 ...)",
                ) from None
            qrels.setdefault(parts[0], {})[parts[1]] = grade
    return qrels


def metrics(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> dict[str, float]:
    """Mean Recall@5, Recall@10, MRR@10, nDCG@10 over the queries that have qrels."""
    totals = {"recall@5": 0.0, "recall@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}
    n = 0
    for qid, rel in qrels.items():
        relevant = {d for d, r in rel.items() if r > 0}
        if not relevant:
            continue
        n += 1
        ranked = run.get(qid, [])
        for k in (5, 10):
            totals[f"recall@{k}"] += len(relevant & set(ranked[:k])) / len(relevant)
        for i, d in enumerate(ranked[:10]):
            if d in relevant:
                totals["mrr@10"] += 1.0 / (i + 1)
                break
        dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
        ideal = sorted((r for r in rel.values() if r > 0), reverse=True)[:10]
        idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
        totals["ndcg@10"] += dcg / idcg if idcg else 0.0
    return {k: (v / n if n else 0.0) for k, v in totals.items()}


def metrics_by(
    bench_dir: str | Path, run: dict[str, list[str]], field: str
) -> dict[str, tuple[int, dict[str, float]]]:
    """The metrics of `run` per value of `field` in queries.jsonl (e.g. LoCoMo's `category`):
    {value: (queries, metrics)}, over the queries that were run and have qrels. Empty when no
    query carries the field."""
    bench = Path(bench_dir)
    qrels = load_qrels(bench / "qrels.tsv")
    groups: dict[str, set[str]] = {}
    with open(bench / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                qid = str(row["qid"])
                if field in row and qid in run and qid in qrels:
                    groups.setdefault(str(row[field]), set()).add(qid)
    return {
        value: (len(qids), metrics({q: qrels[q] for q in qids}, run))
        for value, qids in sorted(groups.items())
    }


@dataclass
class EvalReport:
    metrics: dict[str, float]
    query_p50_ms: float
    query_p95_ms: float
    index_s: float
    docs: int
    queries: int
    chunks: int
    texts_embedded: int
    run: dict[str, list[str]]

    def as_json(self) -> dict[str, Any]:
        return {
            **{k: round(v, 4) for k, v in self.metrics.items()},
            "query_p50_ms": round(self.query_p50_ms, 2),
            "query_p95_ms": round(self.query_p95_ms, 2),
            "index_s": round(self.index_s, 2),
            "docs": self.docs,
            "queries": self.queries,
            "chunks": self.chunks,
            "texts_embedded": self.texts_embedded,
        }


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def evaluate(
    bench_dir: str | Path,
    embedder: Embedder,
    *,
    cache_dir: str | Path | None = None,
    config: SearchConfig | None = None,
    limit: int = 10,
    max_queries: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    work_dir: str | Path | None = None,
    searcher: Callable[[Index, str, int], list[str]] | None = None,
) -> EvalReport:
    """Index the corpus in a temporary home, run every query, score against qrels.
    `searcher(index, query, limit)` gives the ranked document ids of a query (default:
    `ragcore.search` without a filter); a product passes its own search path, so the
    latency reported is what its users wait for."""
    bench = Path(bench_dir)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        if not (bench / name).is_file():
            raise RagcoreError(
                f"{bench} has no {name}: a bench folder needs corpus.jsonl, "
                "queries.jsonl and qrels.tsv"
            )
    qrels = load_qrels(bench / "qrels.tsv")
    queries = [(q, text) for q, text in read_queries(bench / "queries.jsonl") if q in qrels]
    if max_queries is not None:
        queries = queries[:max_queries]
    cache = EmbeddingCache(cache_dir) if cache_dir else None
    cached = CachedEmbedder(embedder, cache)
    with tempfile.TemporaryDirectory(prefix="memory-agent-eval-", dir=work_dir) as tmp:
        index = Index(Path(tmp) / "index", cached)
        try:
            docs = list(read_corpus(bench / "corpus.jsonl"))
            build = index.build(docs, progress=progress)
            embedded = cached.stats.texts_embedded  # document texts only, not queries
            run: dict[str, list[str]] = {}
            latencies = []
            for i, (qid, text) in enumerate(queries):
                t = time.perf_counter()
                if searcher is not None:
                    run[qid] = searcher(index, text, max(limit, 10))
                else:
                    result = search(index, text, limit=max(limit, 10), config=config)
                    run[qid] = [h.doc_id for h in result.hits]
                latencies.append((time.perf_counter() - t) * 1000)
                if progress and (i + 1) % 100 == 0:
                    progress("query", i + 1, len(queries))
        finally:
            index.close()
            if cache:
                cache.close()
    scored = metrics({q: qrels[q] for q, _ in queries}, run)
    return EvalReport(
        scored,
        _percentile(latencies, 0.5),
        _percentile(latencies, 0.95),
        build.seconds,
        len(docs),
        len(queries),
        build.chunks,
        embedded,
        run,
    )
