"""The commands that set up, run and look after a home: init and connect, status, rebuild, gc,
scrub and the gate, and the long-running processes (daemon, proxy, browser, the legacy web app,
the hook command)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memory_agent import config as config_mod
from memory_agent.cli.endpoint import checked_endpoint
from memory_agent.cli.shells import call, daemon_client, emit, home_dir
from memory_agent.errors import MemoryAgentError
from memory_agent.files import replacing


def cmd_init(args: argparse.Namespace) -> int:
    from memory_agent.client import DaemonClient
    from memory_agent.config import installed_embedder
    from memory_agent.index.memory import Memory
    from memory_agent.serve.mcp_config import client_configs, hook_configs

    cfg = config_mod.load({"home": args.home})
    endpoint, model_id = checked_endpoint(args, cfg)  # before anything is written
    # A new home records the model it starts with, so installing the bge-m3 extra later does
    # not switch an existing index's model under it.
    pin = args.embedder or (None if (cfg.home_dir / "kb").exists() else cfg.embedder)
    weights = None
    if (args.embedder or cfg.embedder) == "minilm" and not cfg.model_path:
        # MiniLM's weights before anything is created: found, or fetched now with a progress
        # bar on stderr; offline, one error whose fix brings them from elsewhere
        from memory_agent.serve.model import fetch_minilm
        from ragcore import StreamProgress

        weights = fetch_minilm(cfg, StreamProgress(sys.stderr))
    if args.embedder == "bge-m3" and installed_embedder() != "bge-m3":
        from memory_agent.errors import NotReady
        from ragcore import BGE_M3_EXTRA_FIX

        raise NotReady(  # before anything is written: the home keeps its embedder
            "BGE-M3 needs the bge-m3 extra (FlagEmbedding and torch), which is not installed; "
            f"nothing changed (the embedder stays {cfg.embedder})",
            f"{BGE_M3_EXTRA_FIX}; then `memory-agent init --embedder bge-m3` again",
        )
    config_file = cfg.home_dir / "config.toml"
    config_before = config_file.read_bytes() if config_file.is_file() else None
    reply = Memory(cfg).init(demo=args.demo, embedder=pin, sync=False, settings=endpoint)
    reply["weights"] = weights
    if model_id:
        reply["model_id"] = model_id
    client = DaemonClient(cfg.home_dir)
    health = client.health()
    served = config_mod.load({"home": args.home})
    if health is not None and (
        health.get("embedder") != reply["embedder"]
        or health.get("embedding_endpoint") != config_mod.endpoint_of(served)
    ):
        # The running daemon serves the old embedder (or another endpoint or model): replace
        # it, or the new setting would not take effect (and its error would repeat).
        client.stop(wait=True)
        reply["restarted_daemon"] = health.get("pid")
    if not args.no_index:
        # The daemon owns the index: it builds it on this first call.
        try:
            reply["index"] = client.admin("refresh")
        except MemoryAgentError as exc:
            switched = (served.embedder, config_mod.endpoint_of(served)) != (
                cfg.embedder,
                config_mod.endpoint_of(cfg),
            )
            if not switched or exc.code not in ("not_ready", "model", "config"):
                raise
            # the new embedder does not load: a switch that fails changes nothing
            if config_before is None:
                config_file.unlink(missing_ok=True)
            else:
                with replacing(config_file) as fh:
                    fh.write(config_before)
            client.stop(wait=True)  # it runs the model that failed; the next call starts anew
            exc.message = f"{exc.message}; nothing changed (the embedder stays {cfg.embedder})"
            exc.fix = f"{exc.fix}; then `memory-agent init --embedder {served.embedder}` again"
            exc.args = (exc.message,)
            raise
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
        if r.get("model_id"):
            print(f"the endpoint answered: model id {r['model_id']}")
        if (r.get("weights") or {}).get("downloaded"):
            print(f"downloaded MiniLM's weights into {r['weights']['folder']}")
        if r.get("index"):  # None with --no-index
            i = r["index"]
            print(
                f"embedder {r['embedder']}; index {i['generation']}: {i['entries']} entries, "
                f"{'consistent' if i['consistent'] else 'INCONSISTENT'}"
            )
            for problem in i.get("problems") or []:
                print(f"  ! {problem}")
            if not i["consistent"]:
                print("  fix: memory-agent rebuild (a fresh index from the files)")
        if r["embedder"] == "minilm" and installed_embedder() == "minilm":
            print(
                "(minilm: the offline English model. For BGE-M3, multilingual: "
                "scripts/setup --extras bge-m3 in the clone (see the README's Install), "
                "then memory-agent init --embedder bge-m3 and memory-agent rebuild)"
            )
        if not getattr(args, "print_config", False):
            print(
                "\nNext, connect your agent (a preview of the change to its settings files "
                "first, then --confirm):\n  memory-agent connect claude-code   (or codex, "
                "opencode, cursor)\n`memory-agent init --print-config` prints the same settings "
                "to paste by hand; `memory-agent --help` lists every command by job."
            )
            return
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

    return emit(args, reply, human)


def cmd_connect(args: argparse.Namespace) -> int:
    from memory_agent.serve.connect import connect

    cfg = config_mod.load({"home": args.home})
    reply = connect(args.agent, cfg.home_dir, confirm=args.confirm, remove=args.remove)
    reply["home"], reply["home_exists"] = str(cfg.home_dir), (cfg.home_dir / "kb").is_dir()
    if not reply["home_exists"] and not args.remove:  # a typo in --home, or no init yet
        reply["notes"].insert(
            0,
            f"there is no memory at {cfg.home_dir} yet: until `memory-agent init --home "
            f"{cfg.home_dir}` makes it, every memory tool answers not_ready (a typo in --home?)",
        )

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

    return emit(args, reply, human)


def cmd_doctor(args: argparse.Namespace) -> int:
    from memory_agent.serve.doctor import diagnose

    cfg = config_mod.load({"home": args.home})
    lines = diagnose(cfg.home_dir, start=not args.no_start)
    bad = [x for x in lines if not x["ok"]]
    reply = {"ok": not bad, "checks": lines}

    def human(r: dict) -> None:
        for x in r["checks"]:
            print(f"{'ok ' if x['ok'] else 'FIX'}  {x['check']:16s} {x['message']}")
            if not x["ok"] and x["fix"]:
                print(f"{'':21s}fix: {x['fix']}")
        print("all good" if r["ok"] else f"{len(bad)} to fix")

    emit(args, reply, human)
    return 0 if not bad else 1


def cmd_status(args: argparse.Namespace) -> int:
    reply = call(args, "memory_index_status")

    def human(r: dict) -> None:
        state = "consistent" if r["consistent"] else "INCONSISTENT: " + "; ".join(r["problems"])
        print(
            f"index {r['generation']} ({state}): {r['entries']} entries, {r['points']} points, "
            f"embedder {r['embedder']}"
        )
        if r.get("embedding_url"):
            print(f"  embedding endpoint {r['embedding_url']}, model {r['embedding_model']}")
        if r.get("indexed_commit"):
            print(f"  the index reflects KB commit {r['indexed_commit'][:12]}")
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
        for reader in r.get("readers") or []:  # read_processes (ADR 0028)
            answered = f", {reader['searches']} searches" if "searches" in reader else ""
            print(
                f"  reader {reader['slot']}: {reader['state']} (pid {reader.get('pid', '-')}, "
                f"started {reader['starts']} time(s){answered})"
            )
        print_waiting(r.get("remote") or {})
        clients = r.get("clients") or {}
        for name, last in clients.items():
            print(f"  agent {name:12s} last hook event {last['event']} at {last['at']}")
        if "clients" in r and not clients:
            print("  no agent hook has run yet (see `memory-agent connect`)")

    return emit(args, reply, human)


def print_waiting(remote: dict) -> None:
    """What sync left for a person, in `status`: each KB's forks and variants, and the ids its
    rounds renamed since a person last looked (`memory-agent sync` or `remote` shows more)."""
    from memory_agent.cli.sync import fork_line, renamed_line, when

    for kb in [remote, *(remote.get("kbs") or [])]:
        if not kb.get("remote"):
            continue
        name = f" (kb {kb['kb']})" if kb.get("kb") not in (None, "personal") else ""
        print(f"  remote{name} {kb['remote']}: last sync {when(kb.get('last_sync'))}")
        if kb.get("last_error"):
            print(f"      ! {kb['last_error']['code']}: {kb['last_error']['message']}")
        for x in (kb.get("since_last_look") or {}).get("renamed") or []:
            print("    " + renamed_line(x).strip())
        for fork in kb.get("forks") or []:
            print("    " + fork_line(fork).strip())
        for v in kb.get("variants") or []:
            print(f"    variant: kb/{v['variant']} (another machine's text of {v['path']})")


def cmd_rebuild(args: argparse.Namespace) -> int:
    reply = daemon_client(args).admin("rebuild")
    return emit(
        args,
        reply,
        lambda r: print(
            f"built {r['generation']}: {r['documents']} documents, {r['chunks']} chunks in "
            f"{r['seconds']} s"
        ),
    )


def cmd_gc(args: argparse.Namespace) -> int:
    dry = "1" if args.dry_run else "0"
    confirm = "1" if args.confirm else "0"
    reply = daemon_client(args).admin(f"gc?dry_run={dry}&confirm={confirm}")

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

    return emit(args, reply, human)


def cmd_stop(args: argparse.Namespace) -> int:
    from memory_agent.client import DaemonClient

    client = DaemonClient(home_dir(args))
    stopped, pid = client.stop(wait=True)
    reply = {"stopped": stopped, "pid": pid}
    return emit(
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
        print(
            "  index:   "
            + (
                "unchanged (no journal record changed)"
                if not j["lines"]
                else "not rebuilt (--no-rebuild): run `memory-agent rebuild`"
            )
        )
    elif "error" in index:
        print(f"  index:   NOT rebuilt ({index['error']}); fix: {index['fix']}")
    else:
        print(f"  index:   rebuilt {index['generation']}: episodes follow the scrubbed journal")
    lessons = r["auto_lessons"]
    if not lessons:
        print("no lesson written by the gate (source: auto) to review")
        return
    print(
        f"{len(lessons)} lesson(s) the gate wrote by itself (source: auto): review each; "
        "archive one with the command under it"
    )
    for lesson in lessons:
        print(f"  {lesson['id']}: {lesson['title']}\n    {lesson['archive']}")


def cmd_scrub(args: argparse.Namespace) -> int:
    from memory_agent.kb.home import Home
    from memory_agent.serve import scrub

    home = home_dir(args)
    Home(home).require()
    reply = scrub.scrub_command(home, rebuild=not args.no_rebuild)
    return emit(args, reply, _print_scrub)


def cmd_gate(args: argparse.Namespace) -> int:
    reply = daemon_client(args).admin("gate")

    def human(r: dict) -> None:
        print(
            f"gate ({r['mode']}): {len(r['promoted'])} promoted, {len(r['proposed'])} "
            f"proposed, {len(r['reinforced'])} reinforced"
        )
        for entry in r["promoted"]:
            print(f"  promoted {entry}")
        for key in r["proposed"]:
            print(f"  proposed {key}")

    return emit(args, reply, human)


def cmd_daemon(args: argparse.Namespace) -> int:
    from memory_agent.serve.daemon import run_daemon

    return run_daemon(
        args.home, preload=args.preload, idle_exit=args.idle_exit, foreground=args.foreground
    )


def cmd_reader(args: argparse.Namespace) -> int:
    from memory_agent.serve.reader import run_reader

    return run_reader(args.home, args.slot)


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

    return serve(home_dir(args), args.port, ready=ready)


def cmd_proxy(args: argparse.Namespace) -> int:
    from memory_agent.proxy import run_proxy

    return run_proxy(home_dir(args))


def cmd_hook(args: argparse.Namespace) -> int:  # reached when options come before `hook`
    from memory_agent.capture.hooks import main as hook_main

    argv = [a for a in (args.event,) if a] + ["--home", str(home_dir(args))]
    return hook_main(argv + (["--client", args.client] if args.client else []))


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
