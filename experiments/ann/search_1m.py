"""The dense channel on a saved graph at its real size: recall against the exact scan and the
time of a search, for each graph search width (`expansion_search`) and candidate count.

    .venv/bin/python experiments/ann/search_1m.py [--generation DIR] [--queries 100]
        [--offset 0] [--efs 512,1024,2048] [--fetch 216,400,800] [--tiny]

`--generation`: an index generation that holds `readmodel.arrays` and the `dense.usearch`
built from them (default: the 1M home of `benchmarks/daemon.py --work
/tmp/memory-agent-bench-composed`). The graph is mapped (as the daemon maps it), its
candidates rescored with the float32 rows, as `ragcore.dense` does; the exact top 10 / 100 of
each query come from a scan of every row. Queries: the SciFact and LoCoMo dev queries,
embedded with MiniLM, from the `--offset`-th on. `--tiny`: 3,000 seeded random rows and queries, a graph built here (a
check that the script runs, not a measurement).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from ragcore import ann  # noqa: E402
from ragcore.arrayfile import ArrayFile  # noqa: E402

DEFAULT = Path("/tmp/memory-agent-bench-composed/home-1000000/index/gen-000001")


def real(
    generation: Path, count: int, offset: int
) -> tuple[np.ndarray, ann.DenseGraph, np.ndarray]:
    from daemon_home import Text

    from ragcore import make_embedder

    saved = ArrayFile(generation / "readmodel.arrays")
    matrix = saved.arrays(read=())["matrix"]
    meta = json.loads((generation / (ann.FILE + ".json")).read_text())
    graph = ann.open_graph(generation / ann.FILE, {k: meta[k] for k in ("uid", "seq")})
    if graph is None:
        sys.exit(f"no usable graph in {generation}: run benchmarks/daemon.py first")
    model = make_embedder("minilm", runtime="onnx")
    model.load()
    queries = np.array(
        [model.embed_query(q).dense for q in Text().queries[offset : offset + count]]
    )
    return matrix, graph, queries


def tiny(folder: Path) -> tuple[np.ndarray, ann.DenseGraph, np.ndarray]:
    rng = np.random.default_rng(30)
    matrix = rng.standard_normal((3000, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    graph = ann.build_graph(matrix)
    ann.save_graph(graph, folder / ann.FILE, {"uid": "tiny", "seq": 0})
    graph = ann.open_graph(folder / ann.FILE, {"uid": "tiny", "seq": 0})
    queries = rng.standard_normal((20, 32)).astype(np.float32)
    return matrix, graph, queries / np.linalg.norm(queries, axis=1, keepdims=True)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((len(queries), k), dtype=np.int64)
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    for start in range(0, matrix.shape[0], 65_536):  # a part of the mapped rows at a time
        part = np.ascontiguousarray(matrix[start : start + 65_536])
        scores = queries @ part.T
        for i, row in enumerate(scores):
            both = np.concatenate([best[i], row])
            ids = np.concatenate([out[i], np.arange(start, start + row.size)])
            keep = np.argpartition(-both, k - 1)[:k]
            best[i], out[i] = both[keep], ids[keep]
    order = np.argsort(-best, axis=1)
    return np.take_along_axis(out, order, axis=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generation", type=Path, default=DEFAULT)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--offset", type=int, default=0, help="the first query used")
    ap.add_argument("--efs", default="512,1024,2048")
    ap.add_argument("--fetch", default="216,400,800")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        matrix, graph, queries = (
            tiny(Path(tmp)) if args.tiny else real(args.generation, args.queries, args.offset)
        )
        truth = exact_top(matrix, queries, 100)
        rows = []
        for ef in (int(x) for x in args.efs.split(",")):
            graph._index.expansion_search = ef
            for fetch in (int(x) for x in args.fetch.split(",")):
                r10, r100, times = [], [], []
                for q, want in zip(queries, truth, strict=True):
                    t = time.perf_counter()
                    cands = graph.candidates(q, fetch)
                    scores = matrix[np.sort(cands)] @ q  # rescored (rows read in order)
                    top = np.sort(cands)[np.argsort(-scores)[:100]]
                    times.append((time.perf_counter() - t) * 1000)
                    r10.append(len(set(top[:10].tolist()) & set(want[:10].tolist())) / 10)
                    r100.append(len(set(top.tolist()) & set(want.tolist())) / 100)
                row = {
                    "rows": int(matrix.shape[0]),
                    "expansion_search": ef,
                    "candidates": fetch,
                    "recall_at_10": round(float(np.mean(r10)), 3),
                    "recall_at_100": round(float(np.mean(r100)), 3),
                    "p50_ms": round(float(np.percentile(times, 50)), 2),
                    "p95_ms": round(float(np.percentile(times, 95)), 2),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        del graph  # its mapping before the folder goes


if __name__ == "__main__":
    main()
