"""inotify, watchfiles and rescans measured through the real daemon and proxy (README.md here).

    .venv/bin/python experiments/watchers/measure.py [--entries 1000,10000] [--searches 100]
        [--rounds 3] [--changes 20] [--idle 30] [--work DIR] [--json]

Per size and watcher: search p50/p95 through the proxy (the watchers in turn, `--rounds` times),
the time from an outside write of a KB file to the first search that finds it, and the daemon's
CPU seconds while idle. Homes and the embedding cache live in --work (default
/tmp/memory-agent-watchers), so a rerun embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

from daemon_home import Text, bench_env, cpu_s, pct, reset_home  # noqa: E402

from memory_agent.client import DaemonClient  # noqa: E402
from memory_agent.serve.session import ProxySession  # noqa: E402

WATCHERS = ("inotify", "watchfiles", "rescan")


def session(home: Path, env: dict[str, str], watcher: str) -> tuple[ProxySession, int]:
    """A proxy whose daemon was started with `watcher`, the model loaded and the index in line."""
    client = DaemonClient(home, timeout=7200)
    client.stop(wait=True)
    s = ProxySession(home, env={**env, "MEMORY_AGENT_WATCHER": watcher})
    s.initialize()
    client.admin("refresh")
    while "degraded" in (s.call("memory_search", query="warm up")["structuredContent"] or {}):
        time.sleep(0.05)
    return s, client.health()["pid"]


def searches(s: ProxySession, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        reply = s.call("memory_search", query=q, limit=8)
        out.append((time.perf_counter() - t) * 1000)
        assert not reply.get("isError"), reply
    return out


def seen_after(s: ProxySession, home: Path, n: int) -> float:
    """Rewrite one KB file by hand with a new word; ms until a search finds it."""
    path = home / "kb" / "note" / f"bench-{n:06d}.md"
    word = f"zqxwatch{n}x{time.monotonic_ns() % 10**9}"
    text = path.read_text()
    t = time.perf_counter()
    path.write_text(text.rstrip("\n") + f" {word}\n")
    while True:
        hits = s.call("memory_search", query=word, limit=3)["structuredContent"]["hits"]
        if any(h["id"] == f"bench-{n:06d}" for h in hits):
            return (time.perf_counter() - t) * 1000
        if time.perf_counter() - t > 30:
            return float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", default="1000,10000")
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--idle", type=float, default=30.0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-watchers"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="the smallest real run (the test suite)")
    args = ap.parse_args()
    if args.tiny:
        import tempfile

        args.entries, args.searches, args.rounds, args.changes, args.idle = "30", 5, 1, 2, 1.0
        args.work = Path(tempfile.mkdtemp(prefix="watchers-"))
    text = Text()
    rows = []
    for size in [int(x) for x in args.entries.split(",")]:
        home = args.work / f"home-{size}"
        env = bench_env(home, args)
        DaemonClient(home).stop(wait=True)
        reset_home(home, size, text)
        queries = text.queries[: args.searches]
        times: dict[str, list[float]] = {w: [] for w in WATCHERS}
        for _ in range(args.rounds):
            for watcher in WATCHERS:
                s, _pid = session(home, env, watcher)
                try:
                    times[watcher] += searches(s, queries)
                finally:
                    s.close()
        for watcher in WATCHERS:
            s, pid = session(home, env, watcher)
            try:
                seen = [seen_after(s, home, n) for n in range(args.changes)]
                before = cpu_s(pid)
                time.sleep(args.idle)
                idle = cpu_s(pid) - before
            finally:
                s.close()
            row = {
                "entries": size,
                "watcher": watcher,
                "search_p50_ms": round(pct(times[watcher], 0.5), 2),
                "search_p95_ms": round(pct(times[watcher], 0.95), 2),
                "seen_p50_ms": round(statistics.median(seen), 1),
                "seen_max_ms": round(max(seen), 1),
                "idle_cpu_s": round(idle, 3),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        DaemonClient(home).stop(wait=True)
        reset_home(home, size, text)  # the hand edits go
    if args.json:
        print(json.dumps(rows))
        return
    print(
        "| entries | watcher | search p50 / p95 ms | outside change seen after, p50 / max ms "
        f"| daemon CPU idle {args.idle:.0f} s |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['entries']:,} | {r['watcher']} | {r['search_p50_ms']} / {r['search_p95_ms']} "
            f"| {r['seen_p50_ms']} / {r['seen_max_ms']} | {r['idle_cpu_s']} s |"
        )


if __name__ == "__main__":
    main()
