"""Each part of a search on a real 1M-entry index, in this process: the open, the filter mask,
the lexical channel (BM25 on the postings), the dense exact scan, per-document aggregation
and fusion - from the generation `benchmarks/daemon.py --entries 1000000` built.

    .venv/bin/python experiments/ann/channels_1m.py INDEX_DIR [--queries 100]
    .venv/bin/python experiments/ann/channels_1m.py --tiny   # a temporary demo home's index (CI)

Queries: SciFact and LoCoMo dev queries (../shared/bench), else a few fixed ones.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from ragcore import Index, make_embedder  # noqa: E402
from ragcore.fusion import FusionConfig, fuse  # noqa: E402
from ragcore.search import _per_document  # noqa: E402
from ragcore.store import Filter  # noqa: E402
from ragcore.tokenizer import term_frequencies  # noqa: E402

BENCH = ROOT.parent / "shared" / "bench"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, items):
    times, out = [], []
    for item in items:
        t = time.perf_counter()
        out.append(fn(item))
        times.append((time.perf_counter() - t) * 1000)
    return round(float(np.median(times)), 2), round(float(np.percentile(times, 95)), 2), out


FALLBACK = ["how do we run migrations", "which database does staging use", "flaky tests"]


def tiny_index() -> Path:
    """A demo home's index, built in a temporary folder (the `--tiny` run)."""
    import tempfile

    from memory_agent import config
    from memory_agent.index.memory import Memory

    home = Path(tempfile.mkdtemp(prefix="channels-tiny-")) / "home"
    memory = Memory(config.load({"home": str(home)}))
    memory.init(demo=True, embedder="minilm")
    memory.close()
    return memory.cfg.index_dir


def query_texts(count: int, tiny: bool) -> list[str]:
    """The benchmarks' dev queries; the fixed ones only in a `--tiny` run without them."""
    texts = []
    for name in ("scifact", "locomo"):
        path = BENCH / name / "queries.jsonl"
        if path.is_file():
            texts += [json.loads(line)["query"] for line in path.read_text().splitlines()]
    if not texts and not tiny:
        sys.exit(f"no queries under {BENCH}: this experiment reads ../shared/bench (or --tiny)")
    texts = texts or FALLBACK
    return texts[:: max(1, len(texts) // count)][:count]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", type=Path, nargs="?")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--tiny", action="store_true", help="a temporary demo home's index")
    args = ap.parse_args()
    if args.tiny:
        args.index, args.queries = tiny_index(), 3
    elif args.index is None:
        ap.error("give an INDEX_DIR (or --tiny)")
    cache = Path(os.environ.get("MEMORY_AGENT_CACHE") or "/tmp/memory-agent-bench")
    embedder = make_embedder("minilm", runtime="onnx", work_dir=cache)
    report: dict = {"load": os.getloadavg()[0]}
    t = time.perf_counter()
    index = Index(args.index, embedder, dense_graph=False)
    snap = index.snapshot()
    report["open_s"] = round(time.perf_counter() - t, 2)
    report["rss_after_open_mb"] = round(rss_mb())
    report["documents"] = len(snap)
    texts = query_texts(args.queries, args.tiny)
    report["queries"] = len(texts)
    vectors = [embedder.embed_query(q).dense for q in texts]
    tfs = [term_frequencies(snap.tokenizer(q)) for q in texts]
    flt = Filter(statuses=("active",))
    report["mask_ms"], _, _ = timed(lambda _: snap.channels(flt), texts)
    view = snap.channels(flt)
    report["lexical_ms"], report["lexical_p95_ms"], lex = timed(
        lambda tf: view.lexical(tf, 100), tfs
    )
    report["dense_exact_ms"], report["dense_exact_p95_ms"], den = timed(
        lambda v: view.dense(v, 100), vectors
    )
    report["per_document_ms"], _, _ = timed(lambda h: _per_document(snap, h), lex + den)
    chans = [
        {"lexical": _per_document(snap, a), "dense": _per_document(snap, b)}
        for a, b in zip(lex, den, strict=True)
    ]
    report["fuse_ms"], _, _ = timed(lambda c: fuse(c, FusionConfig(), {}), chans)
    report["rss_end_mb"] = round(rss_mb())
    print(json.dumps(report))
    index.close()


if __name__ == "__main__":
    main()
