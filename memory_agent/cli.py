"""`memory-agent ...`: thin shells over library calls. Printing and exit codes live here only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memory_agent import __version__
from memory_agent import config as config_mod

EMBEDDERS = ("minilm", "bge-m3")


def _progress(stage: str, done: int, total: int) -> None:
    print(
        f"\r{stage}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from ragcore import RagcoreError, evaluate, make_embedder

    cfg = config_mod.load({"home": args.home, "embedder": args.embedder, "cache": args.cache})
    bench = Path(args.bench_dir)
    try:
        embedder = make_embedder(cfg.embedder, model_path=cfg.model_path or None)
        report = evaluate(
            bench,
            embedder,
            cache_dir=cfg.cache_dir,
            max_queries=args.max_queries,
            progress=None if args.quiet else _progress,
        )
    except RagcoreError as exc:
        print(f"memory-agent eval: {exc}", file=sys.stderr)
        return 2
    if args.run_out:
        with open(args.run_out, "w", encoding="utf-8") as fh:
            for qid, ranked in report.run.items():
                fh.write(json.dumps({"qid": qid, "ranked": ranked}) + "\n")
    out = report.as_json()
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{bench.name}: {out['docs']} docs, {out['chunks']} chunks, {out['queries']} queries, "
            f"embedder {cfg.embedder}"
        )
        for key in ("recall@5", "recall@10", "mrr@10", "ndcg@10"):
            print(f"  {key:10s} {out[key]:.4f}")
        print(
            f"  query p50 {out['query_p50_ms']:.1f} ms, p95 {out['query_p95_ms']:.1f} ms; "
            f"index {out['index_s']:.1f} s ({out['texts_embedded']} texts embedded, "
            "the rest from the cache)"
        )
    return 0


def _home(args: argparse.Namespace) -> Path:
    return config_mod.load({"home": args.home}).home_dir


def _client(args: argparse.Namespace):
    from memory_agent.client import DaemonClient

    home = _home(args)
    if not (home / "kb" / ".git").exists():
        from memory_agent.errors import NotReady

        raise NotReady(
            f"no knowledge base at {home / 'kb'}: run `memory-agent init` "
            "(or set MEMORY_AGENT_HOME / --home to your home)"
        )
    return DaemonClient(home)


def _tool(args: argparse.Namespace, name: str, **arguments) -> dict:
    return _client(args).call_tool(name, {k: v for k, v in arguments.items() if v is not None})


def _body(args: argparse.Namespace) -> str:
    if args.body is not None:
        return args.body
    if sys.stdin is None or sys.stdin.isatty():
        raise SystemExit("memory-agent: give the body with --body TEXT or on stdin")
    return sys.stdin.read()


def _emit(args: argparse.Namespace, reply: dict, human) -> int:
    if args.json:
        print(json.dumps(reply, ensure_ascii=False))
    else:
        human(reply)
    return 0


def _print_write(reply: dict) -> None:
    status = reply.get("status")
    if status == "duplicate":
        print(
            f"duplicate of {reply['duplicate_of']} (score {reply['score']}, {reply.get('match')}); "
            "nothing written"
        )
    elif status == "preview":
        for path, text in reply["preview"].items():
            print(f"--- would write {path}\n{text}")
        print("nothing written; run again with --confirm to write")
    else:
        print(
            f"{status}: {reply['id']}  commit {str(reply.get('commit'))[:12]}  "
            f"index {reply.get('generation')}"
        )


def cmd_init(args: argparse.Namespace) -> int:
    from memory_agent.client import DaemonClient
    from memory_agent.mcp_config import client_configs
    from memory_agent.memory import Memory

    cfg = config_mod.load({"home": args.home})
    reply = Memory(cfg).init(demo=args.demo, embedder=args.embedder, sync=False)
    client = DaemonClient(cfg.home_dir)
    if not args.no_index:
        # The daemon owns the index: it builds it on this first call.
        reply["index"] = client.admin("sync")
    reply["mcp"] = client_configs(cfg.home_dir)

    def human(r: dict) -> None:
        print(
            f"home {r['home']} (knowledge base {r['kb']}, "
            f"{'new repository' if r['created_repo'] else 'existing repository adopted'})"
        )
        if r["demo_entries_added"]:
            print(f"added {r['demo_entries_added']} demo entries in commit {r['commit'][:12]}")
        if "index" in r:
            i = r["index"]
            print(
                f"embedder {r['embedder']}; index {i['generation']}: {i['entries']} entries, "
                f"{'consistent' if i['consistent'] else 'INCONSISTENT'}"
            )
        print("\nConnect your agent (the proxy starts the daemon when needed):")
        for name, text in r["mcp"].items():
            print(f"\n# {name}\n{text}")

    return _emit(args, reply, human)


def cmd_add(args: argparse.Namespace) -> int:
    reply = _tool(
        args,
        "memory_add",
        title=args.title,
        body=_body(args),
        type=args.type,
        tags=args.tag or [],
        request_id=args.request_id,
    )
    return _emit(args, reply, _print_write)


def cmd_supersede(args: argparse.Namespace) -> int:
    reply = _tool(
        args,
        "memory_supersede",
        old_id=args.old_id,
        title=args.title,
        body=_body(args),
        type=args.type,
        tags=args.tag,
        confirm=args.confirm,
        request_id=args.request_id,
    )
    return _emit(args, reply, _print_write)


def cmd_archive(args: argparse.Namespace) -> int:
    reply = _tool(args, "memory_archive", id=args.id, reason=args.reason, confirm=args.confirm)
    return _emit(args, reply, _print_write)


def cmd_get(args: argparse.Namespace) -> int:
    reply = _tool(args, "memory_get", id=args.id)

    def human(r: dict) -> None:
        print(f"{r['id']}  [{r['type']}, {r['status']}{'' if r['writable'] else ', read-only'}]")
        print(f"# {r['title']}\n")
        print(r["body"])
        print(f"\n({r['path']})")

    return _emit(args, reply, human)


def cmd_search(args: argparse.Namespace) -> int:
    reply = _tool(
        args,
        "memory_search",
        query=args.query,
        limit=args.limit,
        types=args.type,
        tags=args.tag,
        include_readonly=not args.kb_only,
        include_archived=args.include_archived,
        explain=args.explain,
        as_of=args.as_of,
    )

    def human(r: dict) -> None:
        if r.get("degraded"):
            print(f"(degraded: {r['degraded']})")
        if not r["hits"]:
            print("no matches")
        for n, h in enumerate(r["hits"], start=1):
            ro = "" if h["writable"] else f" [read-only: {h['source']}]"
            print(
                f"{n:2d}. {h['score']:.3f}  {h['id']}  ({h['type']}){ro}\n    {h['title']}\n"
                f"    {h['snippet']}"
            )
            if "why" in h:
                signals = ", ".join(f"{k} {v:+.3f}" for k, v in h["why"]["signals"].items() if v)
                print(
                    f"      relevance {h['why']['relevance']:.4f}"
                    f"{'; ' + signals if signals else ''}; {h['why']['state']}"
                )
                for name, c in h["why"]["channels"].items():
                    print(
                        f"      {name:8s} rank {c['rank']:3d}  score {c['score']:.4f}  "
                        f"contributes {c['contribution']:.4f}"
                    )

    return _emit(args, reply, human)


def cmd_status(args: argparse.Namespace) -> int:
    reply = _tool(args, "memory_index_status")

    def human(r: dict) -> None:
        state = "consistent" if r["consistent"] else "INCONSISTENT: " + "; ".join(r["problems"])
        print(
            f"index {r['generation']} ({state}): {r['entries']} entries, {r['points']} points, "
            f"embedder {r['embedder']}"
        )
        for s in r["sources"]:
            flags = ("writable" if s["writable"] else "read-only") + (
                "" if s["available"] else ", UNAVAILABLE"
            )
            print(f"  {s['label']:16s} {s['entries']:5d} entries  ({flags})  {s['path']}")
            for problem in s.get("problems", [])[:5]:
                print(f"      ! {problem}")
        if r["pending"]:
            print(f"  {r['pending']} unfinished write(s) will be completed by the next write")
        if r.get("degraded"):
            print(f"  ({r['degraded']})")

    return _emit(args, reply, human)


def cmd_rebuild(args: argparse.Namespace) -> int:
    reply = _client(args).admin("rebuild")
    return _emit(
        args,
        reply,
        lambda r: print(
            f"built {r['generation']}: {r['documents']} documents, {r['chunks']} chunks in "
            f"{r['seconds']} s"
        ),
    )


def cmd_history(args: argparse.Namespace) -> int:
    reply = _tool(args, "memory_history", id=args.id)

    def human(r: dict) -> None:
        for step in r["chain"]:
            reason = f"  ({step['reason']})" if step.get("reason") else ""
            print(f"{step['created']}  {step['id']}  [{step['status']}]  {step['title']}{reason}")

    return _emit(args, reply, human)


def cmd_importance(args: argparse.Namespace) -> int:
    reply = _tool(
        args, "memory_set_importance", id=args.id, importance=args.importance, note=args.note
    )
    return _emit(args, reply, lambda r: print(f"{r['id']}: importance {r['importance']}"))


def cmd_gc(args: argparse.Namespace) -> int:
    dry = "1" if args.dry_run else "0"
    confirm = "1" if args.confirm else "0"
    reply = _client(args).admin(f"gc?dry_run={dry}&confirm={confirm}")

    def human(r: dict) -> None:
        print(
            f"{r['entries']} active entries: {len(r['dormant'])} dormant, "
            f"{len(r['archive'])} to archive"
        )
        for c in r["dormant"]:
            print(f"  dormant  {c['id']}: {c['reason']}")
        for c in r["archive"]:
            print(f"  archive  {c['id']}: {c['reason']}")
        if r.get("status") == "preview":
            print("nothing written; run `memory-agent gc --confirm` to archive them in one commit")
        elif r.get("status") == "archived":
            print(f"archived {len(r['ids'])} entries in commit {r['commit'][:12]} (files kept)")

    return _emit(args, reply, human)


def cmd_stop(args: argparse.Namespace) -> int:
    from memory_agent.client import DaemonClient

    client = DaemonClient(_home(args))
    health = client.health()
    stopped = client.stop(wait=True)
    reply = {"stopped": stopped, "pid": health.get("pid") if health else None}
    return _emit(
        args,
        reply,
        lambda r: print(
            f"stopped the daemon (pid {r['pid']})" if r["stopped"] else "no daemon was running"
        ),
    )


def cmd_daemon(args: argparse.Namespace) -> int:
    from memory_agent.daemon import AlreadyRunning, run_daemon

    try:
        return run_daemon(
            args.home, preload=args.preload, idle_exit=args.idle_exit, foreground=args.foreground
        )
    except AlreadyRunning as exc:
        print(f"memory-agent daemon: {exc}", file=sys.stderr)
        return 1


def cmd_web(args: argparse.Namespace) -> int:
    from legal_web.server import main as web_main

    argv = ["--port", str(args.port)]
    if args.data:
        argv += ["--data", args.data]
    if args.web_home:
        argv += ["--home", args.web_home]
    return web_main(argv)


def cmd_proxy(args: argparse.Namespace) -> int:
    from memory_agent.proxy import run_proxy

    return run_proxy(_home(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-agent",
        description="Long-term memory for coding agents: a Markdown knowledge base in git, "
        "searched through a resident daemon over MCP.",
    )
    parser.add_argument(
        "--home", help="home directory (default: $MEMORY_AGENT_HOME or ~/.memory-agent)"
    )
    parser.add_argument("--version", action="version", version=f"memory-agent {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func, help: str, description: str | None = None):
        p = sub.add_parser(name, help=help, description=description or help)
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
        p.add_argument(
            "--home",
            default=argparse.SUPPRESS,
            help="home directory (default: $MEMORY_AGENT_HOME or ~/.memory-agent)",
        )
        p.set_defaults(func=func)
        return p

    p = command(
        "init",
        cmd_init,
        "create (or adopt) the home and its git knowledge base",
        "Create the home directory and kb/ as a git repository (an existing directory "
        "or repository is adopted, never overwritten), then build the index.",
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        help="write this embedder to config.toml (default for new homes: bge-m3)",
    )
    p.add_argument("--demo", action="store_true", help="add the demo entries (one commit)")
    p.add_argument(
        "--no-index", action="store_true", help="do not start the daemon to build the index now"
    )

    p = command("add", cmd_add, "add an entry (dedup, validate, write, commit, index)")
    p.add_argument("--title", required=True)
    p.add_argument(
        "--type",
        default="note",
        help="principle, correction, decision, guideline, "
        "pitfall, process, model, fact, preference or note (default note)",
    )
    p.add_argument("--tag", action="append", help="a tag; repeat for more")
    p.add_argument("--body", help="the text (default: read stdin)")
    p.add_argument("--request-id", help="retrying with the same id returns the first reply")

    p = command("get", cmd_get, "show one entry, read from disk")
    p.add_argument("id")

    p = command("search", cmd_search, "search the knowledge base and the read-only corpora")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=8)
    p.add_argument("--type", action="append", help="only this type; repeat for more")
    p.add_argument("--tag", action="append", help="only entries with this tag; repeat for more")
    p.add_argument("--kb-only", action="store_true", help="leave out the read-only corpora")
    p.add_argument("--include-archived", action="store_true")
    p.add_argument("--as-of", metavar="YYYY-MM-DD", help="search the memory as it stood that day")
    p.add_argument("--explain", action="store_true", help="show each channel's rank and score")

    p = command(
        "supersede",
        cmd_supersede,
        "replace an entry with a new one (preview first)",
        "Write a new entry that supersedes OLD_ID and mark OLD_ID superseded, in one "
        "commit. Without --confirm, show both files as they would be written.",
    )
    p.add_argument("old_id")
    p.add_argument("--title", required=True)
    p.add_argument("--body", help="the text (default: read stdin)")
    p.add_argument("--type", help="default: the old entry's type")
    p.add_argument("--tag", action="append", help="default: the old entry's tags")
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument("--request-id")

    p = command("archive", cmd_archive, "retire an entry with a reason (preview first)")
    p.add_argument("id")
    p.add_argument("--reason", required=True)
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")

    command("status", cmd_status, "index generation, consistency, sources, pending writes")
    command("rebuild", cmd_rebuild, "build a fresh index generation from the files")
    command("stop", cmd_stop, "stop this home's daemon (it finishes the write in flight)")

    p = command("history", cmd_history, "the supersede chain through an entry, oldest first")
    p.add_argument("id")

    p = command("importance", cmd_importance, "say how much an entry matters (1-10)")
    p.add_argument("id")
    p.add_argument("importance", type=int)
    p.add_argument("--note", help="why it matters")

    p = command(
        "gc",
        cmd_gc,
        "list dormant entries and archive long-idle ones (never deletes)",
        "List entries that went dormant (ranked lower) or have been idle past their "
        "type's archive threshold. Without --dry-run, show the archive commit it would "
        "make; with --confirm, make it (the files stay, marked archived).",
    )
    p.add_argument("--dry-run", action="store_true", help="only list, write nothing")
    p.add_argument("--confirm", action="store_true", help="archive the candidates (one commit)")

    p = command(
        "daemon",
        cmd_daemon,
        "run the resident daemon (normally the proxy starts it)",
        "Serve MCP on the Unix socket run/daemon.sock of the home: one model, one index "
        "and every write for all agent sessions. The proxy starts it when needed.",
    )
    p.add_argument("--preload", action="store_true", help="load the model now, not on first use")
    p.add_argument(
        "--idle-exit",
        type=float,
        help="exit after this many idle seconds (default: config idle_exit; 0 = never)",
    )
    p.add_argument("--foreground", action="store_true", help="also log to stderr")

    p = sub.add_parser(
        "web",
        help="run the regulation Q&A web app (legal_web) on 127.0.0.1",
        description="Serve the policy/regulation Q&A app: a page and a JSON API answering "
        "questions from knowledge bases of regulation documents, with cited passages. Prints "
        "the URL; Ctrl-C stops it.",
    )
    p.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port)")
    p.add_argument("--data", help="folder of knowledge bases (default: the bundled samples)")
    p.add_argument("--web-home", help="where its index lives (default: under ~/.cache/legal_web)")
    p.set_defaults(func=cmd_web)

    command(
        "proxy",
        cmd_proxy,
        "the stdio MCP server an agent launches (forwards to the daemon)",
        "Speak MCP (JSON-RPC lines) on stdin/stdout and forward every message to the home's "
        "daemon, starting it if needed. This is what goes in your agent's MCP settings.",
    )

    p = sub.add_parser(
        "eval",
        help="score retrieval on a benchmark folder (corpus.jsonl, queries.jsonl, qrels.tsv)",
        description="Index BENCH_DIR/corpus.jsonl in a temporary home through the production "
        "indexing path, run BENCH_DIR/queries.jsonl through the production search path, and "
        "print Recall@5, Recall@10, MRR@10, nDCG@10, query latency p50/p95 and index time. "
        "Embeddings are cached in $MEMORY_AGENT_CACHE (default <home>/cache), so a second run "
        "of the same corpus embeds nothing.",
    )
    p.add_argument("bench_dir", metavar="BENCH_DIR")
    p.add_argument("--embedder", choices=EMBEDDERS, help="embedding model (default: config)")
    p.add_argument("--cache", help="embedding cache directory (default: $MEMORY_AGENT_CACHE)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--run-out", metavar="FILE", help="write the ranking of every query as JSONL")
    p.add_argument("--max-queries", type=int, help="score only the first N queries")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_eval)
    return parser


def _as_error(exc: Exception) -> tuple[str, str] | None:
    """(code, message) for the errors a user should see as a message, None for bugs."""
    from memory_agent.client import DaemonError, ToolCallError
    from memory_agent.errors import MemoryAgentError

    if isinstance(exc, MemoryAgentError):
        return exc.code, str(exc)
    if isinstance(exc, ToolCallError):
        code, sep, text = str(exc).partition(": ")
        return (code, text) if sep and code.isidentifier() else ("error", str(exc))
    if isinstance(exc, DaemonError):
        return "daemon", str(exc)
    ragcore_errors = sys.modules.get("ragcore.errors")  # never imported just to catch
    if ragcore_errors is not None and isinstance(exc, ragcore_errors.RagcoreError):
        return "index", str(exc)
    if isinstance(exc, ValueError):
        return "invalid", str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        error = _as_error(exc)
        if error is None:
            raise
        code, message = error
        if getattr(args, "json", False):
            print(json.dumps({"error": message, "code": code}, ensure_ascii=False))
        print(f"memory-agent {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
