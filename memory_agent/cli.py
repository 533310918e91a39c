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
    from memory_agent.errors import Invalid
    from ragcore import evaluate, make_embedder, metrics_by

    cfg = config_mod.load({"home": args.home, "embedder": args.embedder, "cache": args.cache})
    bench = Path(args.bench_dir)
    if args.by and not _queries_have(bench / "queries.jsonl", args.by):
        raise Invalid(  # before the index is built, not after
            f"--by {args.by}: no query in {bench / 'queries.jsonl'} has that field",
            "name a field the queries carry (LoCoMo: category), or drop --by",
        )
    embedder = make_embedder(
        cfg.embedder,
        model_path=cfg.model_path or None,
        runtime=cfg.runtime,
        work_dir=cfg.cache_dir,
    )
    report = evaluate(
        bench,
        embedder,
        cache_dir=cfg.cache_dir,
        max_queries=args.max_queries,
        progress=None if args.quiet else _progress,
        searcher=product_searcher(cfg),
    )
    if args.run_out:
        with open(args.run_out, "w", encoding="utf-8") as fh:
            for qid, ranked in report.run.items():
                fh.write(json.dumps({"qid": qid, "ranked": ranked}) + "\n")
    out = report.as_json()
    groups = metrics_by(bench, report.run, args.by) if args.by else {}
    if groups:
        out["by"] = {
            args.by: {
                value: {"queries": n, **{k: round(v, 4) for k, v in m.items()}}
                for value, (n, m) in groups.items()
            }
        }
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
        if groups:
            print(f"\n| {args.by} | n | nDCG@10 | R@10 | MRR@10 |\n|---|---|---|---|---|")
            for value, (n, m) in groups.items():
                print(
                    f"| {value} | {n} | {m['ndcg@10']:.4f} | {m['recall@10']:.4f} "
                    f"| {m['mrr@10']:.4f} |"
                )
    return 0


def _queries_have(path: Path, field: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return any(line.strip() and field in json.loads(line) for line in fh)
    except (OSError, ValueError):
        return True  # evaluate() names the real problem with the file


def product_searcher(cfg: config_mod.Config):
    """The search a tool call makes - the default filter (active entries, every source), then
    the ranking with empty usage stats - on the benchmark's index."""
    from memory_agent.clock import Clock
    from memory_agent.index.links import link_graph
    from memory_agent.recall.reads import default_filter, rank

    now = Clock.from_setting(cfg.clock).now()
    graphs: dict[int, dict] = {}

    def searcher(index, query: str, limit: int) -> list[str]:
        graph = graphs.get(index.revision)
        if graph is None:
            graph = graphs[index.revision] = link_graph(index)
        found = rank(index, query, default_filter(), limit=limit, stats={}, now=now, graph=graph)
        return [h["id"] for h in found.reply["hits"]]

    return searcher


def _home(args: argparse.Namespace) -> Path:
    return config_mod.load({"home": args.home}).home_dir


def _client(args: argparse.Namespace):
    from memory_agent.client import DaemonClient
    from memory_agent.kb.home import Home

    home = _home(args)
    Home(home).require()
    return DaemonClient(home)


def _tool(args: argparse.Namespace, name: str, **arguments) -> dict:
    return _client(args).call_tool(name, {k: v for k, v in arguments.items() if v is not None})


def _links(args: argparse.Namespace) -> dict[str, list[str]] | None:
    """--link KIND:ID (repeatable) as the tools' `links` argument."""
    from memory_agent.errors import Invalid
    from memory_agent.kb.entries import LINK_KINDS

    if not getattr(args, "link", None):
        return None
    links: dict[str, list[str]] = {}
    for item in args.link:
        kind, sep, target = item.partition(":")
        if not sep or not target:
            raise Invalid(
                f"--link {item!r}: expected KIND:ID",
                f"e.g. --link derived_from:old-entry-id (kinds: {', '.join(LINK_KINDS)})",
            )
        links.setdefault(kind.strip(), []).append(target.strip())
    return links


def _body(args: argparse.Namespace) -> str:
    from memory_agent.errors import Invalid

    if args.body is not None:
        return args.body
    if sys.stdin is None or sys.stdin.isatty():
        raise Invalid("body: missing", "give it with --body TEXT or on stdin")
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
            + ("; --force writes it anyway" if reply.get("match") == "near" else "")
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
    from memory_agent.config import installed_embedder
    from memory_agent.index.memory import Memory
    from memory_agent.serve.mcp_config import client_configs, hook_configs

    cfg = config_mod.load({"home": args.home})
    # A new home records the model it starts with, so installing the bge-m3 extra later does
    # not switch an existing index's model under it.
    pin = args.embedder or (None if (cfg.home_dir / "kb").exists() else cfg.embedder)
    reply = Memory(cfg).init(demo=args.demo, embedder=pin, sync=False)
    client = DaemonClient(cfg.home_dir)
    health = client.health()
    if health is not None and health.get("embedder") != reply["embedder"]:
        # The running daemon serves the old embedder: replace it, or the new setting would
        # not take effect (and its error would repeat).
        client.stop(wait=True)
        reply["restarted_daemon"] = health.get("pid")
    if not args.no_index:
        # The daemon owns the index: it builds it on this first call.
        reply["index"] = client.admin("sync")
    reply["mcp"] = client_configs(cfg.home_dir)
    reply["hooks"] = hook_configs(cfg.home_dir)

    def human(r: dict) -> None:
        from memory_agent.serve.mcp_config import ALLOW_WRITES

        print(
            f"home {r['home']} (knowledge base {r['kb']}, "
            f"{'new repository' if r['created_repo'] else 'existing repository adopted'})"
        )
        for change in r.get("tightened") or []:
            print(f"made owner-only (it may hold private notes): {change}")
        if r.get("restarted_daemon"):
            print(f"stopped the daemon (pid {r['restarted_daemon']}) of the old embedder")
        if r["demo_entries_added"]:
            print(f"added {r['demo_entries_added']} demo entries in commit {r['commit'][:12]}")
        if r.get("index"):  # None with --no-index
            i = r["index"]
            print(
                f"embedder {r['embedder']}; index {i['generation']}: {i['entries']} entries, "
                f"{'consistent' if i['consistent'] else 'INCONSISTENT'}"
            )
        if r["embedder"] == "minilm" and installed_embedder() == "minilm":
            print(
                "(minilm: the offline English model. For BGE-M3, multilingual: "
                "pip install 'memory-agent[bge-m3]' (torch==2.13.0 first for the CPU build), "
                "then memory-agent init --embedder bge-m3 and memory-agent rebuild)"
            )
        print("\nConnect your agent (the proxy starts the daemon when needed):")
        for name, text in r["mcp"].items():
            print(f"\n# {name}\n{text}")
        print(
            "\nOptional: hooks that capture every turn and add relevant memory before each "
            "prompt (capture = off in config.toml switches them off):"
        )
        for name, text in r["hooks"].items():
            print(f"\n# {name}\n{text}")
        print(
            "\nThe Claude Code settings above also allow the read-only memory tools "
            "(permissions.allow: without it `claude -p` denies every memory tool call). "
            + ALLOW_WRITES
            + "\n`memory-agent connect claude-code|codex|opencode|cursor` merges all of this "
            "into the agent's own settings files for you (a preview first, then --confirm)."
        )

    return _emit(args, reply, human)


def cmd_connect(args: argparse.Namespace) -> int:
    from memory_agent.serve.connect import connect

    cfg = config_mod.load({"home": args.home})
    reply = connect(args.agent, cfg.home_dir, confirm=args.confirm, remove=args.remove)

    def human(r: dict) -> None:
        for f in r["files"]:
            print(f"{f['action']:9s} {f['path']}")
        for f in r["files"]:
            if f["diff"]:
                print("\n" + f["diff"].rstrip("\n"))
        for f in r["files"]:
            if f["backup"]:
                print(f"backup of the old {Path(f['path']).name}: {f['backup']}")
        changes = [f for f in r["files"] if f["action"] != "unchanged"]
        if not changes:
            print("nothing to change: already " + ("removed" if r["remove"] else "connected"))
        elif not r["written"]:
            print("\nnothing written yet: run it again with --confirm to make these changes")
        for note in r["notes"]:
            print(f"note: {note}")

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
        force=args.force or None,
        links=_links(args),
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
        force=args.force or None,
        links=_links(args),
    )
    return _emit(args, reply, _print_write)


def cmd_archive(args: argparse.Namespace) -> int:
    reply = _tool(
        args,
        "memory_archive",
        id=args.id,
        reason=args.reason,
        confirm=args.confirm,
        request_id=args.request_id,
    )
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
        include_episodes=args.episodes or None,
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
            if h.get("status") == "archived":
                ro += " [archived]"
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
        clients = r.get("clients") or {}
        for name, last in clients.items():
            print(f"  agent {name:12s} last hook event {last['event']} at {last['at']}")
        if "clients" in r and not clients:
            print("  no agent hook has run yet (see `memory-agent connect`)")

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
    stopped, pid = client.stop(wait=True)
    reply = {"stopped": stopped, "pid": pid}
    return _emit(
        args,
        reply,
        lambda r: print(
            f"stopped the daemon (pid {r['pid']})" if r["stopped"] else "no daemon was running"
        ),
    )


def _print_scrub(r: dict) -> None:
    j, e = r["journal"], r["events"]
    print(f"scrubbed {r['home']}")
    print(f"  journal: {j['lines']} record(s) redacted in {j['rewritten']} file(s)")
    print(f"  events:  {e['lines']} event(s) redacted in {e['rewritten']} of {e['files']} file(s)")
    print(f"  inbox:   {'redacted' if r['inbox'] else 'nothing to redact'}")
    if j["temps_removed"] or e["temps_removed"]:
        print(f"  removed {j['temps_removed'] + e['temps_removed']} temp file(s) of a crashed run")
    if r.get("stopped_daemon"):
        print(f"  stopped the older daemon (pid {r['stopped_daemon']}); it restarts on next use")
    index = r.get("index")
    if index is None:
        print("  index:   " + ("unchanged (no journal record changed)" if not j["lines"] else
                             "not rebuilt (--no-rebuild): run `memory-agent rebuild`"))  # fmt: skip
    elif "error" in index:
        print(f"  index:   NOT rebuilt ({index['error']}); fix: {index['fix']}")
    else:
        print(f"  index:   rebuilt {index['generation']}: episodes follow the scrubbed journal")
    lessons = r["auto_lessons"]
    if not lessons:
        print("no lesson written by the gate (source: auto) to review")
        return
    print(f"{len(lessons)} lesson(s) the gate wrote by itself (source: auto): review each; "
          "archive one with the command under it")  # fmt: skip
    for lesson in lessons:
        print(f"  {lesson['id']}: {lesson['title']}\n    {lesson['archive']}")


def cmd_scrub(args: argparse.Namespace) -> int:
    from memory_agent.kb.home import Home
    from memory_agent.serve import scrub

    home = _home(args)
    Home(home).require()
    reply = scrub.scrub_command(home, rebuild=not args.no_rebuild)
    return _emit(args, reply, _print_scrub)


def cmd_daemon(args: argparse.Namespace) -> int:
    from memory_agent.serve.daemon import run_daemon

    return run_daemon(
        args.home, preload=args.preload, idle_exit=args.idle_exit, foreground=args.foreground
    )


def cmd_web(args: argparse.Namespace) -> int:
    from legal_web.server import main as web_main

    argv = ["--port", str(args.port)]
    if args.json:
        argv += ["--json"]
    if args.data:
        argv += ["--data", args.data]
    if args.web_home:
        argv += ["--home", args.web_home]
    return web_main(argv)


def cmd_hook(args: argparse.Namespace) -> int:  # reached when options come before `hook`
    from memory_agent.capture.hooks import main as hook_main

    argv = [a for a in (args.event,) if a] + ["--home", str(_home(args))]
    return hook_main(argv + (["--client", args.client] if args.client else []))


def cmd_proposals(args: argparse.Namespace) -> int:
    reply = _tool(args, "memory_proposals")

    def human(r: dict) -> None:
        if not r["proposals"]:
            print("no proposals")
        for p in r["proposals"]:
            print(f"{p['id']}  {p['title']}\n    {len(p['episodes'])} episodes, "
                  f"{len(p['sessions'])} sessions")  # fmt: skip

    return _emit(args, reply, human)


def cmd_accept(args: argparse.Namespace) -> int:
    return _emit(args, _tool(args, "memory_accept", id=args.id), _print_write)


def cmd_reject(args: argparse.Namespace) -> int:
    reply = _tool(args, "memory_reject", id=args.id, reason=args.reason)
    return _emit(args, reply, lambda r: print(f"rejected {r['id']}: never proposed again"))


def cmd_gate(args: argparse.Namespace) -> int:
    reply = _client(args).admin("gate")

    def human(r: dict) -> None:
        print(f"gate ({r['mode']}): {len(r['promoted'])} promoted, {len(r['proposed'])} "
              f"proposed, {len(r['reinforced'])} reinforced")  # fmt: skip
        for entry in r["promoted"]:
            print(f"  promoted {entry}")
        for key in r["proposed"]:
            print(f"  proposed {key}")

    return _emit(args, reply, human)


def cmd_ui(args: argparse.Namespace) -> int:
    from memory_agent.ui.server import serve

    def ready(url: str, port: int) -> None:
        if args.json:
            print(json.dumps({"url": url, "port": port}), flush=True)
        else:
            print(f"memory-agent ui: open {url}", flush=True)
            print(
                "(the token in the URL is the key: keep it to yourself; Ctrl-C stops)", flush=True
            )

    return serve(_home(args), args.port, ready=ready)


def cmd_proxy(args: argparse.Namespace) -> int:
    from memory_agent.proxy import run_proxy

    return run_proxy(_home(args))


TYPES_HELP = (
    "principle, correction, decision, guideline, pitfall, process, model, fact, preference or note"
)
HOME_HELP = "the memory's home directory (default: $MEMORY_AGENT_HOME, else ~/.memory-agent)"
EXIT_CODES = """exit status: 0 success; 2 refused or bad arguments (nothing was written; the message
says why and what to do); 1 an unexpected failure (a bug: a traceback follows); 130
interrupted (Ctrl-C); 141 the reader closed the pipe (`| head`)."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where there is one worth saying (not None or False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse with our error contract: `--json` gets `{"error": {...}}`, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from memory_agent.errors import ErrorInfo

        info = ErrorInfo("invalid", message, f"see `{self.prog} --help`")
        if "--json" in sys.argv[1:]:
            print(json.dumps({"error": info.as_json()}, ensure_ascii=False))
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {info.code}: {message}\n  fix: {info.fix}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memory-agent",
        description="Long-term memory for coding agents: a Markdown knowledge base in git, "
        "searched through a resident daemon over MCP.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--home", help=HOME_HELP)
    parser.add_argument("--version", action="version", version=f"memory-agent {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    def command(name: str, func, help: str, description: str | None = None):
        p = sub.add_parser(
            name,
            help=help,
            description=description or help,
            epilog=EXIT_CODES,
            formatter_class=_Help,
        )
        p.add_argument(
            "--json",
            action="store_true",
            help='print one JSON object on stdout (errors: {"error": {code, message, fix}})',
        )
        p.add_argument("--home", default=argparse.SUPPRESS, help=HOME_HELP)
        p.set_defaults(func=func)
        return p

    p = command(
        "init",
        cmd_init,
        "create (or adopt) the home and its git knowledge base",
        "Create the home directory and kb/ as a git repository (an existing directory "
        "or repository is adopted, never overwritten), then build the index. Run it again "
        "with --embedder to switch models: the daemon of the old one is stopped.",
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        help="write this embedder to config.toml (a new home without it uses bge-m3 where "
        "the bge-m3 extra is installed, else minilm, the offline model)",
    )
    p.add_argument(
        "--demo", action="store_true", help="add the 79 demo entries (one commit, dated from now)"
    )
    p.add_argument(
        "--no-index", action="store_true", help="do not start the daemon to build the index now"
    )

    p = command(
        "connect",
        cmd_connect,
        "merge the MCP server, hooks and permission rule into an agent's settings files",
        "Show the change to AGENT's own settings files (the MCP server of this home, the "
        "capture hooks, the permission rule for the read-only memory tools); with --confirm, "
        "write it, keeping a backup of each file it changes. Running it again changes nothing; "
        "--remove takes out exactly what it put in. The files are found from $HOME "
        "($CLAUDE_CONFIG_DIR, $CODEX_HOME and $XDG_CONFIG_HOME are honoured).",
    )
    p.add_argument(
        "agent",
        choices=("claude-code", "codex", "opencode", "cursor"),
        help="the agent whose settings files get the MCP server, the hooks and the permission rule",
    )
    p.add_argument("--confirm", action="store_true", help="write the change (default: preview)")
    p.add_argument("--remove", action="store_true", help="take memory-agent's settings out")

    p = command("add", cmd_add, "add an entry (dedup, validate, write, commit, index)")
    p.add_argument("--title", required=True, help="one line saying the point (at most 200 chars)")
    p.add_argument("--type", default="note", help=f"the kind of entry: {TYPES_HELP}")
    p.add_argument("--tag", action="append", help="a tag (a short word); repeat for more")
    p.add_argument("--body", help="the Markdown text (default: read stdin)")
    p.add_argument(
        "--request-id", help="any unique string: retrying with the same id returns the first reply"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write even past a near-duplicate (named in the commit message)",
    )
    p.add_argument(
        "--link",
        action="append",
        metavar="KIND:ID",
        help="a typed link to an existing entry (references, derived_from, contained_in, "
        "contradicts), e.g. derived_from:old-entry-id; repeatable",
    )

    p = command("get", cmd_get, "show one entry, read from disk")
    p.add_argument("id", help="the entry's id, as search shows it")

    p = command("search", cmd_search, "search the knowledge base and the read-only corpora")
    p.add_argument("query", help="what you are looking for, in plain words")
    p.add_argument("--limit", type=int, default=8, help="how many hits (1 to 50)")
    p.add_argument("--type", action="append", help=f"only this type ({TYPES_HELP}); repeatable")
    p.add_argument("--tag", action="append", help="only entries with this tag; repeatable")
    p.add_argument("--kb-only", action="store_true", help="leave out the read-only corpora")
    p.add_argument(
        "--include-archived", action="store_true", help="include archived entries (marked)"
    )
    p.add_argument(
        "--episodes", action="store_true", help="include episodes (captured agent turns)"
    )
    p.add_argument("--as-of", metavar="YYYY-MM-DD", help="search the memory as it stood that day")
    p.add_argument(
        "--explain", action="store_true", help="show each channel's rank and every ranking signal"
    )

    p = command(
        "supersede",
        cmd_supersede,
        "replace an entry with a new one (preview first)",
        "Write a new entry that supersedes OLD_ID and mark OLD_ID superseded, in one "
        "commit. Without --confirm, show both files as they would be written.",
    )
    p.add_argument("old_id", help="the id of the entry to replace")
    p.add_argument("--title", required=True, help="the new entry's title (one line)")
    p.add_argument("--body", help="the new entry's text (default: read stdin)")
    p.add_argument("--type", help=f"the new entry's type ({TYPES_HELP}; default: the old one's)")
    p.add_argument("--tag", action="append", help="a tag; repeatable (default: the old tags)")
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument("--request-id", help="retrying with the same id returns the first reply")
    p.add_argument("--force", action="store_true", help="write even past a near-duplicate")
    p.add_argument(
        "--link",
        action="append",
        metavar="KIND:ID",
        help="the new entry's typed links (default: the old entry's), e.g. references:other-id",
    )

    p = command("archive", cmd_archive, "retire an entry with a reason (preview first)")
    p.add_argument("id", help="the id of the entry to retire")
    p.add_argument("--reason", required=True, help="why it is retired (kept in the file)")
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument("--request-id", help="retrying with the same id returns the first reply")

    command("status", cmd_status, "index generation, consistency, sources, pending writes")
    command(
        "rebuild",
        cmd_rebuild,
        "build a fresh index generation from the files (searches go on meanwhile)",
    )
    command(
        "stop",
        cmd_stop,
        "stop this home's daemon and wait for it to exit (it finishes the write in flight)",
    )

    p = command("history", cmd_history, "the supersede chain through an entry, oldest first")
    p.add_argument("id", help="any entry of the chain")

    p = command("importance", cmd_importance, "say how much an entry matters (1-10)")
    p.add_argument("id", help="the entry's id")
    p.add_argument("importance", type=int, help="1 (minor) to 10 (must not be missed)")
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
        "scrub",
        cmd_scrub,
        "redact what earlier versions stored (journal, usage events, inbox); list auto lessons",
        "Run today's redaction over everything captured so far: the journal (plain and "
        "gzipped files, rewritten crash-safely), the usage events and the gate's inbox, then "
        "rebuild the index so no old episode text stays searchable. Lists the lessons the gate "
        "wrote by itself (source: auto) with the command that archives each. Idempotent; the "
        "daemon runs it once at its first start after an upgrade.",
    )
    p.add_argument(
        "--no-rebuild", action="store_true", help="do not rebuild the index after the scrub"
    )

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
        help="exit after this many idle seconds (default: the idle_exit setting; 0 = never)",
    )
    p.add_argument("--foreground", action="store_true", help="also log to stderr")

    p = command(
        "ui",
        cmd_ui,
        "browse the memory in a web page on 127.0.0.1 (prints the URL with its token)",
        "Serve the memory browser: an overview, search with every ranking signal drawn, each "
        "entry with its history and git diffs, the captured sessions and the gate's inbox. "
        "Reads through the daemon, writes only through the gateway (preview, then confirm). "
        "Loopback only; the printed URL carries a random token (then a cookie). Ctrl-C stops.",
    )
    p.add_argument("--port", type=int, default=8780, help="TCP port (0: any free port)")

    p = command(
        "web",
        cmd_web,
        "run the regulation Q&A web app (legal_web) on 127.0.0.1",
        "Serve the policy/regulation Q&A app: a page and a JSON API answering "
        "questions from knowledge bases of regulation documents, with cited passages. Prints "
        "the URL; Ctrl-C stops it.",
    )
    p.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port)")
    p.add_argument("--data", help="folder of knowledge bases (default: the bundled samples)")
    p.add_argument("--web-home", help="where its index lives (default: under ~/.cache/legal_web)")

    p = command(
        "hook",
        cmd_hook,
        "what an agent's hook runs: capture a turn, inject recall (always exits 0)",
        "Read a hook's JSON on stdin (Claude Code's format; Codex's is the same; the opencode "
        "plugin sends it too), write the turn to the journal (redacted), and for prompt and "
        "session-start print the memory to inject as hookSpecificOutput.additionalContext. "
        "Whatever fails, or past hook_budget_ms, it exits 0 with no output and logs to "
        "<home>/run/hooks.log. `memory-agent init` prints the settings that call it.",
    )
    p.add_argument(
        "event",
        nargs="?",
        help="session-start, prompt, tool, tool-failure, denied, stop or session-end "
        "(default: the input's hook_event_name)",
    )
    p.add_argument("--client", help="claude-code (default), codex or opencode")

    command(
        "proposals",
        cmd_proposals,
        "lessons the ingest gate proposes (when gate = propose)",
    )
    p = command("accept", cmd_accept, "write a proposed lesson into the knowledge base")
    p.add_argument("id", help="a proposal id from `memory-agent proposals`")
    p = command("reject", cmd_reject, "drop a proposed lesson for good")
    p.add_argument("id", help="a proposal id from `memory-agent proposals`")
    p.add_argument("--reason", required=True, help="why it is wrong or not worth keeping")
    command(
        "gate",
        cmd_gate,
        "run the ingest gate now (it also runs after each agent turn)",
        "Look through the journal for failures that a change fixed, recurring across sessions, "
        "and promote (gate = auto) or propose (gate = propose) each such lesson once.",
    )

    command(
        "proxy",
        cmd_proxy,
        "the stdio MCP server an agent launches (forwards to the daemon)",
        "Speak MCP (JSON-RPC lines) on stdin/stdout and forward every message to the home's "
        "daemon, starting it if needed. This is what goes in your agent's MCP settings.",
    )

    p = command(
        "eval",
        cmd_eval,
        "score retrieval on a benchmark folder (corpus.jsonl, queries.jsonl, qrels.tsv)",
        "Index BENCH_DIR/corpus.jsonl in a temporary home through the production "
        "indexing path, run BENCH_DIR/queries.jsonl through the search path of a tool call "
        "(the default filter, then the ranking with empty usage stats), and "
        "print Recall@5, Recall@10, MRR@10, nDCG@10, query latency p50/p95 and index time. "
        "Embeddings are cached in $MEMORY_AGENT_CACHE (default <home>/cache), so a second run "
        "of the same corpus embeds nothing.",
    )
    p.add_argument("bench_dir", metavar="BENCH_DIR", help="a folder in the bench format")
    p.add_argument("--embedder", choices=EMBEDDERS, help="embedding model (default: the config)")
    p.add_argument("--cache", help="embedding cache directory (default: $MEMORY_AGENT_CACHE)")
    p.add_argument("--run-out", metavar="FILE", help="write the ranking of every query as JSONL")
    p.add_argument("--max-queries", type=int, help="score only the first N queries")
    p.add_argument(
        "--by",
        metavar="FIELD",
        help="also print the metrics per value of this field of queries.jsonl "
        "(LoCoMo: --by category)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    from memory_agent.errors import describe, for_cli

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"] and not {"-h", "--help"} & set(argv):
        from memory_agent.capture.hooks import main as hook_main  # the fast path: no parser, stdlib

        return hook_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"\nmemory-agent {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of ours
        from memory_agent.procs import stdout_closed

        return stdout_closed()
    except Exception as exc:
        info = describe(exc, log_hint="the traceback above")
        if info.code == "internal":
            import traceback

            traceback.print_exc()
        message, fix = for_cli(info.message), for_cli(info.fix)
        if getattr(args, "json", False):
            out = {"code": info.code, "message": message, "fix": fix}
            print(json.dumps({"error": out}, ensure_ascii=False))
        print(
            f"memory-agent {args.command}: {info.code}: {message}"
            + (f"\n  fix: {fix}" if fix else ""),
            file=sys.stderr,
        )
        return 1 if info.code == "internal" else 2


if __name__ == "__main__":
    sys.exit(main())
