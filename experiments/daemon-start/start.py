"""How long a user waits for the daemon's first answer: from starting `memory-agent proxy` on a
home with a built index (no daemon running) to the first search's reply, lexical while the
model loads, and to the first full reply; repeated, medians.

    .venv/bin/python experiments/daemon-start/start.py --home DIR [--runs 5]
        [--compare CHECKOUT [--compare-home DIR]] [--tiny]

`--home` is a home whose index is built and whose read-model arrays are saved (the one
`benchmarks/daemon.py --entries 100000 --work W` leaves in W/home-100000; its embedding cache
is W/cache, pass it with `--cache` or MEMORY_AGENT_CACHE). Each run stops the daemon, starts a
proxy (which starts the daemon, as an agent's first call does), sends `initialize` and one
`memory_search`, then repeats a search until it is no longer degraded. The page cache is left
warm (as after the previous daemon's exit). Prints each run and the medians (and the daemon's CPU time up to its first answer: on a shared
machine it moves less with the neighbours than the wall time does), the load average
before and after, and the daemon log's lines of the last run with their time since the start.
`--compare CHECKOUT`: the runs alternate between that checkout of the code (another commit,
exported to a folder; its daemon started with it on PYTHONPATH) and this one, so both meet the
same neighbours on a shared machine; medians of each. `--compare-home`: a copy of the home for
that code (when the two would rewrite each other's saved read-model arrays). `--tiny`: a demo home in a temporary
folder, one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.serve.session import ProxySession

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ["what causes inflammation", "did she adopt a dog", "cell growth in tumours"]


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(home: Path, env: dict[str, str]) -> tuple[float, float, float, float, bool]:
    client = DaemonClient(home, timeout=600)
    client.stop(wait=True)
    wall0, t = time.time(), time.perf_counter()
    s = ProxySession(home, env=env)
    try:
        s.initialize()
        first = s.call("memory_search", query=QUERIES[0])
        lexical = time.perf_counter() - t
        cpu = cpu_seconds(int((home / "run" / "daemon.pid").read_text()))
        assert not first.get("isError"), first
        degraded = "degraded" in (first.get("structuredContent") or {})
        n = 1
        while True:
            reply = s.call("memory_search", query=QUERIES[n % len(QUERIES)])
            assert not reply.get("isError"), reply
            if "degraded" not in (reply.get("structuredContent") or {}):
                break
            n += 1
            time.sleep(0.05)
        full = time.perf_counter() - t
    finally:
        s.close()
    return wall0, lexical, cpu, full, degraded


def log_since(home: Path, wall0: float) -> list[str]:
    """The daemon log's lines written since `wall0`, each with its offset from it."""
    out = []
    log = home / "run" / "daemon.log"
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        if stamp >= wall0 - 0.01:
            out.append(f"  +{stamp - wall0:5.2f} s  {line[24:][:150]}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", type=Path, help="another checkout, run in turn with this")
    parser.add_argument("--compare-home", type=Path, help="the home --compare runs on")
    parser.add_argument("--tiny", action="store_true", help="a demo home, one run")
    args = parser.parse_args()
    env = dict(os.environ, MEMORY_AGENT_IDLE_EXIT="0", MEMORY_AGENT_START_TIMEOUT="600")
    if args.cache:
        env["MEMORY_AGENT_CACHE"] = str(args.cache)
    tmp = None
    if args.tiny:
        tmp = tempfile.TemporaryDirectory(prefix="daemon-start-")
        args.home, args.runs = Path(tmp.name) / "home", 1
        env.setdefault("MEMORY_AGENT_EMBEDDER", "minilm")
        os.environ.update({k: env[k] for k in ("MEMORY_AGENT_EMBEDDER",)})
        if "MEMORY_AGENT_CACHE" in env:
            os.environ["MEMORY_AGENT_CACHE"] = env["MEMORY_AGENT_CACHE"]
        memory = Memory(config.load({"home": str(args.home)}))
        memory.init(demo=True)
        memory.close()
    if args.home is None:
        parser.error("--home is required (or --tiny)")
    env["MEMORY_AGENT_HOME"] = str(args.home)
    codes = {"this": (str(ROOT), args.home)}
    if args.compare:
        other = (str(args.compare.resolve()), args.compare_home or args.home)
        codes = {f"compare ({args.compare})": other, **codes}
    load_before = os.getloadavg()
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in codes}
    try:
        for n in range(args.runs):
            for name, (path, home) in codes.items():
                env["PYTHONPATH"], env["MEMORY_AGENT_HOME"] = path, str(home)
                wall0, lexical, cpu, full, degraded = one_run(home, env)
                rows[name].append((lexical, full, cpu))
                print(
                    f"run {n + 1}, {name}: start -> first answer {lexical:.2f} s "
                    f"({'lexical' if degraded else 'full'}; daemon CPU {cpu:.2f} s), "
                    f"-> full answer {full:.2f} s",
                    flush=True,
                )
        lines = log_since(args.home, wall0)
    finally:
        for _, home in codes.values():
            DaemonClient(home, timeout=60).stop(wait=True)
        if tmp is not None:
            tmp.cleanup()
    load_after = os.getloadavg()
    for name, runs in rows.items():
        print(
            f"median of {len(runs)}, {name}: start -> first answer "
            f"{statistics.median(r[0] for r in runs):.2f} s (daemon CPU "
            f"{statistics.median(r[2] for r in runs):.2f} s), -> full answer "
            f"{statistics.median(r[1] for r in runs):.2f} s"
        )
    print(
        "load average (1/5/15 min) before "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after "
        + " ".join(f"{x:.2f}" for x in load_after)
    )
    print("the daemon log of the last run, this code (time since the proxy was started):")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
