"""ANN engines on real MiniLM vectors: recall against the exact scan, latency, build, memory,
mmap, add and delete, filters (experiments/ann/README.md, issue 30).

    .venv/bin/python experiments/ann/measure.py [--sizes 100000,1000000] [--queries 300]
        [--cache /tmp/memory-agent-bench/cache] [--engines usearch,faiss,edge] [--json]

Vectors come from the benchmark's embedding cache (the entries of benchmarks/daemon.py's
homes); when fewer are cached than a size asks, the rest are made by mixing two cached vectors
(a*x + (1-a)*y, normalised) and the run says how many. Queries: the SciFact and LoCoMo dev
queries, embedded here with the same MiniLM. Searches run one query at a time, one thread,
every built candidate in turn per query (interleaved: the machine is shared).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sqlite3  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT.parent / "shared" / "bench"
MODEL = "all-MiniLM-L6-v2/max256"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cached_vectors(cache: Path, n: int) -> tuple[np.ndarray, int]:
    conn = sqlite3.connect(str(cache / "embeddings.sqlite"))
    rows = conn.execute("SELECT dense FROM vectors WHERE model = ? LIMIT ?", (MODEL, n)).fetchall()
    real = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(-1, 384)
    if len(real) >= n:
        return real[:n].copy(), n
    rng = np.random.default_rng(5)
    need = n - len(real)
    a = rng.random((need, 1), dtype=np.float32) * 0.6 + 0.2
    x, y = real[rng.integers(0, len(real), need)], real[rng.integers(0, len(real), need)]
    mixed = a * x + (1 - a) * y
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return np.concatenate([real, mixed]), len(real)


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.standard_normal((n, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def query_vectors(limit: int) -> np.ndarray:
    sys.path.insert(0, str(ROOT))
    from ragcore import make_embedder

    texts = []
    for name in ("scifact", "locomo"):
        for line in (BENCH / name / "queries.jsonl").read_text().splitlines():
            texts.append(json.loads(line)["query"])
    rng = np.random.default_rng(3)
    texts = [texts[i] for i in rng.permutation(len(texts))[:limit]]
    model = make_embedder("minilm", runtime="onnx", work_dir=Path("/tmp/memory-agent-bench/cache"))
    model.load()
    return np.stack([model.embed_query(t).dense for t in texts]).astype(np.float32)


def exact_top(matrix: np.ndarray, q: np.ndarray, k: int, allowed=None) -> np.ndarray:
    scores = matrix @ q
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    idx = np.argpartition(-scores, k)[:k]
    return idx[np.argsort(-scores[idx])]


def rescore(matrix: np.ndarray, q: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    ids = ids[ids >= 0]
    s = matrix[ids] @ q
    return ids[np.argsort(-s)][:k]


# -- candidates: build() -> object with search(q, k, allowed) -> ids ----------------------
class Usearch:
    _built: dict = {}

    def __init__(self, dtype: str, ef: int):
        self.dtype, self.ef, self.name = dtype, ef, f"usearch {dtype} ef{ef}"

    def build(self, matrix: np.ndarray, work: Path) -> dict:
        from usearch.index import Index

        if self.dtype in Usearch._built:  # the same graph, searched with another ef
            self.index = Usearch._built[self.dtype]
            return {"build_s": "shared with the first build of this dtype"}
        t = time.perf_counter()
        idx = Index(
            ndim=matrix.shape[1],
            metric="cos",
            dtype=self.dtype,
            connectivity=16,
            expansion_add=128,
            expansion_search=self.ef,
        )
        idx.add(np.arange(len(matrix), dtype=np.uint64), matrix, threads=2)
        out = {"build_s": time.perf_counter() - t}
        path = work / f"u-{self.dtype}-{self.ef}.usearch"
        idx.save(str(path))
        del idx
        r0 = rss_mb()
        t = time.perf_counter()
        self.index = Index.restore(str(path), view=True)
        Usearch._built[self.dtype] = self.index
        out.update(
            open_mmap_s=time.perf_counter() - t,
            file_mb=path.stat().st_size / 2**20,
            rss_after_open_mb=rss_mb() - r0,
        )
        # add and delete on a writable copy (a view is read-only)
        w = Index.restore(str(path))
        extra = matrix[:1000] * 0.9 + matrix[1000:2000] * 0.1
        extra /= np.linalg.norm(extra, axis=1, keepdims=True)
        t = time.perf_counter()
        w.add(np.arange(len(matrix), len(matrix) + 1000, dtype=np.uint64), extra, threads=1)
        out["add_1000_s"] = time.perf_counter() - t
        t = time.perf_counter()
        w.remove(np.arange(1000, dtype=np.uint64))
        out["delete_1000_s"] = time.perf_counter() - t
        del w
        return out

    def search(self, q, k, allowed=None):
        over = k if allowed is None else int(k / max(allowed.mean(), 0.05)) + k
        self.index.expansion_search = self.ef
        m = self.index.search(q, over, threads=1)
        ids = m.keys.astype(np.int64)
        if allowed is not None:
            ids = ids[allowed[ids]]
        return ids[:k]


class Faiss:
    _built: dict = {}

    def __init__(self, kind: str, ef: int):
        self.kind, self.ef, self.name = kind, ef, f"faiss {kind} ef{ef}"

    def build(self, matrix: np.ndarray, work: Path) -> dict:
        import faiss

        self.faiss = faiss
        if self.kind in Faiss._built:
            self.index = Faiss._built[self.kind]
            return {"build_s": "shared with the first build of this kind"}

        faiss.omp_set_num_threads(2)
        d = matrix.shape[1]
        if self.kind == "SQ8":
            idx = faiss.IndexHNSWSQ(
                d, faiss.ScalarQuantizer.QT_8bit, 16, faiss.METRIC_INNER_PRODUCT
            )
            t = time.perf_counter()
            idx.train(matrix)
        else:
            idx = faiss.IndexHNSWFlat(d, 16, faiss.METRIC_INNER_PRODUCT)
            t = time.perf_counter()
        idx.hnsw.efConstruction = 128
        idx.add(matrix)
        out = {"build_s": time.perf_counter() - t}
        path = work / f"f-{self.kind}-{self.ef}.faiss"
        faiss.write_index(idx, str(path))
        t = time.perf_counter()
        extra = matrix[:1000].copy()
        idx.add(extra)
        out["add_1000_s"] = time.perf_counter() - t
        try:
            idx.remove_ids(np.arange(1000, dtype=np.int64))
            out["delete_1000_s"] = "supported"
        except RuntimeError as exc:
            out["delete_1000_s"] = f"not supported ({str(exc).splitlines()[0][:60]})"
        del idx
        r0 = rss_mb()
        t = time.perf_counter()
        try:
            self.index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP)
            out["open_mmap_s"] = time.perf_counter() - t
        except RuntimeError as exc:
            out["open_mmap_s"] = f"mmap refused ({str(exc).splitlines()[0][:60]})"
            t = time.perf_counter()
            self.index = faiss.read_index(str(path))
            out["open_read_s"] = time.perf_counter() - t
        out.update(file_mb=path.stat().st_size / 2**20, rss_after_open_mb=rss_mb() - r0)
        faiss.omp_set_num_threads(1)
        Faiss._built[self.kind] = self.index
        return out

    def search(self, q, k, allowed=None):
        faiss = self.faiss
        params = faiss.SearchParametersHNSW(efSearch=max(self.ef, k))
        if allowed is not None:
            bits = np.packbits(allowed, bitorder="little")
            params.sel = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bits))
        _, ids = self.index.search(q[None, :], k, params=params)
        return ids[0]


class Edge:
    """qdrant-edge-py: an EdgeShard with HNSW and int8 scalar quantisation."""

    def __init__(self, ef: int):
        self.ef, self.name = ef, f"qdrant-edge int8 ef{ef}"

    def build(self, matrix: np.ndarray, work: Path) -> dict:
        import qdrant_edge as qe

        path = work / f"edge-{self.ef}"
        cfg = qe.EdgeConfig(
            vectors={
                "dense": qe.EdgeVectorParams(size=matrix.shape[1], distance=qe.Distance.Cosine)
            },
            hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=128),
            quantization_config=qe.ScalarQuantizationConfig(
                type=qe.ScalarType.Int8, always_ram=True
            ),
        )
        t = time.perf_counter()
        shard = qe.EdgeShard.create(str(path), cfg)
        for s in range(0, len(matrix), 2000):
            pts = [
                qe.Point(i, {"dense": matrix[i].tolist()}, {"allowed": True})
                for i in range(s, min(s + 2000, len(matrix)))
            ]
            shard.update(qe.UpdateOperation.upsert_points(pts))
        shard.optimize()
        out = {"build_s": time.perf_counter() - t}
        self.shard, self.qe = shard, qe
        return out

    def search(self, q, k, allowed=None):
        qe = self.qe
        if allowed is not None:
            return np.zeros(0, dtype=np.int64)  # payload filter not wired in this measure
        res = self.shard.query(
            qe.QueryRequest(
                query=qe.Query.Nearest(q.tolist(), using="dense"),
                limit=k,
                params=qe.SearchParams(hnsw_ef=self.ef),
                with_payload=False,
            )
        )
        return np.array([int(p.id) for p in res], dtype=np.int64)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/memory-agent-bench/cache"))
    ap.add_argument("--engines", default="usearch,faiss,edge")
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--tiny",
        action="store_true",
        help="the smallest real run (the test suite's): 2,000 seeded random unit vectors, "
        "3 queries, usearch only - no cache, no ../shared, no model",
    )
    args = ap.parse_args()
    if args.tiny:
        args.sizes, args.queries, args.engines = "2000", 3, "usearch"
        qs = unit_rows(np.random.default_rng(1), args.queries)
    else:
        qs = query_vectors(args.queries)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        if args.tiny:
            matrix, real = unit_rows(np.random.default_rng(2), size), 0
        else:
            matrix, real = cached_vectors(args.cache, size)
        print(
            f"[{size}] {real} cached real vectors, {size - real} mixed; load "
            f"{os.getloadavg()[0]:.1f}",
            file=sys.stderr,
            flush=True,
        )
        rng = np.random.default_rng(9)
        masks = {"80%": rng.random(size) < 0.8, "2%": rng.random(size) < 0.02}
        cands = []
        engines = args.engines.split(",")
        if "usearch" in engines:
            cands += [Usearch("i8", ef) for ef in (64, 128, 256)]
            if "f32" in engines:
                cands += [Usearch("f32", 128)]
        if "faiss" in engines:
            cands += [Faiss("SQ8", ef) for ef in (64, 128, 256)]
            if "f32" in engines:
                cands += [Faiss("Flat", 128)]
        if "edge" in engines:
            cands += [Edge(128)]
        work = Path(tempfile.mkdtemp(prefix="ann-", dir="/tmp"))
        rows: dict[str, dict] = {}
        built = []
        for c in cands:
            print(f"[{size}] building {c.name}", file=sys.stderr, flush=True)
            r0 = rss_mb()
            try:
                info = c.build(matrix, work)
            except Exception as exc:  # noqa: BLE001 - a candidate that fails is reported
                rows[c.name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                print(f"  failed: {rows[c.name]}", file=sys.stderr, flush=True)
                continue
            info["rss_growth_mb"] = rss_mb() - r0
            rows[c.name] = info
            built.append(c)
            print(f"  {info}", file=sys.stderr, flush=True)
        truth = [exact_top(matrix, q, 100) for q in qs]
        ftruth = {m: [exact_top(matrix, q, 10, masks[m]) for q in qs] for m in masks}
        lat: dict[str, list[float]] = {c.name: [] for c in built}
        lat["exact numpy"] = []
        r10: dict[str, list[float]] = {c.name: [] for c in built}
        r100: dict[str, list[float]] = {c.name: [] for c in built}
        fr: dict[tuple[str, str], list[float]] = {}
        flat: dict[tuple[str, str], list[float]] = {}
        k = args.candidates
        for qi, q in enumerate(qs):
            t = time.perf_counter()
            exact_top(matrix, q, 100)
            lat["exact numpy"].append((time.perf_counter() - t) * 1000)
            for c in built:
                t = time.perf_counter()
                ids = rescore(matrix, q, c.search(q, k), 100)
                lat[c.name].append((time.perf_counter() - t) * 1000)
                r10[c.name].append(len(set(ids[:10]) & set(truth[qi][:10])) / 10)
                r100[c.name].append(len(set(ids[:100]) & set(truth[qi][:100])) / 100)
                for m, allowed in masks.items():
                    if isinstance(c, Edge):
                        continue
                    t = time.perf_counter()
                    ids = rescore(matrix, q, c.search(q, k, allowed), 10)
                    flat.setdefault((c.name, m), []).append((time.perf_counter() - t) * 1000)
                    fr.setdefault((c.name, m), []).append(
                        len(set(ids[:10]) & set(ftruth[m][qi])) / 10
                    )
            allowed = np.flatnonzero(masks["2%"])
            t = time.perf_counter()
            sub = matrix[allowed] @ q
            allowed[np.argsort(-sub)[:10]]
            flat.setdefault(("exact subset", "2%"), []).append((time.perf_counter() - t) * 1000)
        for name, times in lat.items():
            row = rows.setdefault(name, {})
            row.update(
                p50_ms=float(np.percentile(times, 50)), p95_ms=float(np.percentile(times, 95))
            )
            if name in r10:
                row.update(recall10=float(np.mean(r10[name])), recall100=float(np.mean(r100[name])))
        for (name, m), v in fr.items():
            rows[name][f"filter {m} recall10"] = float(np.mean(v))
        for (name, m), v in flat.items():
            rows.setdefault(name, {})[f"filter {m} p50_ms"] = float(np.percentile(v, 50))
        results.append(
            {"size": size, "real_vectors": real, "load": os.getloadavg()[0], "rows": rows}
        )
        print(json.dumps(results[-1], indent=1), flush=True)


if __name__ == "__main__":
    main()
