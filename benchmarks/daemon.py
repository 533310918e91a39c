"""Benchmark of the daemon and the proxy, on a 1k-entry KB with MiniLM.

    .venv/bin/python benchmarks/daemon.py [--entries 1000] [--searches 100] [--adds 30] [--json]

Prints:
- proxy RSS (MB) after a session's worth of calls;
- daemon RSS idle (started, index open, no model) and with the model loaded;
- proxy cold start (no daemon running) to the first tool result, and to the first full
  (non-degraded) search; warm start (daemon up, model loaded) to the first result;
- search and add round trips through the proxy, p50 / p95 (ms).

The KB is synthetic (seeded word salad, distinct enough that dedup refuses none of it),
written as files and committed once, as a `git pull` would bring it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.memory import Memory
from memory_agent.session import ProxySession

WORDS = (Path(__file__).parent / "core.py").read_text().split('"""')[3].split()  # core's VOCAB


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def entry_text(rng: random.Random, n: int) -> tuple[str, str]:
    words = [rng.choice(WORDS) for _ in range(60)]
    return f"Note {n}: {' '.join(words[:6])}", " ".join(words[6:]) + f" (case {n})."


def make_kb(home: Path, entries: int) -> None:
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    rng = random.Random(7)
    folder = home / "kb" / "note"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(entries):
        title, body = entry_text(rng, n)
        (folder / f"bench-{n:05d}.md").write_text(
            f"---\nid: bench-{n:05d}\ntitle: '{title}'\ntype: note\nstatus: active\n"
            f"created: 2026-11-01T00:00:00Z\n---\n{body}\n"
        )
    subprocess.run(["git", "-C", str(home / "kb"), "add", "note"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(home / "kb"),
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "bench entries",
        ],
        check=True,
    )


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--adds", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, float] = {}
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = dict(os.environ, MEMORY_AGENT_HOME=str(home), MEMORY_AGENT_EMBEDDER="minilm")
        make_kb(home, args.entries)
        client = DaemonClient(home)
        # Index once (model load + embedding of the KB), then restart for clean numbers.
        client.ensure()
        client.admin("sync")
        client.stop(wait=True)

        client.ensure()  # a fresh daemon that has answered nothing but /health
        daemon_pid = client.health()["pid"]
        time.sleep(1.0)
        out["daemon_rss_idle_mb"] = rss_mb(daemon_pid)
        client.stop(wait=True)

        t = time.perf_counter()
        s = ProxySession(home, env=env)
        s.initialize()
        first = s.call("memory_search", query="daemon socket timeout")
        out["cold_start_first_result_ms"] = (time.perf_counter() - t) * 1000
        out["cold_first_result_degraded"] = float("degraded" in first["structuredContent"])
        daemon_pid = client.health()["pid"]
        while "degraded" in s.call("memory_search", query="warm up")["structuredContent"]:
            time.sleep(0.05)
        out["cold_start_full_search_ms"] = (time.perf_counter() - t) * 1000
        s.close()

        t = time.perf_counter()
        s = ProxySession(home, env=env)
        s.initialize()
        s.call("memory_search", query="release process")
        out["warm_start_first_result_ms"] = (time.perf_counter() - t) * 1000
        searches = []
        for _ in range(args.searches):
            q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7)))
            t = time.perf_counter()
            s.call("memory_search", query=q, limit=8)
            searches.append((time.perf_counter() - t) * 1000)
        adds = []
        for n in range(args.adds):
            title, body = entry_text(rng, 100_000 + n)
            t = time.perf_counter()
            reply = s.call("memory_add", title=title, body=body)["structuredContent"]
            adds.append((time.perf_counter() - t) * 1000)
            assert reply["status"] == "created", reply
        out["proxy_rss_mb"] = rss_mb(s.pid)
        out["daemon_rss_model_mb"] = rss_mb(daemon_pid)
        out["search_p50_ms"], out["search_p95_ms"] = pct(searches, 0.5), pct(searches, 0.95)
        out["add_p50_ms"], out["add_p95_ms"] = pct(adds, 0.5), pct(adds, 0.95)
        s.close()
        client.stop(wait=True)
    if args.json:
        print(json.dumps({k: round(v, 1) for k, v in out.items()}))
        return
    print(f"daemon + proxy, {args.entries}-entry KB, MiniLM, {sys.platform}")
    print(f"  proxy RSS                      {out['proxy_rss_mb']:7.1f} MB")
    print(f"  daemon RSS idle (no model)     {out['daemon_rss_idle_mb']:7.1f} MB")
    print(f"  daemon RSS with the model      {out['daemon_rss_model_mb']:7.1f} MB")
    print(
        f"  cold start -> first result     {out['cold_start_first_result_ms']:7.0f} ms"
        f"{' (degraded: lexical only)' if out['cold_first_result_degraded'] else ''}"
    )
    print(f"  cold start -> full search      {out['cold_start_full_search_ms']:7.0f} ms")
    print(f"  warm start -> first result     {out['warm_start_first_result_ms']:7.0f} ms")
    print(
        f"  search round trip p50 / p95    {out['search_p50_ms']:7.1f} / {out['search_p95_ms']:.1f} ms"
    )
    print(f"  add round trip p50 / p95       {out['add_p50_ms']:7.1f} / {out['add_p95_ms']:.1f} ms")


if __name__ == "__main__":
    main()
