"""The `openai` embedder's cost: add and search through the proxy and the daemon, embedding
through an OpenAI-compatible server, against MiniLM in the daemon's own process.

    .venv/bin/python benchmarks/endpoint.py [--entries 1000] [--searches 200] [--adds 30]
        [--rounds 2] [--port 18734] [--work DIR] [--json]

The server is `benchmarks/embedding_server.py` in a process of its own, embedding with the
same MiniLM (ONNX Runtime) - so the two homes get the same vectors and what differs is the
way they travel: HTTP to another process and JSON, against a call in the daemon's process.
Both homes hold the same `--entries` entries (real SciFact and LoCoMo sentences, as
`benchmarks/daemon.py` writes them); every call goes through a real `memory-agent proxy`
process and its daemon, with the default filters and limit 8. Per embedder it prints:
- embed p50: the embedder alone on the same queries in this process (MiniLM in process, or
  one HTTP request to the server) - the floor of a search;
- search p50 / p95 and add p50 / p95 through the proxy (`--searches`, `--adds`);
- the first index of the home (every entry embedded in the first run of a size; later runs
  find them in the daemon's embedding cache).
The server has no cache of its own: every query and every new entry is embedded by it.
`--rounds` alternates the two embedders that many times (the machine's load moves both).
The server listens on `--port` (fixed: the model id names it, so a rerun finds its vectors
in the daemon's embedding cache).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from daemon_home import Text, bench_env, pct, reset_home

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.serve.session import ProxySession

HERE = Path(__file__).resolve().parent


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "embedding_server.py"), "--port", str(args.port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the embedding server did not start (port {args.port} taken?)")
    return proc, json.loads(line)["url"]


def embed_p50(name: str, url: str, queries: list[str], work: Path) -> float:
    from ragcore import make_embedder

    options = {"url": url, "model": "all-minilm"} if name == "openai" else None
    model = make_embedder(name, work_dir=work / "cache", options=options)
    model.load()  # type: ignore[attr-defined]
    model.embed_query("warm up")
    times = []
    for q in queries:
        t = time.perf_counter()
        model.embed_query(q)
        times.append((time.perf_counter() - t) * 1000)
    return pct(times, 0.5)


def measure(name: str, url: str, args: argparse.Namespace, text: Text) -> dict:
    home = args.work / f"home-{name}-{args.entries}"
    reset_home(home, args.entries, text)
    if name == "openai":
        for key, value in (("embedder", "openai"), ("embedding_url", url)):
            config.write_setting(home, key, value)
        config.write_setting(home, "embedding_model", "all-minilm")
    env = bench_env(home, args)
    env["MEMORY_AGENT_EMBEDDER"] = name
    os.environ["MEMORY_AGENT_EMBEDDER"] = name  # the daemon started below reads it
    client = DaemonClient(home, timeout=7200)
    client.stop(wait=True)
    t = time.perf_counter()
    client.ensure()
    client.admin("refresh")
    out: dict = {"embedder": name, "first_index_s": time.perf_counter() - t}
    queries = text.queries[: args.searches]
    s = ProxySession(home, env=env)
    try:
        s.initialize()
        for q in queries[:5]:  # warm up (the model, the caches)
            s.call("memory_search", query=q)
        searches = []
        for q in queries:
            t = time.perf_counter()
            reply = s.call("memory_search", query=q, limit=8)
            searches.append((time.perf_counter() - t) * 1000)
            assert not reply.get("isError") and "degraded" not in reply["structuredContent"]
        adds = []
        text.rng.seed(args.entries + 1)
        for n in range(args.adds):
            title, body = text.entry(10_000_000 + n)
            t = time.perf_counter()
            reply = s.call("memory_add", title=title, body=body)
            adds.append((time.perf_counter() - t) * 1000)
            assert reply["structuredContent"]["status"] in ("created", "duplicate"), reply
    finally:
        s.close()
    client.stop(wait=True)
    out["search_p50_ms"], out["search_p95_ms"] = pct(searches, 0.5), pct(searches, 0.95)
    out["add_p50_ms"], out["add_p95_ms"] = pct(adds, 0.5), pct(adds, 0.95)
    out["embed_p50_ms"] = embed_p50(name, url, queries, args.work)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--adds", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two")
    parser.add_argument("--port", type=int, default=18734, help="the server's port")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-bench-endpoint"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.fd_adds = 0
    text = Text()
    server, url = start_server(args)
    rows = []
    try:
        for r in range(args.rounds):
            for name in ("minilm", "openai"):
                print(f"[round {r + 1}] {name}", file=sys.stderr)
                rows.append({"round": r + 1, **measure(name, url, args, text)})
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    if args.json:
        print(json.dumps(rows))
        return
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        "?",
    )
    print(
        f"{args.entries:,} entries, {args.searches} searches, {args.adds} adds per run; "
        f"{os.cpu_count()} cores ({cpu}); server {url} (MiniLM, another process)"
    )
    print("| round | embedder | embed p50 | search p50 / p95 | add p50 / p95 | first index |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['round']} | {r['embedder']} | {r['embed_p50_ms']:.1f} ms "
            f"| {r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f} ms "
            f"| {r['add_p50_ms']:.0f} / {r['add_p95_ms']:.0f} ms | {r['first_index_s']:.1f} s |"
        )


if __name__ == "__main__":
    main()
