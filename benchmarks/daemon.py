"""Scale benchmark of the product path: the daemon and the proxy at 1k, 10k and 100k entries.

    .venv/bin/python benchmarks/daemon.py [--entries 1000,10000,100000] [--searches 200]
        [--adds 30] [--fd-adds 0] [--work DIR] [--json]

Everything goes through real processes: a `memory-agent proxy` subprocess speaking JSON-RPC on
stdio and the daemon it starts, MiniLM, the default filters (status active, every source),
limit 8. Per size it prints:
- embed p50: the embedder's own query latency (the same MiniLM and queries, one torch thread,
  in this process while the daemon is idle) - the floor of a search;
- search p50 / p95 through the proxy, and p50 minus the embed p50 (what the memory adds);
- add p50 / p95 through the proxy (dedup, validation, write, commit, index refresh);
- daemon RSS idle (started, nothing asked) and with the model loaded;
- daemon start to the first answer (lexical while the model loads) and to the first full one;
- a full rebuild with every embedding in the cache;
- open file descriptors of the daemon after 10 adds and after `--fd-adds` more (0: skipped).
With `--fanout` the KB is fanned out (`memory-agent kb fanout --confirm`, timed: `fanout_s`)
after the first index, so the adds write `kb/<type>/<xx>/<id>.md` (ADR 0031).

Entries have a realistic size: a title sentence and 2-5 body sentences sampled, with a fixed
seed, from the SciFact and LoCoMo corpora in ../shared/bench (read here, never copied); the
queries are those benchmarks' dev queries. Without ../shared (`MEMORY_AGENT_BENCH_DATA` names
it for a copy of the code elsewhere) a seeded word-salad generator and word-salad queries stand
in, said on stderr and in the JSON (`real_text`: 0). Homes and the embedding cache live in --work (default
/tmp/memory-agent-bench) so a second run embeds nothing: the first 100k index embeds every
entry once (tens of minutes on 2 cores).

Many agents at once (issue 18):

    .venv/bin/python benchmarks/daemon.py --clients 1,10,20 [--entries 1000,10000]
        [--duration 10] [--runs 3] [--modes search,mixed] [--work DIR] [--json]

N clients, each a real `memory-agent proxy` subprocess with its own MCP session, search back to
back (closed loop, the dev queries in turn) for `--duration` seconds after a common start;
`mixed` adds one more client that adds entries back to back for the same window. Only
successful replies count. Per (entries, clients, mode) it prints search p50 / p95, searches
per second, and for `mixed` the adds done and add p50 / p95: the median of `--runs` runs (each
figure its own median). One daemon serves every run of a size; the entries a `mixed` run adds
stay (a few hundred at most).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from daemon_home import FANNED_BASE, Text, bench_env, open_fds, pct, reset_home, rss_mb

from memory_agent.client import DaemonClient
from memory_agent.serve.session import ProxySession

TARGETS = {  # issue 10: search p50 - embed p50, add p50, daemon RSS with the model (2 cores)
    1000: (8, 120, 750),
    10000: (15, 150, 850),
    100000: (40, 300, 1300),
}


def embed_p50(queries: list[str], cache: Path) -> float:
    """The query latency of the embedder the daemon uses (the same runtime setting)."""
    from ragcore import make_embedder

    model = make_embedder(
        "minilm", runtime=os.environ.get("MEMORY_AGENT_RUNTIME", "auto"), work_dir=cache
    )
    model.load()
    model.embed_query("warm up")
    times = []
    for q in queries:
        t = time.perf_counter()
        model.embed_query(q)
        times.append((time.perf_counter() - t) * 1000)
    return pct(times, 0.5)


def measure(size: int, args: argparse.Namespace, text: Text) -> dict[str, float]:
    out: dict[str, float] = {"entries": size}
    home = args.work / f"home-{size}"
    env = bench_env(home, args)
    client = DaemonClient(home, timeout=7200)
    client.stop(wait=True, timeout=600)
    reset_home(home, size, text, args.fanout)
    if not (args.keep_index and (home / "index" / "CURRENT").is_file()):
        shutil.rmtree(home / "index", ignore_errors=True)  # else: built at the base commit
    shutil.rmtree(home / "events", ignore_errors=True)
    shutil.rmtree(home / "run" / "requests", ignore_errors=True)
    print(f"[{size}] first index (cached embeddings make reruns cheap)", file=sys.stderr)
    t = time.perf_counter()
    client.ensure()
    client.admin("refresh")
    out["first_index_s"] = time.perf_counter() - t
    if args.fanout:  # the KB moved to kb/<type>/<xx>/<id>.md (ADR 0031), then indexed again
        print(f"[{size}] kb fanout", file=sys.stderr)
        t = time.perf_counter()
        out["fanout_moved"] = client.admin("fanout?confirm=1").get("moved", 0)
        out["fanout_s"] = time.perf_counter() - t
        kb = ["git", "-C", str(home / "kb")]
        subprocess.run([*kb, "update-ref", FANNED_BASE, "HEAD"], check=True)  # the next base
    t = time.perf_counter()
    if args.graph_wait:
        out["dense_graph"] = float(wait_dense(client) == "graph")  # built once, then mapped
    out["graph_build_s"] = time.perf_counter() - t
    client.stop(wait=True, timeout=600)

    client.ensure()  # a fresh daemon that has answered nothing but /health
    pid = client.health()["pid"]
    time.sleep(1.0)
    out["daemon_rss_idle_mb"] = rss_mb(pid)
    client.stop(wait=True, timeout=600)

    queries = text.queries[: args.searches]
    t = time.perf_counter()
    s = ProxySession(home, env=env)
    s.initialize()
    first = s.call("memory_search", query=queries[0])
    out["start_to_first_answer_ms"] = (time.perf_counter() - t) * 1000
    out["first_answer_degraded"] = float("degraded" in (first.get("structuredContent") or {}))
    pid = client.health()["pid"]
    while "degraded" in (s.call("memory_search", query=queries[1])["structuredContent"] or {}):
        time.sleep(0.05)
    out["start_to_full_answer_ms"] = (time.perf_counter() - t) * 1000
    for q in queries[:5]:  # warm up
        s.call("memory_search", query=q)
    searches = []
    for q in queries:
        t = time.perf_counter()
        reply = s.call("memory_search", query=q, limit=8)
        searches.append((time.perf_counter() - t) * 1000)
        assert not reply.get("isError"), reply
    out["dense_state_graph"] = float(client.health().get("dense") == "graph")
    if args.recall_queries:  # the same searches with the exact scan: recall@10 of the answers
        graph_top = top10(s, queries[: args.recall_queries])
        s.close()
        client.stop(wait=True, timeout=600)
        exact = ProxySession(home, env={**env, "MEMORY_AGENT_DENSE_GRAPH": "off"})
        exact.initialize()
        exact_top = top10(exact, queries[: args.recall_queries])
        exact.close()
        client.stop(wait=True, timeout=600)
        out["recall_at_10_vs_exact"] = sum(
            len(set(g) & set(e)) / max(len(e), 1) for g, e in zip(graph_top, exact_top, strict=True)
        ) / len(exact_top)
        s = ProxySession(home, env=env)
        s.initialize()
        s.call("memory_search", query=queries[0])
        pid = client.health()["pid"]
    adds = []
    text.rng.seed(size + 1)
    for n in range(args.adds):
        title, body = text.entry(10_000_000 + n)
        t = time.perf_counter()
        reply = s.call("memory_add", title=title, body=body)
        adds.append((time.perf_counter() - t) * 1000)
        assert reply["structuredContent"]["status"] in ("created", "duplicate"), reply
    if args.fd_adds:
        fds_10 = open_fds(pid)
        for n in range(args.fd_adds):
            title, body = text.entry(20_000_000 + n)
            s.call("memory_add", title=title, body=body)
        out["fds_after_10_adds"] = fds_10
        out[f"fds_after_{args.fd_adds}_more_adds"] = open_fds(pid)
    out["proxy_rss_mb"] = rss_mb(s.pid)
    out["daemon_rss_model_mb"] = rss_mb(pid)
    out["search_p50_ms"], out["search_p95_ms"] = pct(searches, 0.5), pct(searches, 0.95)
    out["add_p50_ms"], out["add_p95_ms"] = pct(adds, 0.5), pct(adds, 0.95)
    # with reader processes (--read-processes), theirs counts too: the memory the home costs
    readers = [r["pid"] for r in client.health().get("readers", []) if r.get("pid")]
    out["readers_rss_mb"] = sum(rss_mb(r) for r in readers)
    out["rss_mb"] = out["daemon_rss_model_mb"] + out["readers_rss_mb"]
    out["first_answer_s"] = out["start_to_first_answer_ms"] / 1000
    s.close()
    if args.rebuild:
        t = time.perf_counter()
        client.admin("rebuild")
        out["rebuild_cached_s"] = time.perf_counter() - t
    client.stop(wait=True, timeout=600)
    out["embed_p50_ms"] = embed_p50(queries, args.work / "cache")
    out["search_minus_embed_ms"] = out["search_p50_ms"] - out["embed_p50_ms"]
    return out


def wait_dense(client: DaemonClient) -> str:
    """Wait while the daemon builds its dense graph (exact scans meanwhile); its state then."""
    while (state := client.health().get("dense", "exact")) == "building":
        time.sleep(1.0)
    return state


def top10(session: ProxySession, queries: list[str]) -> list[list[str]]:
    out = []
    for q in queries:
        while "degraded" in (reply := session.call("memory_search", query=q, limit=10)).get(
            "structuredContent", {}
        ):
            time.sleep(0.1)  # the model is loading: lexical only
        out.append([h["id"] for h in reply["structuredContent"]["hits"]])
    return out


def report(rows: list[dict[str, float]], real: bool) -> None:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        "?",
    )
    print(
        f"daemon + proxy, MiniLM, default filters, {os.cpu_count()} cores ({cpu}), "
        f"{'SciFact/LoCoMo text and queries' if real else 'word-salad text'}"
    )
    print(
        "| entries | embed p50 | search p50 / p95 | search - embed (target) | add p50 / p95 "
        "(target) | RSS idle / model (target) | start -> lexical / full | rebuild cached |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = TARGETS.get(int(r["entries"]), (float("nan"),) * 3)
        print(
            f"| {int(r['entries']):,} | {r['embed_p50_ms']:.1f} ms "
            f"| {r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f} ms "
            f"| {r['search_minus_embed_ms']:.1f} ms (<= {t[0]}) "
            f"| {r['add_p50_ms']:.0f} / {r['add_p95_ms']:.0f} ms (<= {t[1]}) "
            f"| {r['daemon_rss_idle_mb']:.0f} / {r['daemon_rss_model_mb']:.0f} MB (<= {t[2]}) "
            f"| {r['start_to_first_answer_ms'] / 1000:.1f} / "
            f"{r['start_to_full_answer_ms'] / 1000:.1f} s "
            f"| {r.get('rebuild_cached_s', float('nan')):.1f} s |"
        )
    for r in rows:
        if any(k.startswith("fds_") for k in r):
            fds = ", ".join(f"{k} {int(v)}" for k, v in r.items() if k.startswith("fds_"))
            print(f"open fds at {int(r['entries']):,} entries: {fds}")


def main() -> None:
    from daemon_clients import measure_clients, report_clients  # the --clients mode

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", default="1000,10000,100000", help="sizes, comma-separated")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--adds", type=int, default=30)
    parser.add_argument("--fd-adds", type=int, default=0, help="adds between the fd counts")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-bench"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--recall-queries", type=int, default=50, help="0: no recall run")
    parser.add_argument("--no-rebuild", dest="rebuild", action="store_false")
    parser.add_argument("--keep-index", action="store_true", help="reuse an index at the base")
    parser.add_argument("--no-graph-wait", dest="graph_wait", action="store_false")
    parser.add_argument(
        "--fanout",
        action="store_true",
        help="fan the KB out (`memory-agent kb fanout`) after the first index: adds then write "
        "kb/<type>/<xx>/<id>.md (the base commit stays flat; the next run resets to it)",
    )
    parser.add_argument("--clients", default="", help="concurrent proxies, e.g. 1,10,20")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--runs", type=int, default=3, help="windows per setting (median)")
    parser.add_argument("--modes", default="search,mixed", help="search and/or mixed")
    parser.add_argument(
        "--read-processes",
        type=int,
        default=0,
        help="the daemon's reader processes (the read_processes setting, ADR 0028)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    text = Text()
    if args.clients:
        crows: list[dict[str, float]] = []
        for size in (int(x) for x in args.entries.split(",")):
            crows += measure_clients(size, args, text)
        if not args.json:
            report_clients(crows, args, text.real)
        return
    rows = []
    for size in (int(x) for x in args.entries.split(",")):
        rows.append({**measure(size, args, text), "real_text": float(text.real)})
        if args.json:
            print(json.dumps({k: round(v, 2) for k, v in rows[-1].items()}), flush=True)
    if not args.json:
        report(rows, text.real)


if __name__ == "__main__":
    main()
