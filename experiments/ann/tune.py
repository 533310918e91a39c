"""The follow-up of experiments/ann/measure.py: usearch's connectivity and search expansion on
20,000 composed entry vectors (the benchmark cache), 100 queries near entries (an entry plus
noise): recall@10 after exact rescoring of 200 candidates, the search p50, the build time.

    .venv/bin/python experiments/ann/tune.py [--cache /tmp/memory-agent-bench-composed/cache]
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

import numpy as np
from usearch.index import Index


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, default=Path("/tmp/memory-agent-bench-composed/cache"))
    ap.add_argument(
        "--tiny",
        action="store_true",
        help="the smallest real run (the test suite's): 1,000 seeded random unit vectors "
        "instead of the cache",
    )
    args = ap.parse_args()
    if args.tiny:
        x = np.random.default_rng(1).standard_normal((1000, 384)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    else:
        conn = sqlite3.connect(str(args.cache / "embeddings.sqlite"))
        rows = conn.execute("SELECT dense FROM vectors LIMIT 20000").fetchall()
        x = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(-1, 384).copy()
    rng = np.random.default_rng(0)
    qs = x[rng.integers(0, len(x), 100)] + 0.05 * rng.standard_normal((100, 384)).astype("f4")
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    truth = [np.argsort(-(x @ q))[:10] for q in qs]
    for m in (16, 32):
        index = Index(ndim=384, metric="cos", dtype="i8", connectivity=m, expansion_add=128)
        t = time.time()
        index.add(np.arange(len(x), dtype=np.uint64), x, threads=2)
        build = time.time() - t
        for ef in (128, 256, 512, 1024):
            index.expansion_search = ef
            recall, times = [], []
            for q, top in zip(qs, truth, strict=True):
                t = time.perf_counter()
                keys = index.search(q, 200, threads=1).keys.astype(int)
                times.append(time.perf_counter() - t)
                best = keys[np.argsort(-(x[keys] @ q))][:10]
                recall.append(len(set(best) & set(top)) / 10)
            print(
                f"connectivity {m} ef {ef}: build {build:.1f} s, recall@10 {np.mean(recall):.3f},"
                f" p50 {np.median(times) * 1000:.2f} ms"
            )


if __name__ == "__main__":
    main()
