"""Sync benchmark (issue 21, ADR 0016): two homes, a bare repository, real daemons, the CLI.

    .venv/bin/python benchmarks/sync.py [--entries 10000] [--changes 10] [--reps 7]
        [--interval 10] [--interval-reps 5] [--skip-default] [--default-reps 1]
        [--seed 0] [--first-only] [--write-during] [--work DIR] [--json] [--tiny]

Machine A's KB gets `--entries` entries written as files and committed in one commit (the
entries of `benchmarks/daemon.py`: a title sentence and 2-5 body sentences of SciFact and
LoCoMo, seeded), pushed with plain git to a bare repository. Then, through the real CLI
(`python -m memory_agent ... --json`, a fresh process each) and the daemons it starts:

1. First sync into a fresh home B (only what `init` wrote; the default `sync_interval`): from
   `memory-agent remote set URL` + `memory-agent sync` to the first `memory-agent search` that
   finds a given entry (the last one, by its title). Split: `remote set` (it starts B's
   daemon), then until the entry's file is in B's KB (fetch and the move; watched from this
   process every 20 ms), then until the search finds it (the index of every entry: the
   embeddings dominate; searches answer `not_ready` until that first index is built, and
   `memory-agent sync` waits for it - up to the CLI's 600 s). The embedding cache
   (`MEMORY_AGENT_CACHE`, default `<work>/cache`) is kept across runs: the vectors it gained
   during the first sync say whether it was warm. `--write-during`: while B's `sync` runs, an
   add on B (a CLI call), issued when B's `remote` status first shows the round's
   pre-embedding `progress` (or 5 s after the sync started, on code without it), timed -
   whether a write waits for the first sync's embedding.
2. Incremental sync of `--changes` adds: per repetition, the adds on A (one `memory-agent
   proxy` session, untimed), `memory-agent sync` on A (the push, untimed), then
   `memory-agent sync` on B timed (its report must say it pulled them), a search on B that
   must find the last one, and a `memory-agent sync` on B with nothing to pull (the floor: a
   CLI process, a fetch). Both daemons with `sync_interval = 0`, so no round of their own
   interferes. p50 / p95 over `--reps`.
3. Write on A -> searchable on B through the daemons' own rounds: an add on A (a proxy), then
   B's proxy searches every 0.2 s until it finds the entry. A pushes 5 s after a write
   (`AFTER_WRITE_S`); B pulls at its next round, so the expected latency is about
   interval / 2 + 5 s + a round. With `--interval` seconds (the mechanism, `--interval-reps`
   times; each write after a seeded random wait in [0, interval) so it lands at a random
   point of B's cycle; `--seed` draws other waits), and `--default-reps` times (1) with the
   default 300 s unless `--skip-default`.

`--tiny`: 50 entries, 2 changes, 2 repetitions, a 3 s interval, no default-interval run -
the smallest real run (seconds, plus the two model loads). Work folder: `--work` (default
/tmp/memory-agent-syncbench), emptied at the start except the embedding cache.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from daemon_home import Text, make_kb, pct  # noqa: E402 - the entries of the daemon benchmarks
from sync_machine import Machine, add, cached_vectors, search_hits  # noqa: E402

ENTRY_WAIT_S = 3600.0  # the longest a phase waits for an entry to be found


def write_during(b: Machine, started: float, syncing: threading.Thread) -> dict:
    """An add on B while its first sync runs: when status shows the pre-embedding's progress
    (or 5 s after the sync started). Its seconds, and whether the sync was still running."""
    progress = None
    while syncing.is_alive() and time.perf_counter() - started < 5.0:
        _, status = b.cli("remote")
        progress = status.get("progress")
        if progress:
            break
        time.sleep(0.2)
    if not syncing.is_alive():
        return {"write_during_s": None, "write_progress": None, "write_while_syncing": False}
    t = time.perf_counter()
    b.cli(
        "add",
        "--title",
        "Written during the first sync",
        "--body",
        "This entry was written on the desktop while its first sync ran.",
    )
    return {
        "write_during_s": time.perf_counter() - t,
        "write_progress": progress,
        "write_while_syncing": syncing.is_alive(),
    }


def first_sync(
    a: Machine, b: Machine, remote: Path, entries: int, text: Text, during: bool = False
) -> dict:
    """Phase 1: a fresh home B takes a remote of `entries` entries until it is searchable."""
    target = f"bench-{entries - 1:06d}"
    target_file = b.home / "kb" / "note" / f"{target}.md"
    title = (a.home / "kb" / "note" / f"{target}.md").read_text().split("title: '")[1]
    query = title.split("'\n")[0].replace("''", "'")
    vectors_before = cached_vectors(b.cache)
    landed: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if target_file.is_file():
                landed.append(time.perf_counter())
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    t0 = time.perf_counter()
    watcher.start()
    set_s, _ = b.cli("remote", "set", str(remote))
    result: dict = {}

    def sync() -> None:
        try:
            result["sync_s"], result["report"] = b.cli("sync")
        except RuntimeError as exc:  # e.g. the CLI's wait for the daemon ran out: go on
            result["error"] = str(exc)[-300:]
        result["end"] = time.perf_counter()

    syncing = threading.Thread(target=sync)
    started = time.perf_counter()
    syncing.start()
    wrote = write_during(b, started, syncing) if during else {}
    syncing.join()
    sync_s = result.get("sync_s", result["end"] - started)
    report, sync_error = result.get("report", {}), result.get("error")
    tries = 0
    while True:
        tries += 1
        if b.finds(target, query):
            break
        if time.perf_counter() - t0 > ENTRY_WAIT_S:
            raise RuntimeError(f"B never found {target}")
        time.sleep(0.5)
    found = time.perf_counter()
    done.set()
    watcher.join()
    moved = landed[0] if landed else found
    return {
        "entries": entries,
        "remote_set_s": set_s,
        "sync_cli_s": sync_s,
        "sync_error": sync_error,
        "to_files_s": moved - t0,
        "model_load_s": b.model_load_s(),
        "files_to_searchable_s": found - moved,
        "to_searchable_s": found - t0,
        "searches_until_found": tries,
        "pulled": report.get("pulled"),
        "joined": report.get("joined"),
        "vectors_computed": cached_vectors(b.cache) - vectors_before,
        **wrote,
    }


def incremental(a: Machine, b: Machine, remote: Path, changes: int, reps: int, text: Text) -> dict:
    """Phase 2: `changes` adds on A, pushed; `memory-agent sync` on B timed."""
    for m in (a, b):
        m.stop()
        m.interval = 0
    a.cli("remote", "set", str(remote))
    a.cli("sync")
    b.cli("sync")
    writer = a.session()
    syncs, idle, pulled, found = [], [], [], []
    try:
        text.rng.seed(2101)
        for rep in range(reps):
            last = ("", "")
            for n in range(changes):
                title, body = text.entry(40_000_000 + rep * 1000 + n)
                last = (add(writer, title, body), title)
            _, pushed = a.cli("sync")
            assert pushed["pushed"] == changes, pushed
            seconds, report = b.cli("sync")
            syncs.append(seconds)
            pulled.append(report["pulled"])
            found.append(b.finds(*last))
            idle.append(b.cli("sync")[0])
            print(
                f"[incremental] rep {rep + 1}: sync {seconds:.2f} s, pulled "
                f"{report['pulled']}, found {found[-1]}, no-op {idle[-1]:.2f} s",
                file=sys.stderr,
            )
    finally:
        writer.close()
    return {
        "changes": changes,
        "reps": reps,
        "sync_p50_s": pct(syncs, 0.5),
        "sync_p95_s": pct(syncs, 0.95),
        "noop_p50_s": pct(idle, 0.5),
        "pulled_all": all(p == changes for p in pulled),
        "found_all": all(found),
        "syncs_s": [round(s, 3) for s in syncs],
    }


def write_to_searchable(
    a: Machine, b: Machine, interval: float | None, reps: int, text: Text, seed: int
) -> dict:
    """Phase 3: an add on A until B's search finds it, through the daemons' own rounds."""
    for m in (a, b):
        m.stop()
        m.interval = interval
    every = 300.0 if interval is None else interval
    writer, reader = a.session(), b.session()
    rng = random.Random(seed)
    latencies, since_round = [], []
    try:
        search_hits(reader, "warm up")  # B's model loaded, its first round (2 s) done
        time.sleep(3.0)
        text.rng.seed(seed)
        for rep in range(reps):
            time.sleep(rng.uniform(0, every))
            record = json.loads((b.home / "run" / "remote.json").read_text())
            title, body = text.entry(50_000_000 + seed * 1000 + rep)
            entry = add(writer, title, body)
            t = time.perf_counter()
            fixed_clock = "MEMORY_AGENT_CLOCK" in os.environ  # last_sync is then not a time
            since_round.append(float("nan") if fixed_clock else time.time() - record["last_sync"])
            while entry not in search_hits(reader, title):
                if time.perf_counter() - t > ENTRY_WAIT_S:
                    raise RuntimeError(f"B never found {entry}")
                time.sleep(0.2)
            latencies.append(time.perf_counter() - t)
            print(
                f"[write->searchable, interval {every:g} s] rep {rep + 1}: "
                f"{latencies[-1]:.1f} s (B's last round {since_round[-1]:.0f} s before "
                "the write)",
                file=sys.stderr,
            )
    finally:
        writer.close()
        reader.close()
    return {
        "interval_s": every,
        "default": interval is None,
        "reps": reps,
        "p50_s": pct(latencies, 0.5),
        "max_s": max(latencies),
        "min_s": min(latencies),
        "latencies_s": [round(x, 2) for x in latencies],
        "since_b_round_s": [round(x, 1) for x in since_round],
    }


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--interval-reps", type=int, default=5)
    parser.add_argument(
        "--skip-default",
        action="store_true",
        help="no write -> searchable run with the default 300 s interval",
    )
    parser.add_argument(
        "--default-reps",
        type=int,
        default=1,
        help="writes with the default interval (each up to ~5 min)",
    )
    parser.add_argument("--seed", type=int, default=0, help="another draw of the write times")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-syncbench"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--first-only", action="store_true", help="only the first sync")
    parser.add_argument("--tiny", action="store_true", help="50 entries, 2 reps, seconds")
    parser.add_argument(
        "--write-during", action="store_true", help="time an add on B while its first sync runs"
    )
    args = parser.parse_args()
    if args.tiny:
        args.entries, args.changes, args.reps = 50, 2, 2
        args.interval, args.interval_reps, args.skip_default = 3.0, 2, True
    cache = Path(os.environ.get("MEMORY_AGENT_CACHE") or args.work / "cache")
    args.work.mkdir(parents=True, exist_ok=True)
    for name in ("laptop", "desktop", "remote.git", "cwd"):
        if (args.work / name).exists():
            DaemonClient(args.work / name).stop(wait=True, timeout=120)
            shutil.rmtree(args.work / name)
    cwd = args.work / "cwd"  # outside any repository: entries are global, not a project's
    cwd.mkdir()
    a = Machine("laptop", args.work / "laptop", cache, cwd)
    b = Machine("desktop", args.work / "desktop", cache, cwd)
    remote = args.work / "remote.git"
    text = Text()
    rows: list[dict] = []
    try:
        print(f"[setup] {args.entries} entries in one commit, pushed", file=sys.stderr)
        text.rng.seed(args.entries)
        make_kb(a.home, args.entries, text)
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        branch = subprocess.run(
            ["git", "-C", str(a.home / "kb"), "branch", "--show-current"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        subprocess.run(
            [
                "git",
                "-C",
                str(a.home / "kb"),
                "push",
                "-q",
                str(remote),
                f"{branch}:refs/heads/{branch}",
            ],
            check=True,
        )
        Memory(config.load({"home": str(b.home)})).init(embedder="minilm", sync=False)
        phases = [
            ("first sync", lambda: first_sync(a, b, remote, args.entries, text, args.write_during)),
            ("incremental", lambda: incremental(a, b, remote, args.changes, args.reps, text)),
            (
                "write->searchable",
                lambda: write_to_searchable(
                    a, b, args.interval, args.interval_reps, text, 1 + 10 * args.seed
                ),
            ),
        ]
        if args.first_only:
            phases = phases[:1]
        elif not args.skip_default:
            phases.append(
                (
                    "write->searchable",
                    lambda: write_to_searchable(
                        a, b, None, args.default_reps, text, 2 + 10 * args.seed
                    ),
                )
            )
        for name, phase in phases:
            before = load()
            print(f"[{name}] load average {before}", file=sys.stderr)
            row = {"phase": name, "load_before": before, **phase(), "load_after": load()}
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    finally:
        a.stop()
        b.stop()
    if not args.json:
        report(rows, text.real, cache)


def report(rows: list[dict], real: bool, cache: Path) -> None:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        "?",
    )
    print(
        f"sync through a bare repository on disk, MiniLM, {os.cpu_count()} cores ({cpu}), "
        f"{'SciFact/LoCoMo text' if real else 'word-salad text'}, cache {cache}"
    )
    for r in rows:
        load_s = f"load {r['load_before']} -> {r['load_after']}"
        if r["phase"] == "first sync":
            warm = "cold" if r["vectors_computed"] >= r["entries"] // 2 else "warm"
            print(
                f"first sync of {r['entries']:,} entries into a fresh home: searchable after "
                f"{r['to_searchable_s']:.1f} s = remote set, fetch and move until the files "
                f"are in place {r['to_files_s']:.1f} s (`remote set` {r['remote_set_s']:.1f} s: "
                f"it starts the daemon) + index until searchable "
                f"{r['files_to_searchable_s']:.1f} s (B's model load, {r['model_load_s']} s, "
                f"runs meanwhile); `sync` itself "
                f"{r['sync_cli_s']:.1f} s; cache {warm} ({r['vectors_computed']:,} vectors "
                f"computed); {load_s}"
            )
            if r["sync_error"]:
                print(f"  `memory-agent sync` failed: {r['sync_error']}")
            if "write_during_s" in r:
                print(
                    f"  an add on B during the sync: {r['write_during_s']} s (issued at "
                    f"progress {r['write_progress']}; the sync still running when it "
                    f"returned: {r['write_while_syncing']})"
                )
        elif r["phase"] == "incremental":
            print(
                f"incremental sync of {r['changes']} adds (`memory-agent sync` on the other "
                f"machine, {r['reps']} reps): p50 {r['sync_p50_s']:.2f} s, p95 "
                f"{r['sync_p95_s']:.2f} s; with nothing to pull p50 {r['noop_p50_s']:.2f} s; "
                f"pulled all {r['pulled_all']}, found all {r['found_all']}; {load_s}"
            )
        else:
            which = "default" if r["default"] else "short"
            print(
                f"write -> searchable on the other machine, sync_interval {r['interval_s']:g} s "
                f"({which}, {r['reps']} reps): p50 {r['p50_s']:.1f} s, min {r['min_s']:.1f} s, "
                f"max {r['max_s']:.1f} s {r['latencies_s']}; B's last round before each write "
                f"{r['since_b_round_s']} s; {load_s}"
            )


if __name__ == "__main__":
    main()
