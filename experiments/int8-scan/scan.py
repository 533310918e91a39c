"""The dense channel's exact top 100 against the int8 scan's shortlist rescored, in one process.

    .venv/bin/python experiments/int8-scan/scan.py HOME [--queries 500] [--ks 100,150,200,300,400]
    .venv/bin/python experiments/int8-scan/scan.py HOME --tile 5   # 5 copies of its rows
    .venv/bin/python experiments/int8-scan/scan.py --tiny   # the demo home (CI)

HOME: a home with a built index (`benchmarks/daemon.py --entries N --work W` leaves
W/home-N); no daemon may be running on it. The benchmark's dev queries (read from
../shared/bench through benchmarks/daemon_home.py, never copied) are embedded by the home's own
model; for each, the dense top `--limit` over every live slot by the float32 scan
(`DenseRows.scores`) and by the int8 shortlist of k slots rescored in float32 (what
`ragcore.dense.search` does, k = `int8_scan.shortlist(limit)` in the product). Prints, per k:
the share of the exact top kept, the queries whose top is identical (order and scores), and
the thread CPU per scan; then the int8 copy's build time and size. `--tile R`: the home's
rows R times over, each added copy with a little noise - a larger matrix of sentence vectors.
`--allow F`: a filter allowing a random share F of the slots (below a quarter, the float32
answer gathers the allowed rows, as the product did before the int8 scan). experiments/int8-scan/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon runs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments" / "million"))
sys.path.insert(0, str(ROOT / "experiments" / "concurrency"))

import fusion_recall  # noqa: E402
import numpy as np  # noqa: E402
from inprocess import demo_home  # noqa: E402

from memory_agent import config  # noqa: E402
from memory_agent.index.memory import Memory  # noqa: E402
from ragcore import dense, int8_scan  # noqa: E402
from ragcore.postings import top_arrays  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--ks", default="100,150,200,300,400")
    parser.add_argument(
        "--tile",
        type=int,
        default=1,
        help="scan R copies of the home's rows, each but the first with noise (a larger home)",
    )
    parser.add_argument(
        "--allow", type=float, default=1.0, help="a filter allowing this share of the slots"
    )
    parser.add_argument("--tiny", action="store_true", help="the demo home")
    args = parser.parse_args()
    if args.tiny:
        args.home, args.queries = demo_home("int8-scan-"), 3
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    memory = Memory(config.load({"home": args.home}), resident=True)
    memory.require_home()
    memory.refresh()
    model = memory.index.snapshot().model
    rows, hw = model._rows, model.hw  # an experiment reads the read model's own rows
    live = np.flatnonzero(model._alive[:hw])
    if args.tile > 1:  # R copies, noise of a tenth of a row's length on the added ones
        first = rows.take(live)
        rng = np.random.default_rng(0)
        copies = [first]
        for _ in range(args.tile - 1):
            noisy = first + rng.standard_normal(first.shape).astype(np.float32) * (
                0.1 / np.sqrt(rows.dim)
            )
            copies.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
        rows = dense.DenseRows(rows.dim, np.concatenate(copies))
        hw = rows.n0
        live = np.arange(hw)
    texts = fusion_recall.queries(args.queries, args.offset)
    vectors = [
        np.asarray(memory.index.embedder.embed_query(q).dense, dtype=np.float32) for q in texts
    ]
    if args.allow < 1:  # a filter: a random share of the live slots
        live = live[np.random.default_rng(1).random(live.size) < args.allow]
    print(
        f"{args.home}: {hw} slots ({live.size} live and allowed), dim {rows.dim}, "
        f"{len(vectors)} queries"
    )

    t = time.perf_counter()
    copy = int8_scan.Int8Rows(
        [rows.base[: min(hw, rows.n0)], rows.tail[: max(hw - rows.n0, 0)]], rows.dim
    )
    build_ms = (time.perf_counter() - t) * 1000

    def exact(v):
        if live.size * 4 < hw:  # a selective filter: the float32 rows it allows, gathered
            return top_arrays(live, rows.take(live) @ v, args.limit)
        return top_arrays(live, rows.scores(v, hw)[live], args.limit)

    def short(v, k):
        rough = copy.scores(v)[:hw]
        picked = top_arrays(live, rough[live], k)[0]
        return top_arrays(picked, rows.take(picked) @ v, args.limit)

    def ranked(found) -> list[tuple[float, int]]:  # equal scores may come in either order
        return sorted(zip(np.round(-found[1], 6).tolist(), found[0].tolist(), strict=True))

    def cpu_ms(fn) -> tuple[float, list]:
        for v in vectors[:5]:
            fn(v)  # warm
        out = []
        t0 = time.thread_time()
        for v in vectors:
            out.append(fn(v))
        return (time.thread_time() - t0) * 1000 / len(vectors), out

    base_ms, truth = cpu_ms(exact)
    how = "gathered rows" if live.size * 4 < hw else "scan"
    print(f"  float32 {how}: {base_ms:.3f} ms per query (thread CPU)")
    for k in (int(x) for x in args.ks.split(",")):
        ms, got = cpu_ms(lambda v, k=k: short(v, k))
        kept = [
            len(set(g[0]) & set(e[0])) / max(len(e[0]), 1) for g, e in zip(got, truth, strict=True)
        ]
        same = sum(ranked(g) == ranked(e) for g, e in zip(got, truth, strict=True))
        print(
            f"  k={k:4}: kept {statistics.mean(kept):.4f} (min {min(kept):.2f}) of the exact "
            f"top {args.limit}; the same top (slots and scores; ties in any order) on {same}/{len(truth)} queries; "
            f"{ms:.3f} ms per query"
        )
    mask = np.zeros(hw, dtype=bool)
    mask[live] = True
    ms, got = cpu_ms(lambda v: dense.search(rows, None, v, args.limit, mask, hw))
    same = sum(ranked(g) == ranked(e) for g, e in zip(got, truth, strict=True))
    print(
        f"  the product (ragcore.dense.search: k={int8_scan.shortlist(args.limit)}, widened "
        f"within {int8_scan.MARGIN} of the {args.limit}th, at most {int8_scan.MOST}): the same "
        f"top on {same}/{len(truth)} queries; {ms:.3f} ms per query"
    )
    print(f"  int8 copy: built in {build_ms:.0f} ms, {copy.nbytes / 2**20:.1f} MB")
    memory.close()


if __name__ == "__main__":
    main()
