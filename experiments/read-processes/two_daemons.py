"""The ceiling of reads served by a second process: one daemon against two independent daemons
over copies of one home, ten closed-loop clients (README.md here has the question and method).

    experiments/read-processes/two_daemons.py HOME --clients 10 --duration 8 --runs 3

HOME is a benchmark home (`benchmarks/daemon.py --entries 10000 --keep-index --work W` makes
W/home-10000, its embedding cache W/cache). The copy is made once, beside it (HOME-copy), and
reused. Prints one JSON line per window, and per round its ratios (on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "experiments" / "concurrency"), str(ROOT)]

from daemon_clients import machine_busy_s, searchers  # noqa: E402
from daemon_home import Text, bench_env, cpu_s, pct  # noqa: E402
from inprocess import demo_home  # noqa: E402

from memory_agent.client import DaemonClient  # noqa: E402


def copy_home(home: Path) -> Path:
    """HOME-copy: the KB (a git clone keeps it a repository of its own) and everything else
    of the home but the daemon's run files. Made once."""
    copy = home.with_name(home.name + "-copy")
    if copy.exists():
        return copy
    shutil.copytree(
        home,
        copy,
        symlinks=True,
        ignore=shutil.ignore_patterns("*.sock", "*.pid", "*.lock", "daemon.log", "run"),
    )
    # git's index holds the stat data of the files it was made beside: refreshed here, once,
    # not by the copy's daemon in a measured window (and not onto stdout, the JSON lines)
    subprocess.run(
        ["git", "-C", str(copy / "kb"), "status", "--short"], check=True, capture_output=True
    )
    return copy


def window(
    homes: list[tuple[Path, dict[str, str], int]],
    clients: int,
    duration: float,
    queries: list[str],
) -> dict[str, float]:
    """`clients` searchers split over the daemons in `homes` (home, env, daemon pid), one
    common start, `duration` seconds: throughput, p50 / p95, the daemons' CPU per search."""
    out: dict[str, list[float]] = {"memory_search": [], "memory_add": [], "proxy_cpu_s": []}
    failures: list[str] = []
    start = threading.Barrier(clients + 1)
    stop_at = [float("inf")]
    targets = [(home, env) for home, env, _ in homes]
    threads = searchers(targets, clients, queries, start, stop_at, out, failures)
    for th in threads:
        th.start()
    start.wait(timeout=600)
    began = time.perf_counter()
    stop_at[0] = began + duration
    cpu_before = [cpu_s(pid) for _, _, pid in homes]
    busy_before = machine_busy_s()
    for th in threads:
        th.join()
    wall = time.perf_counter() - began
    cpu = sum(cpu_s(pid) for _, _, pid in homes) - sum(cpu_before)
    busy = machine_busy_s() - busy_before
    searches = out["memory_search"]
    for f in failures[:3]:
        print(f"  failure: {f}", file=sys.stderr)
    return {
        "daemons": float(len(homes)),
        "clients": float(clients),
        "searches_per_s": len(searches) / wall,
        "search_p50_ms": pct(searches, 0.5) if searches else float("nan"),
        "search_p95_ms": pct(searches, 0.95) if searches else float("nan"),
        "daemon_cpu_ms_per_search": cpu * 1000 / max(1, len(searches)),
        "proxies_cpu_ms_per_search": sum(out["proxy_cpu_s"]) * 1000 / max(1, len(searches)),
        "busy_cores": busy / wall,
        "failures": float(len(failures)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path, nargs="?", help="a benchmark home, e.g. W/home-10000")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per window")
    parser.add_argument("--runs", type=int, default=3, help="rounds, each all three settings")
    parser.add_argument("--tiny", action="store_true", help="the demo home, 2 clients, 1 s")
    args = parser.parse_args()
    if args.tiny:
        args.home = Path(demo_home("two-daemons-"))
        args.clients, args.duration, args.runs = 2, 1.0, 1
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    home = args.home.resolve()
    # The embedding cache the home was built with: W/cache beside a benchmark home, the demo
    # home's own cache folder for --tiny (shared by the copy: read-only after the build).
    work = argparse.Namespace(work=home if args.tiny else home.parent)
    if not (home / "kb" / ".git").is_dir():
        sys.exit(f"{home}: not a benchmark home (no kb/.git); make one with benchmarks/daemon.py")
    queries = Text().queries[:200]
    copy = copy_home(home)
    envs = [bench_env(home, work), bench_env(copy, work)]
    daemons = []
    for h, env in zip((home, copy), envs, strict=True):
        os.environ["MEMORY_AGENT_HOME"] = str(h)
        client = DaemonClient(h, timeout=3600)
        client.ensure()
        client.admin("refresh")
        daemons.append((h, env, client.pid()))
        print(f"daemon on {h}: pid {client.pid()}", file=sys.stderr)
    try:
        for r in range(args.runs):
            rows = [
                window(daemons[:1], 1, args.duration, queries),
                window(daemons[:1], args.clients, args.duration, queries),
                window(daemons, args.clients, args.duration, queries),
            ]
            for row in rows:
                print(json.dumps({"round": r + 1, **{k: round(v, 2) for k, v in row.items()}}))
            one = rows[0]["searches_per_s"]
            print(
                f"round {r + 1}: 1 client {one:.1f}/s; {args.clients} clients, one daemon "
                f"{rows[1]['searches_per_s'] / one:.2f}x; two daemons "
                f"{rows[2]['searches_per_s'] / one:.2f}x",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for h, _, _ in daemons:
            DaemonClient(h).stop(wait=True)
        if args.tiny:
            shutil.rmtree(home.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
