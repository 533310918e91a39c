"""Each document's best chunk chosen over a channel's arrays (`ragcore.hits.SlotHits`) against the
loop over (chunk id, score) pairs it replaced, in one process, alternated call by call (round 9).

    .venv/bin/python experiments/concurrency/perdoc_cost.py HOME [--passes 20]
    .venv/bin/python experiments/concurrency/perdoc_cost.py --tiny   # a temporary demo home (CI)

No daemon may be running on HOME (this process holds its index). For the benchmark's queries
(as inprocess.py: the SciFact/LoCoMo dev queries when ../shared is there), the lexical and the
dense channel's 100 hits under the default filter; then, per pass and per hit list, the thread
CPU of `_per_document` on the arrays, and of making the pairs list plus the loop over it (what
a channel and `_per_document` did before). Prints the CPU of each per search (two channels).
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

from memory_agent.recall.reads import default_filter  # noqa: E402
from ragcore.search import _per_document  # noqa: E402
from ragcore.tokenizer import term_frequencies  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="a temporary demo home, 2 passes")
    args = parser.parse_args()
    if args.tiny:
        args.home, args.passes = demo_home("perdoc-cost-"), 2
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    with reading(args.home) as (_, snap):
        view = snap.channels(default_filter())
        qs = queries()[:100]
        hits = []
        for q in qs:
            lexical = view.lexical(term_frequencies(snap.tokenizer(q)), 100)
            hits += [lexical, view.dense(snap.embedder.embed_query(q).dense, 100, lexical)]
        pairs = arrays = 0.0
        for _ in range(args.passes):
            for h in hits:
                t = time.thread_time()
                _per_document(snap, list(h))
                pairs += time.thread_time() - t
                t = time.thread_time()
                _per_document(snap, h)
                arrays += time.thread_time() - t
        n = args.passes * len(qs)
    print(
        f"{len(snap)} entries, {len(qs)} queries x {args.passes} passes, per search (two "
        f"channels): pairs + loop {pairs / n * 1000:.3f} ms, arrays {arrays / n * 1000:.3f} ms",
        flush=True,
    )


if __name__ == "__main__":
    main()
