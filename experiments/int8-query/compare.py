"""The product's evaluation with queries embedded by MiniLM's float graph and by its int8 query
graph (`ragcore.minilm_graph.quantize`), on the same index: does an int8 query find the same
documents? (experiments/int8-query/README.md)

    .venv/bin/python experiments/int8-query/compare.py ../shared/bench/locomo \\
        ../shared/bench/scifact ../shared/bench/cmrc2018 [--cache DIR] [--max-queries N]
    .venv/bin/python experiments/int8-query/compare.py --tiny   # a two-document bench (CI)

Per benchmark: nDCG@10, R@10 and MRR@10 with each graph and their difference; the cosine of
each query's two vectors (min, p1, mean); the query run's CPU (thread time, mean ms); and the
largest change of a query's similarity to the chunks of its float top 10.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_agent.recall.reads import product_searcher  # noqa: E402
from ragcore.documents import DEFAULT_MAX_CHARS, chunk_document  # noqa: E402
from ragcore.embedding import EmbeddingCache, MiniLMEmbedder, text_hash  # noqa: E402
from ragcore.evaluate import evaluate, read_corpus, read_queries  # noqa: E402


class Timed:
    """The embedder, with its query runs' thread time summed (`ms_per_query`)."""

    def __init__(self, inner: MiniLMEmbedder):
        self.inner, self.cpu, self.n = inner, 0.0, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        t = time.thread_time()
        out = self.inner.embed_query(text)
        self.cpu += time.thread_time() - t
        self.n += 1
        return out

    @property
    def ms_per_query(self) -> float:
        return 1000 * self.cpu / max(1, self.n)


def compare(bench: Path, cache: Path, max_queries: int | None) -> dict:
    models = {
        p: Timed(MiniLMEmbedder(work_dir=cache, runtime="onnx", query_precision=p))
        for p in ("float", "int8")
    }
    reports = {}
    for precision, model in models.items():
        reports[precision] = evaluate(
            bench,
            model,
            cache_dir=cache,
            max_queries=max_queries,
            searcher=product_searcher("2026-12-01T00:00:00Z"),
        )
    queries = [t for q, t in read_queries(bench / "queries.jsonl") if q in reports["float"].run]
    qf = np.stack([models["float"].inner.embed_query(t).dense for t in queries])
    q8 = np.stack([models["int8"].inner.embed_query(t).dense for t in queries])
    cos = (qf * q8).sum(axis=1)
    # the chunks' float vectors, from the cache the evaluation filled
    texts = [
        c.text
        for d in read_corpus(bench / "corpus.jsonl")
        for c in chunk_document(d, DEFAULT_MAX_CHARS)
    ]
    store = EmbeddingCache(cache)
    found = store.get_many(models["float"].inner.model_id, [text_hash(t) for t in texts])
    store.close()
    chunks = np.stack([e.dense for e in found.values()])
    sf, s8 = qf @ chunks.T, q8 @ chunks.T
    top = np.argsort(-sf, axis=1)[:, :10]
    shift = np.abs(np.take_along_axis(sf, top, 1) - np.take_along_axis(s8, top, 1))
    out = {"bench": bench.name, "queries": len(queries), "chunks_compared": len(chunks)}
    for p, r in reports.items():
        j = r.as_json()
        out[p] = {k: round(j[k], 4) for k in ("ndcg@10", "recall@10", "mrr@10")}
        out[p]["query_cpu_ms"] = round(models[p].ms_per_query, 2)
    out["ndcg_delta"] = round(out["int8"]["ndcg@10"] - out["float"]["ndcg@10"], 4)
    out["cosine"] = {
        "min": round(float(cos.min()), 4),
        "p1": round(float(np.percentile(cos, 1)), 4),
        "mean": round(float(cos.mean()), 4),
    }
    out["top10_similarity_shift"] = {
        "max": round(float(shift.max()), 4),
        "mean": round(float(shift.mean()), 4),
        "signed_mean": round(
            float((np.take_along_axis(s8, top, 1) - np.take_along_axis(sf, top, 1)).mean()), 4
        ),
    }
    return out


def tiny_bench(folder: Path) -> Path:
    docs = [
        {"id": "d1", "title": "Migrations", "text": "Run alembic upgrade head before the tests."},
        {"id": "d2", "title": "Staging", "text": "Staging uses Postgres 16 on the shared host."},
    ]
    queries = [
        {"qid": "q1", "query": "how do we run migrations"},
        {"qid": "q2", "query": "which database does staging use"},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels.tsv").write_text("q1\td1\t1\nq2\td2\t1\n")
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benches", nargs="*", type=Path)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/memory-agent-int8-query"))
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument(
        "--tiny", action="store_true", help="a two-document bench in a temporary folder"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        benches = [tiny_bench(Path(tmp))] if args.tiny else args.benches
        cache = Path(tmp) / "cache" if args.tiny else args.cache
        if not benches:
            ap.error("name at least one benchmark folder (or --tiny)")
        for bench in benches:
            print(json.dumps(compare(bench, cache, args.max_queries)), flush=True)


if __name__ == "__main__":
    main()
