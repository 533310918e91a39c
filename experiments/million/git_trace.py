"""Which git commands a run made and what each took, from git's own trace.

    GIT_TRACE2_EVENT=/tmp/trace .venv/bin/python benchmarks/daemon.py --entries 100000 \
        --searches 5 --adds 30 --recall-queries 0 --no-rebuild --keep-index --work W --json
    .venv/bin/python experiments/million/git_trace.py /tmp/trace
    .venv/bin/python experiments/million/git_trace.py --tiny   # traces a few commands here (CI)

Every git process the daemon (or anything under that variable) runs writes its command name and
its exit with the elapsed time; this prints, per command, how many ran, the p50 and the total,
the largest total first. Only top-level git processes count; a command's children (`repack`'s
`pack-objects`) are inside its time. `GIT_TRACE2_EVENT` (JSON) names each process (`sid`), so
processes running at once are told apart; `GIT_TRACE2_PERF`'s lines are read too, but paired by
order - two git processes at once (the upkeep's `count-objects` beside an add) may swap there.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import tempfile
from pathlib import Path


def per_command(trace: Path) -> dict[str, list[float]]:
    times: dict[str, list[float]] = collections.defaultdict(list)
    names: dict[str, str] = {}  # (the event format) a process's sid -> its command
    name = None  # (the perf format) the command of the last top-level process seen
    for line in trace.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            sid = str(event.get("sid", ""))
            if "/" in sid:
                continue  # a child of a git command: inside its time
            if event.get("event") == "cmd_name":
                names[sid] = str(event.get("name"))
            elif event.get("event") == "exit" and sid in names:
                times[names.pop(sid)].append(float(event["t_abs"]) * 1000)
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) < 6 or cells[1] != "d0":
            continue
        if cells[3] == "cmd_name":
            name = cells[-1].split()[0]
        elif cells[3] == "exit" and name:
            times[name].append(float(cells[5]) * 1000)
            name = None
    return times


def tiny_trace(work: Path) -> Path:
    trace = work / "trace"
    env = {**os.environ, "GIT_TRACE2_EVENT": str(trace)}
    subprocess.run(["git", "init", "-q", str(work / "repo")], check=True, env=env)
    for args in (["status", "--porcelain"], ["count-objects", "-v"], ["status", "--porcelain"]):
        subprocess.run(["git", "-C", str(work / "repo"), *args], check=True, env=env, stdout=-3)
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, nargs="?")
    parser.add_argument("--tiny", action="store_true", help="trace three commands here")
    args = parser.parse_args()
    if args.tiny:
        args.trace = tiny_trace(Path(tempfile.mkdtemp(prefix="git-trace-")))
    elif args.trace is None:
        raise SystemExit("give a file GIT_TRACE2_EVENT (or _PERF) wrote, or --tiny")
    times = per_command(args.trace)
    print("| git command | runs | p50 | total |")
    print("|---|---|---|---|")
    for name, ms in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        ms.sort()
        print(f"| {name} | {len(ms)} | {ms[len(ms) // 2]:.1f} ms | {sum(ms) / 1000:.2f} s |")


if __name__ == "__main__":
    main()
