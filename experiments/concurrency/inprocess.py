"""Many searches at once with no protocol at all: `Service.search` called back to back from N
threads of one process (no proxy, no HTTP, no MCP), for each N in `--threads`.

    .venv/bin/python experiments/concurrency/inprocess.py HOME [--threads 1,10] [--seconds 5]
    .venv/bin/python experiments/concurrency/inprocess.py --tiny   # a temporary demo home (CI)

No daemon may be running on HOME (this process holds its index). Each thread searches its own
share of the queries (the benchmark's SciFact/LoCoMo dev queries when ../shared is there,
else fixed ones), limit 8, closed loop, from a common start. Per N: searches per second, the
process's CPU per search and the cores it kept busy, search p50 / p95, and how many queries
each ONNX run embedded together (`OnnxMiniLM.query` combines concurrent queries). Round 4 of
experiments/concurrency: is the 10-client ratio the protocol's doing, or the search's?
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon runs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from memory_agent import config  # noqa: E402
from memory_agent.index.memory import Memory  # noqa: E402
from memory_agent.serve.service import Service  # noqa: E402

FALLBACK = [
    "how do we run migrations",
    "which database does staging use",
    "tests are flaky in parallel",
    "why was the cache tier changed",
]


def queries() -> list[str]:
    try:
        from daemon import Text  # benchmarks/daemon.py: the dev queries, read, never copied

        found = Text().queries[:200]
    except Exception:  # noqa: BLE001 - no ../shared: the fixed queries
        found = []
    return found or FALLBACK


def demo_home(prefix: str) -> str:
    """A demo home in a new temporary folder (the `--tiny` runs of this folder's scripts)."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix=prefix)) / "home"
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm")
    return str(home)


@contextlib.contextmanager
def reading(home: str):
    """`home`'s memory held by this process (no daemon may run on it), its index refreshed:
    (the memory, its snapshot) - the one-process measurements of this folder (`rank_cost.py`,
    `perdoc_cost.py`)."""
    memory = Memory(config.load({"home": home}), resident=True)
    memory.require_home()
    with memory.session():
        memory.refresh_for_read()
        yield memory, memory.index.snapshot()
    memory.close()


def run(service: Service, n: int, seconds: float, qs: list[str], runs: collections.Counter):
    latencies: list[float] = []
    start = threading.Barrier(n + 1)
    stop = [float("inf")]

    def loop(c: int) -> None:
        start.wait()
        i = c
        while time.perf_counter() < stop[0]:
            t = time.perf_counter()
            service.search(query=qs[i % len(qs)], limit=8)
            latencies.append((time.perf_counter() - t) * 1000)
            i += n

    threads = [threading.Thread(target=loop, args=(c,)) for c in range(n)]
    for t in threads:
        t.start()
    runs.clear()
    cpu, began = time.process_time(), time.perf_counter()
    stop[0] = began + seconds
    start.wait()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    ordered = sorted(latencies)
    pct = lambda p: ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]  # noqa: E731
    print(
        f"| {n} | {len(ordered) / wall:.1f} | {cpu / len(ordered) * 1000:.2f} ms | "
        f"{cpu / wall:.2f} | {pct(0.5):.1f} / {pct(0.95):.1f} ms | "
        f"{', '.join(f'{k}: {v}' for k, v in sorted(runs.items()))} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--threads", default="1,10")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--tiny", action="store_true", help="a temporary demo home, 1 s each")
    args = parser.parse_args()
    if args.tiny:
        args.home, args.seconds, args.threads = demo_home("inprocess-"), 1.0, "1,2"
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    memory = Memory(config.load({"home": args.home}), resident=True)
    memory.require_home()
    memory.start_watching()  # as the daemon: a search with nothing changed reads no file
    service = Service(memory)
    service.refresh_index()  # waits for the model: every search below is a full one
    qs = queries()
    service.search(query=qs[0], limit=8)
    runs: collections.Counter = collections.Counter()
    onnx = getattr(getattr(memory.index.embedder, "inner", None), "_load_onnx", None)
    if onnx is not None:  # count the queries of each combined model run (MiniLM, ONNX)
        model = onnx()
        encode = model._encode

        def counted(texts, session, run_options=None):
            runs[len(texts)] += 1
            return encode(texts, session, run_options)

        model._encode = counted
    print(
        "| threads | searches/s | CPU per search | cores busy | p50 / p95 | queries per model run |"
    )
    print("|---|---|---|---|---|---|")
    try:
        for n in (int(x) for x in args.threads.split(",")):
            run(service, n, args.seconds, qs, runs)
    finally:
        service.events.close()
        memory.close()


if __name__ == "__main__":
    main()
