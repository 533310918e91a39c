"""Read-path candidates of ADR 0008 on synthetic vectors: a numpy matrix with precomputed
filter masks, qdrant-client's local mode, and qdrant-edge-py when it is installed.

    .venv/bin/python experiments/scale/candidates.py [--sizes 10000,100000] [--queries 50]
        [--qdrant-local-max 10000] [--json]

Unit vectors of dim 384 (seeded), top 100, a payload per row with status (80% active), one of
10 types, a source and tags. Three filters: none / status=active / status=active and 2 of the
10 types. Prints the p50 ms of a query per filter and candidate, one thread
(OMP/OPENBLAS threads 1), and the numpy matrix's memory. qdrant-client's local mode evaluates
a filter in Python per point: it is run up to --qdrant-local-max rows only (minutes beyond).
qdrant-edge-py (the embedded Qdrant, beta) is not a dependency of this project: its row of
the ADR's table was measured with version 0.9.0 by a helper that is not in the repository; this
script runs it only when `qdrant_edge` imports, and says so when it does not.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread, as the ADR's table
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

DIM = 384
TOP = 100
TYPES = [f"type{i}" for i in range(10)]
FILTERS = ("none", "status=active", "status=active and 2 types")


def data(n: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    status = np.where(rng.random(n) < 0.8, "active", "archived")
    types = rng.choice(TYPES, n)
    return vectors, status, types


def queries(q: int, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((q, DIM), dtype=np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def p50_ms(fn, qs) -> float:
    times = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2)


def numpy_matrix(vectors, status, types, qs) -> dict:
    masks = {
        "none": None,
        "status=active": status == "active",
        "status=active and 2 types": (status == "active") & np.isin(types, TYPES[:2]),
    }

    def search(q, mask):
        scores = vectors @ q
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        k = min(TOP, len(scores) - 1)
        top = np.argpartition(-scores, k)[:TOP]
        return top[np.argsort(-scores[top])]

    return {
        "p50_ms": {name: p50_ms(lambda q, m=m: search(q, m), qs) for name, m in masks.items()},
        "matrix_mb": round(vectors.nbytes / 2**20, 1),
    }


def qdrant_local(vectors, status, types, qs) -> dict:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    client.create_collection(
        "c", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    batch = 1000
    for start in range(0, len(vectors), batch):
        client.upsert(
            "c",
            points=[
                models.PointStruct(
                    id=i,
                    vector=vectors[i].tolist(),
                    payload={
                        "status": str(status[i]),
                        "type": str(types[i]),
                        "source": "kb",
                        "tags": ["a", "b"],
                    },
                )
                for i in range(start, min(start + batch, len(vectors)))
            ],
        )

    def match(key, value):
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    flts = {
        "none": None,
        "status=active": models.Filter(must=[match("status", "active")]),
        "status=active and 2 types": models.Filter(
            must=[
                match("status", "active"),
                models.FieldCondition(key="type", match=models.MatchAny(any=TYPES[:2])),
            ]
        ),
    }

    def search(q, flt):
        return client.query_points("c", query=q.tolist(), limit=TOP, query_filter=flt)

    out = {name: p50_ms(lambda q, f=f: search(q, f), qs) for name, f in flts.items()}
    client.close()
    return {"p50_ms": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--qdrant-local-max", type=int, default=10000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    qs = queries(args.queries)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        vectors, status, types = data(n)
        row = {"rows": n, "numpy matrix": numpy_matrix(vectors, status, types, qs)}
        if n <= args.qdrant_local_max:
            try:
                row["qdrant-client local"] = qdrant_local(vectors, status, types, qs)
            except ImportError:  # the `qdrant` extra is not installed
                row["qdrant-client local"] = "not installed (pip install 'memory-agent[qdrant]')"
        try:
            import qdrant_edge  # noqa: F401
        except ImportError:
            row["qdrant-edge-py"] = "not installed (not a dependency): not run"
        else:
            row["qdrant-edge-py"] = "installed, but not measured by this script"
        rows.append(row)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"p50 ms per query, filters {' / '.join(FILTERS)}; top {TOP}, dim {DIM}, one thread")
    for row in rows:
        for name in ("numpy matrix", "qdrant-client local", "qdrant-edge-py"):
            got = row.get(name, "not run at this size")
            if isinstance(got, dict):
                cells = " / ".join(str(got["p50_ms"][f]) for f in FILTERS)
                extra = f"  (matrix {got['matrix_mb']} MB)" if "matrix_mb" in got else ""
                print(f"{row['rows']:>7,}  {name:<20} {cells}{extra}")
            else:
                print(f"{row['rows']:>7,}  {name:<20} {got}")


if __name__ == "__main__":
    main()
