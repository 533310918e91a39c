"""`benchmarks/daemon.py --clients N,...`: many agents at once on one daemon (issue 18).

N closed-loop clients, each a real `memory-agent proxy` subprocess with its own MCP session,
search back to back from a common start for `--duration` seconds (in `mixed`, one more proxy
adds entries the whole time); only successful replies are timed; per window the search
p50/p95, throughput, the daemon's and the proxies' CPU per call, the cores the whole machine
kept busy and the load average. The homes, the entries and the percentiles are
`benchmarks/daemon.py`'s (which runs this mode); this module is the concurrent half, kept apart
from the single-client measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from daemon_home import Text, bench_env, cpu_s, pct, reset_home

from memory_agent.client import DaemonClient
from memory_agent.serve.session import ProxySession

__all__ = ["machine_busy_s", "measure_clients", "report_clients", "searchers"]


def _client_loop(
    home: Path,
    env: dict[str, str],
    work: list[tuple[str, dict]],
    start: threading.Barrier,
    stop_at: list[float],
    out: dict[str, list[float]],
    failures: list[str],
) -> None:
    """One client: its own proxy process and MCP session; calls `work` in turn until the
    window closes. Only successful replies are timed."""
    s = ProxySession(home, env=env)
    try:
        s.initialize()
        s.call(work[0][0], **work[0][1]) if work[0][0] == "memory_search" else None
        start.wait()
        proxy_cpu = cpu_s(s.pid)
        i = 0
        while time.perf_counter() < stop_at[0]:
            name, arguments = work[i % len(work)]
            i += 1
            t = time.perf_counter()
            try:
                reply = s.call(name, **arguments)
            except Exception as exc:  # noqa: BLE001 - a failed call is counted, not timed
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            elapsed = (time.perf_counter() - t) * 1000
            ok = not reply.get("isError") and (
                name != "memory_add"
                or (reply.get("structuredContent") or {}).get("status") in ("created", "duplicate")
            )
            if ok and t + elapsed / 1000 <= stop_at[0] + 5:
                out[name].append(elapsed)
            elif not ok:
                failures.append(f"{name}: {str(reply.get('structuredContent'))[:200]}")
        out["proxy_cpu_s"].append(cpu_s(s.pid) - proxy_cpu)
    finally:
        s.close()


def searchers(
    targets: list[tuple[Path, dict[str, str]]],
    clients: int,
    queries: list[str],
    start: threading.Barrier,
    stop_at: list[float],
    out: dict[str, list[float]],
    failures: list[str],
) -> list[threading.Thread]:
    """`clients` closed-loop searchers (not started), client c on daemon `targets[c % n]`
    (its home and environment), each with its own share of `queries`."""
    threads = []
    for c in range(clients):
        home, env = targets[c % len(targets)]
        mine = queries[c::clients] or queries
        work = [("memory_search", {"query": q, "limit": 8}) for q in mine]
        threads.append(
            threading.Thread(
                target=_client_loop, args=(home, env, work, start, stop_at, out, failures)
            )
        )
    return threads


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent not idle (every core, every process)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def concurrent_window(
    home: Path,
    env: dict[str, str],
    clients: int,
    writer: bool,
    duration: float,
    queries: list[str],
    text: Text,
    seed: int,
    daemon_pid: int | None = None,
    reader_pids: tuple[int, ...] = (),
) -> dict[str, float]:
    """One window: `clients` searchers (and one writer) closed-loop for `duration` seconds.
    With `daemon_pid`, also the daemon's CPU time per call answered in the window and the
    machine's load average at its start (the daemon serves nothing else meanwhile); with
    `reader_pids` (its reader processes, ADR 0028), the CPU of the daemon and its readers per
    call too (`serving_cpu_ms_per_call`: what a search costs, wherever it ran)."""
    out: dict[str, list[float]] = {"memory_search": [], "memory_add": [], "proxy_cpu_s": []}
    failures: list[str] = []
    start = threading.Barrier(clients + int(writer) + 1)
    stop_at = [float("inf")]
    threads = searchers([(home, env)], clients, queries, start, stop_at, out, failures)
    if writer:
        text.rng.seed(seed)
        adds = []
        for n in range(5000):
            title, body = text.entry(30_000_000 + seed * 10_000 + n)
            adds.append(("memory_add", {"title": title, "body": body, "force": True}))
        threads.append(
            threading.Thread(
                target=_client_loop, args=(home, env, adds, start, stop_at, out, failures)
            )
        )
    for th in threads:
        th.start()
    start.wait(timeout=600)
    began = time.perf_counter()
    stop_at[0] = began + duration
    load, cpu_before = os.getloadavg()[0], cpu_s(daemon_pid) if daemon_pid else 0.0
    readers_before = sum(cpu_s(pid) for pid in reader_pids)
    busy_before = machine_busy_s()
    for th in threads:
        th.join()
    wall = time.perf_counter() - began
    cpu = cpu_s(daemon_pid) - cpu_before if daemon_pid else float("nan")
    readers_cpu = sum(cpu_s(pid) for pid in reader_pids) - readers_before
    busy = machine_busy_s() - busy_before
    searches, adds_ms = out["memory_search"], out["memory_add"]
    row = {
        "search_p50_ms": pct(searches, 0.5) if searches else float("nan"),
        "search_p95_ms": pct(searches, 0.95) if searches else float("nan"),
        "searches_per_s": len(searches) / wall,
        "searches": float(len(searches)),
        "failures": float(len(failures)),
        "daemon_cpu_ms_per_call": cpu * 1000 / max(1, len(searches) + len(out["memory_add"])),
        "serving_cpu_ms_per_call": (cpu + readers_cpu)
        * 1000
        / max(1, len(searches) + len(out["memory_add"])),
        # every process of the machine (ours and anyone's): how many cores were busy, and
        # what the proxies themselves used per call
        "busy_cores": busy / wall,
        "proxies_cpu_ms_per_call": sum(out["proxy_cpu_s"])
        * 1000
        / max(1, len(searches) + len(out["memory_add"])),
        "load": load if daemon_pid else float("nan"),
    }
    if writer:
        row["adds"] = float(len(adds_ms))
        row["add_p50_ms"] = pct(adds_ms, 0.5) if adds_ms else float("nan")
        row["add_p95_ms"] = pct(adds_ms, 0.95) if adds_ms else float("nan")
    for f in failures[:3]:
        print(f"  failure: {f}", file=sys.stderr)
    return row


def wait_readers(client: DaemonClient, count: int, timeout: float = 300.0) -> tuple[int, ...]:
    """The pids of the daemon's `count` reader processes, once all of them serve."""
    deadline = time.monotonic() + timeout
    while count > 0:
        health = client.health() or {}
        serving = [r["pid"] for r in health.get("readers", []) if r.get("state") == "serving"]
        if len(serving) >= count:
            return tuple(serving)
        if time.monotonic() > deadline:
            raise SystemExit(f"the daemon's {count} reader(s) did not serve within {timeout:g} s")
        time.sleep(0.2)
    return ()


def measure_clients(size: int, args: argparse.Namespace, text: Text) -> list[dict[str, float]]:
    """Search p50 / p95 and throughput with 1..N concurrent proxies, idle and with a writer."""
    home = args.work / f"home-{size}"
    env = bench_env(home, args)
    client = DaemonClient(home, timeout=7200)
    client.stop(wait=True)
    reset_home(home, size, text)
    print(f"[{size}] index (cached embeddings make reruns cheap)", file=sys.stderr)
    client.ensure()
    client.admin("refresh")
    reader_pids = wait_readers(client, getattr(args, "read_processes", 0))
    queries = text.queries[: max(args.searches, 200)]
    rows = []
    for clients in (int(x) for x in args.clients.split(",")):
        for mode in args.modes.split(","):
            runs = []
            for run in range(args.runs):
                runs.append(
                    concurrent_window(
                        home,
                        env,
                        clients,
                        mode == "mixed",
                        args.duration,
                        queries,
                        text,
                        seed=size + 1000 * clients + 17 * run + (mode == "mixed"),
                        daemon_pid=client.pid(),
                        reader_pids=reader_pids,
                    )
                )
                print(
                    f"[{size}] {clients} client(s) {mode} run {run + 1}: {runs[-1]}",
                    file=sys.stderr,
                )
            row = {
                "entries": float(size),
                "clients": float(clients),
                "mixed": float(mode == "mixed"),
            }
            for key in runs[0]:
                values = sorted(r[key] for r in runs)
                row[key] = values[len(values) // 2]
            rows.append(row)
            if args.json:
                print(json.dumps({k: round(v, 2) for k, v in row.items()}), flush=True)
    client.stop(wait=True)
    return rows


def report_clients(rows: list[dict[str, float]], args: argparse.Namespace, real: bool) -> None:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        "?",
    )
    print(
        f"concurrent proxies, MiniLM, limit 8, {os.cpu_count()} cores ({cpu}), "
        f"{'SciFact/LoCoMo text and queries' if real else 'word-salad text'}, "
        f"{args.duration:g} s windows, median of {args.runs} runs, "
        f"{getattr(args, 'read_processes', 0)} reader process(es)"
    )
    print(
        "| entries | clients | mode | search p50 / p95 | p95 / 1-client p95 | searches/s "
        "| adds (p50 / p95) | daemon CPU per call (with its readers) | proxies' CPU per call "
        "| busy cores | load average |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    single = {
        int(r["entries"]): r["search_p95_ms"] for r in rows if r["clients"] == 1 and not r["mixed"]
    }
    for r in rows:
        base = single.get(int(r["entries"]))
        ratio = f"{r['search_p95_ms'] / base:.1f}x" if base else "-"
        adds = (
            f"{int(r['adds'])} ({r['add_p50_ms']:.0f} / {r['add_p95_ms']:.0f} ms)"
            if r["mixed"]
            else "-"
        )
        print(
            f"| {int(r['entries']):,} | {int(r['clients'])} | "
            f"{'search + 1 writer' if r['mixed'] else 'search'} "
            f"| {r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f} ms | {ratio} "
            f"| {r['searches_per_s']:.1f} | {adds} | {r['daemon_cpu_ms_per_call']:.1f} ms "
            f"({r['serving_cpu_ms_per_call']:.1f} ms) "
            f"| {r['proxies_cpu_ms_per_call']:.1f} ms | {r['busy_cores']:.2f} | {r['load']:.1f} |"
        )
