"""Does naming the lexical candidates to the dense channel close the answers' recall gap on a graph?

    .venv/bin/python experiments/million/fusion_recall.py HOME [--widths 16,64,256] [--fetch 116]
        [--queries 100] [--offset 0]
    .venv/bin/python experiments/million/fusion_recall.py --tiny   # the demo home, thresholds lowered (CI)

HOME: a home with a built index whose dense graph is saved (`benchmarks/daemon.py --entries
100000 --work W` leaves W/home-100000); no daemon may be running on it. In one process, no
usage logged (`recall.reads.search`, limit 10, default filters), for each search width of the
graph (`--fetch`: how many candidates it is asked for, default the product's): the dense
channel's recall@100 against the exact scan, and the answers' recall@10 against the answers
with the exact scan - the lexical candidates not named to the dense channel (as before) and
named (`also`, as now). The benchmark's SciFact/LoCoMo dev queries, from `--offset`.
experiments/million/README.md, "The fusion's recall gap".
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon runs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from memory_agent import config  # noqa: E402
from memory_agent.index.memory import Memory  # noqa: E402
from memory_agent.recall.reads import search  # noqa: E402
from ragcore import ann, dense, readmodel, snapshot  # noqa: E402

FALLBACK = ["how do we run migrations", "which database does staging use", "flaky tests"]


def queries(n: int, offset: int) -> list[str]:
    try:
        from daemon_home import Text  # the dev queries, read, never copied

        found = Text().queries[offset : offset + n]
    except Exception:  # noqa: BLE001 - no ../shared: the fixed queries
        found = []
    return found or FALLBACK


def top(memory: Memory, q: str, k: int = 10) -> list[str]:
    return [h["id"] for h in search(memory, q, limit=k)["hits"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--widths", default="16,64,256")
    parser.add_argument("--fetch", type=int, help="graph candidates asked for (default: product's)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--tiny", action="store_true", help="the demo home, thresholds lowered")
    args = parser.parse_args()
    if args.tiny:
        for module in (ann, dense):  # a graph from 20 rows: the demo home has one
            module.EXACT_BELOW = 20
        dense.FILTER_EXACT_BELOW = 5
        home = Path(tempfile.mkdtemp(prefix="fusion-recall-")) / "home"
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm")
        args.home, args.widths, args.queries = str(home), "4,64", 3
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    memory = Memory(config.load({"home": args.home}), resident=True)
    memory.require_home()
    memory.start_watching()  # as the daemon: a search with nothing changed reads no file
    memory.refresh()
    for _ in range(1200):  # the saved graph is mapped (or a new one built) after the open
        graph = memory.index.snapshot().model.graph
        if graph is not None:
            break
        time.sleep(0.5)
    else:
        raise SystemExit("no dense graph on this index (below the size that builds one?)")
    if args.fetch:
        dense.fetch_for = lambda limit, share: args.fetch
    qs = queries(args.queries, args.offset)
    named_dense, scan = snapshot.Channels.dense, readmodel.search_rows
    searched = [0]

    def unnamed(self, vector, limit, also=()):
        return named_dense(self, vector, limit)

    def counted(rows, graph, *rest):
        searched[0] += graph is not None
        return scan(rows, graph, *rest)

    readmodel.search_rows = lambda rows, graph, *rest: scan(rows, None, *rest)  # exact
    exact = [top(memory, q) for q in qs]
    exact_dense = [channel(memory, q) for q in qs]
    readmodel.search_rows = counted
    print(
        f"{len(qs)} queries, {memory.index.snapshot().model.hw:,} chunks, fetch {args.fetch or 'default'}"
    )
    print("| width | dense recall@100 | answers' recall@10: unnamed | named | graph searches |")
    print("|---|---|---|---|---|")
    for width in (int(w) for w in args.widths.split(",")):
        memory.index.snapshot().model.graph._index.expansion_search = width
        searched[0] = 0
        got_dense = [channel(memory, q) for q in qs]
        snapshot.Channels.dense = unnamed
        try:
            plain = [top(memory, q) for q in qs]
        finally:
            snapshot.Channels.dense = named_dense
        named = [top(memory, q) for q in qs]
        print(
            f"| {width} | {overlap(got_dense, exact_dense):.3f} | "
            f"{overlap(plain, exact):.3f} | {overlap(named, exact):.3f} | {searched[0]} |",
            flush=True,
        )
    memory.close()


def channel(memory: Memory, q: str) -> list[str]:
    """The dense channel's top 100 chunks for `q` (no filter)."""
    snap = memory.index.snapshot()
    vector = snap.embedder.embed_query(q).dense
    return [c for c, _ in snap.channels(None).dense(vector, 100)]


def overlap(got: list[list[str]], truth: list[list[str]]) -> float:
    shares = [len(set(g) & set(t)) / max(1, len(t)) for g, t in zip(got, truth, strict=True)]
    return sum(shares) / max(1, len(shares))


if __name__ == "__main__":
    main()
