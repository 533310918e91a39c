"""Page times of the memory browser (`memory-agent ui`) at realistic sizes.

    .venv/bin/python benchmarks/ui.py [--entries 10000] [--rounds 30] [--work DIR] [--json]
    .venv/bin/python benchmarks/ui.py --home DIR   # an existing home, e.g. a captured one

Uses the homes `benchmarks/daemon.py` builds in --work (the same entries, the same embedding
cache; a missing home is built and indexed first). Starts the real `memory-agent ui` subprocess,
which reads through the real daemon, and requests every page over one keep-alive connection
with the session cookie: overview, search (a different benchmark query each round, default
filters), the entry list (first page and a deep page), an entry (its history, git log with
diffs, recall chart), episodes and the inbox. Prints p50 / p95 wall time per page as the
client sees it (server time plus a loopback round trip, well under a millisecond).
The issue's target: <= 150 ms per page at 10,000 entries on 2 cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from daemon_home import Text, make_kb, pct  # noqa: E402

from memory_agent.client import DaemonClient  # noqa: E402


def home_for(size: int, work: Path, env: dict[str, str]) -> Path:
    home = work / f"home-{size}"
    if not (home / "kb" / ".git").exists():
        print(f"[{size}] writing {size} entries", file=sys.stderr)
        text = Text()
        text.rng.seed(size)
        make_kb(home, size, text)
    os.environ.update(env)
    client = DaemonClient(home, timeout=7200)
    client.stop(wait=True)  # a daemon of this checkout's code
    print(f"[{size}] indexing (cached embeddings make reruns cheap)", file=sys.stderr)
    client.ensure()
    client.admin("refresh")
    return home


def measure(size: int, args: argparse.Namespace) -> dict[str, object]:
    env = {
        "MEMORY_AGENT_EMBEDDER": "minilm",
        "MEMORY_AGENT_CACHE": str(args.work / "cache"),
        "MEMORY_AGENT_IDLE_EXIT": "0",
        "MEMORY_AGENT_START_TIMEOUT": "3600",
    }
    home = args.home if args.home else home_for(size, args.work, env)
    ui = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "ui", "--home", str(home), "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env, "MEMORY_AGENT_HOME": str(home)},
    )
    try:
        url = urllib.parse.urlsplit(json.loads(ui.stdout.readline())["url"])
        token = urllib.parse.parse_qs(url.query)["token"][0]
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        headers = {"Cookie": f"memory_agent_ui={token}", "Host": url.netloc}
        queries = Text().queries
        entry = "bench-000123" if size > 123 and not args.home else None

        def get(path: str) -> float:
            t = time.perf_counter()
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            elapsed = (time.perf_counter() - t) * 1000
            if response.status != 200:
                raise SystemExit(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
            return elapsed

        deep = max(1, size // 50 // 2)
        pages = {
            "overview": lambda i: "/",
            "search": lambda i: "/search?" + urllib.parse.urlencode({"q": queries[i]}),
            "entries": lambda i: "/entries",
            f"entries p.{deep}": lambda i: f"/entries?page={deep}",
            "entry": lambda i: f"/entry?id={entry}" if entry else "/entries",
            "episodes": lambda i: "/episodes",
            "inbox": lambda i: "/inbox",
        }
        for make in pages.values():  # warm: the model, the caches
            get(make(0))
        times: dict[str, list[float]] = {name: [] for name in pages}
        for i in range(1, args.rounds + 1):
            for name, make in pages.items():
                times[name].append(get(make(i)))
        return {
            "entries": size,
            "pages": {n: (pct(v, 0.5), pct(v, 0.95)) for n, v in times.items()},
        }
    finally:
        ui.terminate()
        ui.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", default="10000", help="sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=30, help="requests per page")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-bench"))
    parser.add_argument(
        "--home",
        type=Path,
        help="time the pages of this existing home instead (e.g. the one "
        "`benchmarks/capture.py --work DIR` leaves, with its captured sessions)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = ["0"] if args.home else args.entries.split(",")
    rows = [measure(int(s), args) for s in sizes]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"memory-agent ui, {args.rounds} requests per page, p50 / p95 ms (target <= 150)")
    for row in rows:
        print(f"home {args.home}" if args.home else f"{row['entries']:,} entries")
        for name, (p50, p95) in row["pages"].items():
            print(f"  {name:<14} {p50:7.1f} / {p95:7.1f}")


if __name__ == "__main__":
    main()
