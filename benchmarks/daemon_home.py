"""The homes the daemon benchmarks measure (`benchmarks/daemon.py`, and its `--clients` mode in
`benchmarks/daemon_clients.py`): entries of a realistic size made from real text, each size's
home written once and reset between runs, the environment a benchmarked daemon runs with, and
the process readings (RSS, CPU seconds, open files) and percentiles both report.

Linux only: the readings come from /proc (these are benchmarks of this machine, not product code).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from memory_agent import config
from memory_agent.index.memory import Memory

ROOT = Path(__file__).resolve().parents[1]
# The benchmarks' texts: ../shared/bench beside the checkout, or MEMORY_AGENT_BENCH_DATA (a copy of
# the code elsewhere - a `git archive` in /tmp - finds them there, not word salad).
BENCH = Path(os.environ.get("MEMORY_AGENT_BENCH_DATA") or ROOT.parent / "shared" / "bench")
HOME_SEED = 2026  # every size's entries from one seeded stream: 100k's are 1M's first 100k,
# so one embedding cache serves every size (1M entries take hours to embed on 2 cores)
WORDS = (Path(__file__).parent / "core.py").read_text().split('"""')[3].split()  # core's VOCAB


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


class Text:
    """Sentences and queries: real text from ../shared/bench, else seeded word salad."""

    def __init__(self, seed: int = 7):
        self.rng = random.Random(seed)
        self.sentences: list[str] = []
        self.queries: list[str] = []
        for name in ("scifact", "locomo"):
            corpus = BENCH / name / "corpus.jsonl"
            if not corpus.is_file():
                continue
            for line in corpus.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                for s in (row.get("text") or "").replace("\n", " ").split(". "):
                    s = " ".join(s.split())
                    if 40 <= len(s) <= 300:
                        self.sentences.append(s.rstrip(".") + ".")
            for line in (BENCH / name / "queries.jsonl").read_text(encoding="utf-8").splitlines():
                self.queries.append(json.loads(line)["query"])
        self.real = bool(self.sentences)
        if not self.real:
            print(
                f"no SciFact/LoCoMo texts under {BENCH}: the entries and queries are word salad "
                "(set MEMORY_AGENT_BENCH_DATA to the shared bench folder for real text)",
                file=sys.stderr,
            )
            self.sentences = [
                " ".join(self.rng.choice(WORDS) for _ in range(12)).capitalize() + "."
                for _ in range(20000)
            ]
            self.queries = [
                " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(2, 7)))
                for _ in range(1000)
            ]

    def entry(self, n: int) -> tuple[str, str]:
        title = _clean(self.rng.choice(self.sentences)[:150].rstrip("."))
        body = _clean(" ".join(self.rng.sample(self.sentences, self.rng.randint(2, 5))))
        return f"{title} ({n})", body


def _clean(text: str) -> str:
    """Without control characters (the corpora hold a few; YAML refuses them in a title)."""
    return "".join(c for c in text if c.isprintable() or c == " ")


def make_kb(home: Path, entries: int, text: Text) -> None:
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    folder = home / "kb" / "note"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(entries):
        title, body = text.entry(n)
        title = title.replace("'", "''")
        (folder / f"bench-{n:06d}.md").write_text(
            f"---\nid: bench-{n:06d}\ntitle: '{title}'\ntype: note\nstatus: active\n"
            f"created: 2026-11-01T00:00:00Z\n---\n{body}\n"
        )
    git = ["git", "-C", str(home / "kb")]
    subprocess.run([*git, "add", "note"], check=True)
    subprocess.run(
        [*git, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "bench entries"],
        check=True,
    )
    subprocess.run([*git, "tag", "bench-base"], check=True)


def bench_env(home: Path, args: argparse.Namespace) -> dict[str, str]:
    env = dict(
        os.environ,
        MEMORY_AGENT_HOME=str(home),
        MEMORY_AGENT_EMBEDDER="minilm",
        MEMORY_AGENT_CACHE=str(args.work / "cache"),
        MEMORY_AGENT_IDLE_EXIT="0",
        MEMORY_AGENT_START_TIMEOUT="3600",
        MEMORY_AGENT_READ_PROCESSES=str(getattr(args, "read_processes", 0)),
    )
    inherited = ("CACHE", "START_TIMEOUT", "IDLE_EXIT", "READ_PROCESSES")
    # the daemon `DaemonClient.ensure` starts inherits these
    os.environ.update({f"MEMORY_AGENT_{k}": env[f"MEMORY_AGENT_{k}"] for k in inherited})
    return env


FANNED_BASE = "refs/bench/base-fanout"  # the base commit fanned out (`daemon.py --fanout`)


def reset_home(home: Path, size: int, text: Text, fanout: bool = False) -> None:
    """Write the KB of `size` entries once; on a rerun drop what earlier runs added (back to
    its fanned-out base with `fanout`, once there is one: `FANNED_BASE`)."""
    if not (home / "kb" / ".git").exists():
        print(f"[{size}] writing {size} entries", file=sys.stderr)
        text.rng.seed(HOME_SEED)  # one stream: a smaller home is a prefix of a larger one
        make_kb(home, size, text)
        return
    git = ["git", "-C", str(home / "kb")]
    fanned = subprocess.run([*git, "rev-parse", "-q", "--verify", FANNED_BASE], capture_output=True)
    if fanout and fanned.returncode == 0:
        base = fanned.stdout.decode().strip()
    else:
        base = subprocess.run(
            [*git, "log", "--format=%H", "--grep=^bench entries$"], capture_output=True, text=True
        ).stdout.split()[0]
    subprocess.run([*git, "reset", "-q", "--hard", base], check=True)
    subprocess.run([*git, "clean", "-qfdx"], check=True)
