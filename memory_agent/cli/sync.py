"""The commands on the knowledge base beyond this machine: `remote` (show or set the KB's git
remote), `sync` (a round now, with its progress), `kb` (the KBs of a home: a team's shared
one added, listed, removed) and `secrets allow` (a finding of the secret check released as not
a secret). Each a thin shell over the daemon's admin routes."""

from __future__ import annotations

import argparse
import json
import os

from memory_agent.cli.shells import daemon_client, emit


def add_commands(command) -> None:
    """Declare remote, sync and kb on the argument tree (`command` is main's helper)."""
    p = command(
        "remote",
        cmd_remote,
        "show or set the git remote the knowledge base syncs with",
        "Without arguments, show the KB's remote, the last sync, how many commits are ahead "
        "and behind, and anything waiting for a person (forks, variants, a stop). `remote set "
        "URL` sets it: any URL git accepts (a path, ssh, https); credentials are git's "
        "business (ssh agent, credential helper) and are never stored here. The daemon then "
        "syncs on its own every sync_interval seconds, shortly after a write and at a session's "
        "start.",
    )
    p.add_argument(
        "action", nargs="?", choices=("set", "show"), default="show", help="show (default) or set"
    )
    p.add_argument("url", nargs="?", help="with set: the remote's URL")

    p = command(
        "sync",
        cmd_sync,
        "sync the knowledge base with its git remote now (fetch, replay, push - never force)",
        "One round now: fetch the remote; replay this machine's unpushed commits on top of it "
        "(off the working tree; conflicts resolved by meaning, nothing lost, no conflict "
        "markers); move the branch under the write lock, keeping a rescue ref of the old head "
        "(refs/memory-agent/rescue/...); scan the commits to publish for secrets; push. Exits "
        "non-zero naming the fix when the remote is unreachable, a commit holds a secret, or "
        "the remote's history was rewritten. Every KB of the home with a remote gets a round "
        "(a KB added read-only only pulls); --kb NAME syncs that one alone.",
    )
    p.add_argument("--kb", help="sync this KB alone (personal, or a name `kb list` shows)")

    p = command(
        "kb",
        cmd_kb,
        "list, add, remove or fan out the knowledge bases of this home (a team's shared KB)",
        "`kb list` (default): the personal KB and those added, with their remotes and entry "
        "counts. `kb add NAME URL [--read-only]`: clone a shared KB (an empty remote gets a first "
        "commit, pushed), index its entries (ids NAME:<id>) and sync it with the rest. `kb "
        "remove NAME`: refused while it holds commits no remote has (run `memory-agent sync "
        "--kb NAME` first); the clone is moved to <home>/kbs/.removed/, never deleted, and its "
        "entries leave the index. `kb fanout [NAME] [--confirm]`: move a large KB's entries "
        "from kb/<type>/<id>.md to kb/<type>/<xx>/<id>.md (256 subfolders per type) in one "
        "commit, file contents unchanged - git rewrites a changed folder's listing at every "
        "commit, ~1-2 s per add at a million entries in one folder; a preview first.",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("list", "add", "remove", "fanout"),
        default="list",
        help="list (default), add, remove or fanout",
    )
    p.add_argument("name", nargs="?", help="with add, remove, fanout: the KB's name, such as team")
    p.add_argument("url", nargs="?", help="with add: the shared repository's URL")
    p.add_argument(
        "--read-only", action="store_true", help="with add: search it, never write or push to it"
    )
    p.add_argument("--confirm", action="store_true", help="with fanout: move (default: preview)")

    p = command(
        "secrets",
        cmd_secrets,
        "release a finding of the secret check that is not a secret (by its fingerprint)",
        "`secrets allow FINGERPRINT --reason TEXT`: a write or a push refused for what looks "
        "like a secret names the finding's fingerprint (<kind>:<16 hex>). If it is not a "
        "secret (a documentation snippet, a test value), this adds the fingerprint and the "
        "reason to the KB's allow-list, kb/.memory-agent-allow, in one commit that is pushed "
        "and reviewed like any write; the refused write or push then goes through. Only the "
        "fingerprint is stored, never the value. A real secret is never released: take it out.",
    )
    p.add_argument("action", choices=("allow",), help="allow: release one finding")
    p.add_argument("fingerprint", help="the finding's fingerprint, as the error named it")
    p.add_argument("--reason", required=True, help="why it is not a secret (kept beside it)")
    p.add_argument("--kb", help="the KB whose allow-list it goes to (default: personal)")


def cmd_secrets(args: argparse.Namespace) -> int:
    """`memory-agent secrets allow FP --reason ...`: the daemon's /admin/allow-secret."""
    payload = {"fingerprint": args.fingerprint, "reason": args.reason, "kb": args.kb}
    reply = daemon_client(args).admin("allow-secret", payload=payload)

    def human(r: dict) -> None:
        if r["status"] == "unchanged":
            print(f"{r['fingerprint']} is already on the allow-list ({r['path']})")
        else:
            print(f"allowed {r['fingerprint']} in {r['path']}: commit {r['commit'][:12]}")

    return emit(args, reply, human)


def local_url(url: str) -> str:
    """A remote named by a path that exists here, made absolute: the daemon and git (run in
    the KB) would read a relative path from their own folders, not the shell's."""
    if url and "://" not in url and os.path.exists(url):
        return os.path.abspath(url)
    return url


def cmd_remote(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    from memory_agent.errors import Invalid

    client = daemon_client(args)
    if args.action == "set":
        if not args.url:
            raise Invalid(
                "remote set: no URL", "memory-agent remote set URL (a path, ssh or https)"
            )
        reply = client.admin(f"remote?url={quote(local_url(args.url), safe='')}")
        return emit(args, reply, lambda r: print(f"remote: {r['remote']} (branch {r['branch']})"))
    reply = client.admin("remote?look=1", method="GET")  # a person looks: rounds now seen
    return emit(args, reply, print_remote)


def when(ts: object) -> str:
    """A record's time (seconds since the epoch) as a date a person reads, in UTC."""
    import datetime as dt

    if not isinstance(ts, (int, float)):
        return str(ts or "never")
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fork_line(fork: dict) -> str:
    return (
        f"  fork: {fork['id']} was superseded on two machines, by "
        f"{' and '.join(fork['successors'])} - `memory-agent resolve {fork['id']}` shows both "
        "and keeps one or merges them"
    )


def renamed_line(x: dict) -> str:
    return (
        f"  renamed: this machine's new entry {x['id']} is now {x['replayed_as']} (the other "
        f"machine had made an entry {x['id']} first; links to it were rewritten)"
    )


def print_since(s: dict | None, indent: str = "  ") -> None:
    """What the rounds of sync did since a person last looked (`sync.rounds`)."""
    if not s:
        return
    span = when(s["since"]) if s["rounds"] == 1 else f"{when(s['since'])} to {when(s['until'])}"
    came = f" ({s['entries_in']} entry file(s) came in)" if s.get("entries_in") else ""
    print(
        f"{indent}since you last looked, {s['rounds']} round(s) of sync ({span}; the daemon runs "
        f"them on its own): pulled {s['pulled']} commit(s){came}, pushed {s['pushed']} commit(s)"
    )
    for x in s.get("renamed") or []:
        print(indent + renamed_line(x).lstrip())
    for fork in s.get("forks") or []:
        print(indent + fork_line(fork).lstrip())
    for v in s.get("variants") or []:
        print(f"{indent}variant kept: kb/{v['variant']} ({v['why']})")


def print_remote(r: dict) -> None:
    print_one_remote(r)
    for other in r.get("kbs") or []:  # the KBs added beside the personal one
        print(f"kb {other['kb']}:", end=" ")
        print_one_remote(other)


def print_one_remote(r: dict) -> None:
    if not r.get("remote"):
        print("no remote: `memory-agent remote set URL` shares this KB through git")
        return
    print(f"remote {r['remote']} (branch {r['branch']})")
    ahead, behind = r.get("ahead"), r.get("behind")
    print(
        f"  ahead {ahead if ahead is not None else '?'}, behind {behind}; last sync "
        f"{when(r.get('last_sync'))}"
    )
    if r.get("last_error"):
        e = r["last_error"]
        print(f"  last error ({when(e.get('at'))}): {e['code']}: {e['message']}\n  fix: {e['fix']}")
    if r.get("stopped"):
        print(f"  STOPPED: {r['stopped']}")
    print_since(r.get("since_last_look"))
    for fork in r.get("forks") or []:
        print(fork_line(fork))
    for v in r.get("variants") or []:
        print(
            f"  variant: kb/{v['variant']} (another machine's text of {v['path']}; the "
            "served one is upstream's - merge what matters by hand, then delete the variant)"
        )


SYNC_WAIT_S = 6 * 3600.0  # a first sync of a large remote embeds for minutes; progress shows it
PROGRESS_EVERY_S = 1.0


def cmd_sync(args: argparse.Namespace) -> int:
    """One round now; while it embeds incoming entries, their count so far goes to stderr."""
    import sys
    import threading
    from urllib.parse import quote

    kb = getattr(args, "kb", None)
    client = daemon_client(args)
    client.timeout = SYNC_WAIT_S
    result: dict = {}

    def round_() -> None:
        try:
            result["reply"] = client.admin(
                f"remote-sync?kb={quote(kb, safe='')}" if kb else "remote-sync"
            )
        except Exception as exc:  # noqa: BLE001 - raised again on the CLI's thread
            result["error"] = exc

    worker = threading.Thread(target=round_, name="sync", daemon=True)
    worker.start()
    shown = None
    while worker.join(PROGRESS_EVERY_S) or worker.is_alive():
        try:  # a plain request: it never starts a daemon (the round's call does that)
            _, _, data = client.request("GET", "/admin/remote", timeout=10.0)
            progress = json.loads(data).get("progress")
        except Exception:  # noqa: BLE001 - progress is a courtesy; the round's reply decides
            continue
        if progress and progress != shown:
            print(
                f"sync: embedding incoming entries {progress['done']}/{progress['of']}",
                file=sys.stderr,
                flush=True,
            )
            shown = progress
    if "error" in result:
        raise result["error"]
    reply = result["reply"]

    def human(r: dict) -> None:
        if "branch" in r:
            one(r)
        for other in r.get("kbs") or []:
            if other.get("error"):
                e = other["error"]
                print(f"kb {other['kb']}: {e['code']}: {e['message']}")
            else:
                one(other)

    def one(r: dict) -> None:
        name = f"kb {r['kb']}: " if r.get("kb") not in (None, "personal") else ""
        print(
            f"{name}synced {r['branch']}: this round pulled {r['pulled']}, pushed "
            f"{r['pushed']}, replayed {r['replayed']} commit(s)"
            f"{' (joined the remote history)' if r['joined'] else ''}"
        )
        if r.get("not_pushed"):
            print(f"  {r['not_pushed']} local commit(s) not pushed: the KB was added read-only")
        since = r.get("since_last_look")
        if since is None:  # (a daemon of an older version: this round's own lists)
            since = {"rounds": 0, "renamed": r.get("renamed"), "forks": r.get("forks")}
            since["variants"] = r.get("variants")
        if since.get("rounds"):
            print_since(since)
        else:
            for x in since.get("renamed") or []:
                print(renamed_line(x))
            for fork in since.get("forks") or []:
                print(fork_line(fork))
            for v in since.get("variants") or []:
                print(f"  variant kept: kb/{v['variant']} ({v['why']})")

    return emit(args, reply, human)


def print_fanout(r: dict) -> None:
    where = f"kb {r['kb']} ({r['kb_dir']})"
    if r["status"] == "preview":
        kinds = ", ".join(f"{n} {t}" for t, n in r["by_type"].items()) or "no entries"
        print(f"{where}: {r['moves']} files to move into <type>/<xx>/<id>.md ({kinds})")
        for m in r["examples"]:
            print(f"  {m['from']} -> {m['to']}")
        state = "is fanned out already" if r["fanned_out"] else "is flat"
        print(f"it {state}; nothing moved: add --confirm to move them in one commit")
    elif r["status"] == "unchanged":
        print(f"{where} is fanned out: nothing to move")
    else:
        print(f"{where}: moved {r['moved']} files in commit {r['commit'][:12]}", end="")
        print(f"; {r.get('reindexed', 0)} entries indexed again (a move keeps its chunks)")
        for path in r["kept"]:
            print(f"  kept {path}: its id has a file in its new place too (fix by hand)")


def cmd_kb(args: argparse.Namespace) -> int:
    """`memory-agent kb [list|add|remove]`: a thin shell over the daemon's /admin/kb routes."""
    from urllib.parse import urlencode

    from memory_agent.errors import Invalid

    client = daemon_client(args)
    if args.action == "list":
        return emit(args, client.admin("kb", method="GET"), print_kbs)
    if args.action == "fanout":
        client.timeout = 4 * 3600.0  # moving and indexing a million files takes minutes
        query = {"kb": args.name or "", **({"confirm": "1"} if args.confirm else {})}
        return emit(args, client.admin("fanout?" + urlencode(query)), print_fanout)
    if not args.name:
        raise Invalid(f"kb {args.action}: no name", f"memory-agent kb {args.action} NAME ...")
    if args.action == "remove":
        reply = client.admin("kb-remove?" + urlencode({"name": args.name}))
        return emit(
            args,
            reply,
            lambda r: print(
                f"removed kb {r['kb']}"
                + (f"; its clone is kept at {r['moved_to']}" if r.get("moved_to") else "")
            ),
        )
    if not args.url:
        raise Invalid("kb add: no URL", "memory-agent kb add NAME URL (a path, ssh or https)")
    query = {
        "name": args.name,
        "url": local_url(args.url),
        **({"read_only": "1"} if args.read_only else {}),
    }
    reply = client.admin("kb?" + urlencode(query))

    def human(r: dict) -> None:
        print(
            f"added kb {r['name']} ({'writable' if r['writable'] else 'read-only'}) from "
            f"{r['remote']}: {r['entries']} entries, ids {r['name']}:<id>"
        )
        if (r.get("sync") or {}).get("error"):
            e = r["sync"]["error"]
            print(f"  its first sync failed: {e['code']}: {e['message']}\n  fix: {e['fix']}")

    return emit(args, reply, human)


def print_kbs(r: dict) -> None:
    for row in r.get("kbs") or []:
        print(
            f"{row['name']:<12} {'writable' if row['writable'] else 'read-only':<9} "
            f"{row['entries']:>5} entries  {row.get('remote') or 'no remote'}  {row['path']}"
        )
