"""The ranking stage of a search alone: the thread CPU of one `recall.reads.rank` call (ragcore's
channels and fusion, the memory's re-ranking and links, the hits' payloads and snippets), in
one process, on one thread, with the queries embedded beforehand - no model run, no protocol.

    .venv/bin/python experiments/concurrency/rank_cost.py HOME [--calls 500] [--rounds 3]
    .venv/bin/python experiments/concurrency/rank_cost.py --tiny   # a temporary demo home (CI)

No daemon may be running on HOME (this process holds its index). The queries are the
benchmark's SciFact/LoCoMo dev queries when ../shared is there, else fixed ones (as
inprocess.py); limit 8, the default filter. Prints the CPU per call of each round. Compare
two versions of the code by running each with its checkout on PYTHONPATH, alternated.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon runs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

from inprocess import demo_home, queries, reading  # noqa: E402

from memory_agent.recall.reads import default_filter, rank  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="a temporary demo home, 20 calls")
    args = parser.parse_args()
    if args.tiny:
        args.home, args.calls, args.rounds = demo_home("rank-cost-"), 20, 1
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    with reading(args.home) as (memory, index):
        qs = queries()[:100]
        vectors = [memory.index.embedder.embed_query(q) for q in qs]
        flt, graph = default_filter(), memory.link_graph(index)

        def calls(n: int) -> float:
            started = time.thread_time()
            for i in range(n):
                rank(
                    index,
                    qs[i % len(qs)],
                    flt,
                    limit=8,
                    stats=memory.stats,
                    now=memory.clock(),
                    graph=graph,
                    embedding=vectors[i % len(qs)],
                )
            return (time.thread_time() - started) / n * 1000

        calls(min(args.calls, 200))  # warm: the link memo, the caches, the pages
        rounds = [calls(args.calls) for _ in range(args.rounds)]
    print(
        f"{len(index)} entries, {args.calls} calls per round: "
        + ", ".join(f"{r:.3f}" for r in rounds)
        + " ms of CPU per rank call",
        flush=True,
    )


if __name__ == "__main__":
    main()
