"""The commands on entries: each calls one memory tool through the daemon, as an agent would,
and prints its reply."""

from __future__ import annotations

import argparse

from memory_agent.cli.shells import body_arg, call, emit, emit_write, links_arg, print_write


def cmd_add(args: argparse.Namespace) -> int:
    reply = call(
        args,
        "memory_add",
        title=args.title,
        body=body_arg(args),
        type=args.type,
        tags=args.tag or [],
        request_id=args.request_id,
        force=args.force or None,
        links=links_arg(args),
        scope=args.scope,
        kb=args.kb,
    )
    return emit_write(args, reply)


def cmd_supersede(args: argparse.Namespace) -> int:
    reply = call(
        args,
        "memory_supersede",
        old_id=args.old_id,
        title=args.title,
        body=body_arg(args),
        type=args.type,
        tags=args.tag,
        confirm=args.confirm,
        request_id=args.request_id,
        force=args.force or None,
        links=links_arg(args),
        scope=args.scope,
    )
    return emit_write(args, reply)


def cmd_archive(args: argparse.Namespace) -> int:
    reply = call(
        args,
        "memory_archive",
        id=args.id,
        reason=args.reason,
        confirm=args.confirm,
        request_id=args.request_id,
    )
    return emit_write(args, reply)


def cmd_get(args: argparse.Namespace) -> int:
    reply = call(args, "memory_get", id=args.id)

    def human(r: dict) -> None:
        print(f"{r['id']}  [{r['type']}, {r['status']}{'' if r['writable'] else ', read-only'}]")
        print(f"# {r['title']}\n")
        print(r["body"])
        print(f"\n({r['path']})")

    return emit(args, reply, human)


def cmd_search(args: argparse.Namespace) -> int:
    reply = call(
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
        scope=args.scope,
        kb=args.kb,
        min_score=args.min_score,
    )

    def human(r: dict) -> None:
        if r.get("degraded"):
            print(f"(degraded: {r['degraded']})")
        if not r["hits"]:
            print("no matches" + (" at or above --min-score" if args.min_score is not None else ""))
        for n, h in enumerate(r["hits"], start=1):
            ro = "" if h["writable"] else f" [read-only: {h['source']}]"
            if h.get("kb") not in (None, "personal"):
                ro += f" [kb {h['kb']}]"
            if h.get("scope", "global") != "global":
                ro += f" [{h['scope']}]"
            if h.get("status") == "archived":
                ro += " [archived]"
            similar = h.get("similarity")
            similar = f" (similarity {similar:.2f})" if similar is not None else ""
            print(
                f"{n:2d}. {h['score']:.3f}{similar}  {h['id']}  ({h['type']}){ro}\n"
                f"    {h['title']}\n    {h['snippet']}"
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
        if r.get("elsewhere"):
            print(
                f"more in other projects: {', '.join(r['elsewhere'])} have entries about this "
                "(--scope all, or --scope NAME)"
            )

    return emit(args, reply, human)


def cmd_history(args: argparse.Namespace) -> int:
    reply = call(args, "memory_history", id=args.id)

    def human(r: dict) -> None:
        for step in r["chain"]:
            reason = f"  ({step['reason']})" if step.get("reason") else ""
            print(f"{step['created']}  {step['id']}  [{step['status']}]  {step['title']}{reason}")

    return emit(args, reply, human)


def cmd_importance(args: argparse.Namespace) -> int:
    reply = call(
        args, "memory_set_importance", id=args.id, importance=args.importance, note=args.note
    )
    return emit(args, reply, lambda r: print(f"{r['id']}: importance {r['importance']}"))


def cmd_proposals(args: argparse.Namespace) -> int:
    reply = call(args, "memory_proposals")

    def human(r: dict) -> None:
        if not r["proposals"]:
            print("no proposals")
        for p in r["proposals"]:
            print(
                f"{p['id']}  {p['title']}\n    {len(p['episodes'])} episodes, "
                f"{len(p['sessions'])} sessions"
            )

    return emit(args, reply, human)


def cmd_accept(args: argparse.Namespace) -> int:
    return emit_write(args, call(args, "memory_accept", id=args.id))


def cmd_reject(args: argparse.Namespace) -> int:
    reply = call(args, "memory_reject", id=args.id, reason=args.reason)
    return emit(args, reply, lambda r: print(f"rejected {r['id']}: never proposed again"))


def cmd_project(args: argparse.Namespace) -> int:
    """The project a folder is in; its name in this memory's KB, if entries were written there.
    Reads git and kb/projects.yaml: no daemon."""
    import os
    from pathlib import Path

    from memory_agent import config
    from memory_agent.errors import NotFound
    from memory_agent.intake.projects import identify
    from memory_agent.kb.scopes import MAP_FILE, ScopeMap

    folder = os.path.abspath(args.dir)
    if not os.path.isdir(folder):
        raise NotFound(f"{folder} is not a folder", "name a folder inside the repository")
    project = identify(folder)
    kb = Path(os.path.expanduser(str(config.load({"home": getattr(args, "home", None)}).home)))
    kb = kb / "kb"
    name = ScopeMap.read(kb).name_of(project.identity) if project and kb.is_dir() else None
    reply = {
        "folder": folder,
        "project": project.identity if project else None,
        "root": project.root if project else None,
        "remote": project.remote if project else None,
        "local": project.local if project else None,
        "name": name,
    }

    def human(r: dict) -> None:
        if project is None:
            print(
                f"{folder}: not in a git repository - no project (entries written here are global)"
            )
            return
        print(project.describe())
        print(f"root: {project.root}")
        if name:
            print(f"name: {name} (kb/{MAP_FILE})")
        else:
            print(f"name: none yet (given when the first entry is written here; kb/{MAP_FILE})")

    return emit(args, reply, human)


def cmd_resolve(args: argparse.Namespace) -> int:
    """A fork (two successors a sync left): shown without --keep or --merge; resolved, a
    preview first, with one of them."""
    from memory_agent.errors import Invalid

    if args.keep and args.merge:
        raise Invalid("--keep and --merge: give one", "keep one successor, or merge both")
    if not args.keep and not args.merge:
        return _show_fork(args)
    if args.merge and not args.title:
        raise Invalid("--merge: no --title", "give the merged entry a --title (and --body)")
    reply = call(
        args,
        "memory_resolve_fork",
        id=args.id,
        keep=args.keep,
        title=args.title if args.merge else None,
        body=body_arg(args) if args.merge else None,
        reason=args.reason,
        confirm=args.confirm,
        request_id=args.request_id,
    )

    def human(r: dict) -> None:
        if r["status"] == "preview":
            for path, text in r["preview"].items():
                print(f"--- would write {path}\n{text}")
            print("nothing written; run again with --confirm to write it in one commit")
            return
        if r["status"] == "duplicate":
            print_write(r)
            return
        done = f"kept {r['kept']}" if r.get("kept") else f"merged into {r['merged_into']}"
        gone = [f"archived {', '.join(r['archived'])}"] if r["archived"] else []
        gone += [f"superseded {', '.join(r['superseded'])}"] if r["superseded"] else []
        print(
            f"resolved the fork of {r['id']}: {done}"
            + (f" ({'; '.join(gone)})" if gone else "")
            + f"  commit {str(r.get('commit'))[:12]}  index {r.get('generation')}"
        )

    return emit_write(args, reply, human)


def _show_fork(args: argparse.Namespace) -> int:
    old = call(args, "memory_get", id=args.id)
    later = old.get("superseded_by")
    successors = later if isinstance(later, list) else [later] if later else []
    rows = [call(args, "memory_get", id=s) for s in successors]
    reply = {"id": old["id"], "fork": len(successors) > 1, "successors": rows}

    def human(r: dict) -> None:
        if not r["fork"]:
            state = f"superseded by {successors[0]}" if successors else old["status"]
            print(f"{old['id']} is not a fork ({state}): nothing to resolve")
            return
        print(f"{old['id']} ({old['title']}) was superseded on two machines:")
        for row in rows:
            first = " ".join(row["body"].split())
            first = first if len(first) <= 100 else first[:99] + "…"
            print(f"  {row['id']}  [{row['status']}]  {row['title']}\n      {first}")
        print(
            f"keep one: memory-agent resolve {old['id']} --keep {rows[0]['id']} (the other is "
            "archived, naming the fork)\n"
            f"or merge: memory-agent resolve {old['id']} --merge --title ... --body ... (a new "
            "entry supersedes both)\na preview comes first; --confirm writes it in one commit"
        )

    return emit(args, reply, human)
