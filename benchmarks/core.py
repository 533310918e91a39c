"""Benchmark of the retrieval core: indexing throughput and search latency, with MiniLM.

    .venv/bin/python benchmarks/core.py [--chunks 5000] [--queries 200] [--json]

Prints:
- indexing throughput (chunks/s) for `--chunks` chunks, cold (empty embedding cache: every
  chunk goes through the model) and cached (a second index of the same text: zero model calls);
- search latency p50/p95 (ms, whole `ragcore.search` call including the query embedding) on
  indexes of 1k and 10k points.

The corpus is synthetic but deterministic (seeded sentences over a fixed vocabulary), one chunk
per document, about 40 words a chunk. Numbers depend on the machine; the README records them
for a 2-core CPU box.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from ragcore import CachedEmbedder, Document, EmbeddingCache, Index, MiniLMEmbedder, search

VOCAB = """agent memory index search daemon proxy socket commit branch merge rebase test fixture
cache vector embedding model token chunk heading title body release version tag deploy server
client request response timeout retry lock queue worker thread process signal file path folder
config setting default error warning log trace metric latency throughput benchmark query result
rank score filter type status archive supersede decision pitfall convention principle process
python rust go java typescript node package dependency install build compile link import module
function class method argument return value type schema field table column row migration backup
restore snapshot generation pointer manifest consistency check rebuild refresh update delete
user session project repository document markdown frontmatter link graph edge weight channel
fusion dense sparse lexical stemming segmentation chinese english benchmark dataset label
""".split()


def corpus(n: int, seed: int, offset: int = 0) -> list[Document]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = [rng.choice(VOCAB) for _ in range(40)]
        sentences = [" ".join(words[j : j + 10]).capitalize() + "." for j in range(0, 40, 10)]
        docs.append(
            Document(
                f"doc-{offset + i:06d}",
                " ".join(words[:5]).title(),
                " ".join(sentences),
                {"type": "note"},
                "bench",
            )
        )
    return docs


def queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(2, 8))) for _ in range(n)]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def latency(index: Index, qs: list[str]) -> tuple[float, float]:
    search(index, "warm up")
    times = []
    for q in qs:
        t = time.perf_counter()
        search(index, q, limit=10)
        times.append((time.perf_counter() - t) * 1000)
    return percentile(times, 0.5), percentile(times, 0.95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = MiniLMEmbedder()
    model.load()
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs = corpus(args.chunks, seed=1)
        cache = EmbeddingCache(root / "cache")
        cold = Index(root / "cold", CachedEmbedder(model, cache))
        t = time.perf_counter()
        cold.build(docs)
        out["index_cold_chunks_per_s"] = args.chunks / (time.perf_counter() - t)
        cold.close()
        cached_emb = CachedEmbedder(model, cache)
        warm = Index(root / "warm", cached_emb)
        t = time.perf_counter()
        warm.build(docs)
        out["index_cached_chunks_per_s"] = args.chunks / (time.perf_counter() - t)
        out["index_cached_model_calls"] = cached_emb.stats.model_calls
        qs = queries(args.queries, seed=2)
        small = Index(root / "small", CachedEmbedder(model, cache))
        small.build(docs[:1000])
        out["search_1k_p50_ms"], out["search_1k_p95_ms"] = latency(small, qs)
        small.close()
        big_docs = docs + corpus(max(0, 10_000 - len(docs)), seed=3, offset=len(docs))
        big = Index(root / "big", CachedEmbedder(model, cache))
        big.build(big_docs[:10_000])
        out["search_10k_p50_ms"], out["search_10k_p95_ms"] = latency(big, qs)
        big.close()
        warm.close()
    if args.json:
        print(json.dumps({k: round(v, 2) for k, v in out.items()}))
        return
    print(f"indexing {args.chunks} chunks, MiniLM, 2 threads while indexing:")
    print(f"  cold   {out['index_cold_chunks_per_s']:8.1f} chunks/s")
    print(
        f"  cached {out['index_cached_chunks_per_s']:8.1f} chunks/s "
        f"({out['index_cached_model_calls']:.0f} model calls)"
    )
    print(f"search ({args.queries} queries, limit 10, including query embedding):")
    print(
        f"  1k points   p50 {out['search_1k_p50_ms']:6.1f} ms   p95 {out['search_1k_p95_ms']:6.1f} ms"
    )
    print(
        f"  10k points  p50 {out['search_10k_p50_ms']:6.1f} ms   p95 {out['search_10k_p95_ms']:6.1f} ms"
    )


if __name__ == "__main__":
    main()
