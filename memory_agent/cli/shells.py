"""What every command shell shares: the home and the daemon client from the arguments, one tool
call, the `--link`/`--body` arguments, printing a reply (JSON or for a person) and the progress
line on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memory_agent import config as config_mod


def progress(stage: str, done: int, total: int) -> None:
    print(
        f"\r{stage}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True
    )


def home_dir(args: argparse.Namespace) -> Path:
    return config_mod.load({"home": args.home}).home_dir


def daemon_client(args: argparse.Namespace):
    from memory_agent.client import DaemonClient
    from memory_agent.kb.home import Home

    home = home_dir(args)
    Home(home).require()
    return DaemonClient(home)


def call(args: argparse.Namespace, name: str, **arguments) -> dict:
    """One tool call through the daemon, from the project of `--project` (a folder, a name
    or an identity) or of the working directory."""
    import os

    where = getattr(args, "project", None)
    if where and os.path.isdir(where):
        where = os.path.abspath(where)
    return daemon_client(args).call_tool(
        name, {k: v for k, v in arguments.items() if v is not None}, where=where
    )


def links_arg(args: argparse.Namespace) -> dict[str, list[str]] | None:
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


def body_arg(args: argparse.Namespace) -> str:
    from memory_agent.errors import Invalid

    if args.body is not None:
        return args.body
    if sys.stdin is None or sys.stdin.isatty():
        raise Invalid("body: missing", "give it with --body TEXT or on stdin")
    return sys.stdin.read()


def emit(args: argparse.Namespace, reply: dict, human) -> int:
    if args.json:
        print(json.dumps(reply, ensure_ascii=False))
    else:
        human(reply)
    return 0


def emit_write(args: argparse.Namespace, reply: dict, human=None) -> int:
    """A write's reply, printed; a refusal as a duplicate exits 2 like every refusal (nothing
    was written), so a script or a person sees it without reading the text."""
    emit(args, reply, human or print_write)
    return 2 if reply.get("status") == "duplicate" else 0


def print_write(reply: dict) -> None:
    status = reply.get("status")
    if status == "duplicate":
        dup = reply["duplicate_of"]
        print(
            f"refused: duplicate of {dup} (score {reply['score']}, {reply.get('match')}); "
            "nothing written"
        )
        from memory_agent.errors import for_cli

        hint = reply.get("next") or (  # (a daemon of an older version says nothing more)
            f"to change what {dup} says: memory_supersede {dup}"
            + (
                ", or force=true if yours is a different thing"
                if reply.get("match") == "near"
                else ""
            )
        )
        print(f"  next: {for_cli(hint)}")
    elif status == "preview":
        for path, text in reply["preview"].items():
            print(f"--- would write {path}\n{text}")
        print("nothing written; run again with --confirm to write")
    else:
        print(
            f"{status}: {reply['id']}  commit {str(reply.get('commit'))[:12]}  "
            f"index {reply.get('generation')}"
        )
