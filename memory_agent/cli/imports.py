"""`memory-agent import PATH...`: read what people already wrote (`memory_agent.write.imports`),
then preview or write it through the daemon's gateway (`Gateway.import_entries`), one commit."""

from __future__ import annotations

import argparse
import os

from memory_agent.cli.shells import daemon_client, emit


def cmd_import(args: argparse.Namespace) -> int:
    from memory_agent.write.imports import read_sources

    sections, skipped = read_sources(args.path)
    where = args.project or os.getcwd()
    if os.path.isdir(where):
        where = os.path.abspath(where)
    payload = {
        "sections": [s.as_json() for s in sections],
        "label": ", ".join(args.path)[:500],
        "scope": args.scope,
        "where": where,
        "confirm": bool(args.confirm),
    }
    reply = daemon_client(args).admin("import", payload=payload)
    reply["files_skipped"] = [s for s in skipped if "heading" not in s]
    reply["empty_sections"] = sum(1 for s in skipped if "heading" in s)
    return emit(args, reply, _print)


def _print(reply: dict) -> None:
    counts = reply["counts"]
    verb = {"preview": "would import", "unchanged": "nothing new to import"}.get(
        reply["status"], "imported"
    )
    print(
        f"{verb} (scope {reply['scope']}): {counts['new']} new, {counts['supersede']} "
        f"superseding, {counts['unchanged']} unchanged, {counts['duplicate']} duplicates, "
        f"{counts['skipped']} skipped; {reply.get('empty_sections', 0)} empty sections left out"
    )
    for item in reply["entries"]:
        what = item.get("id") or ""
        if item["action"] == "duplicate":
            what = f"duplicate of {item['duplicate_of']} ({item['match']})"
        elif item["action"] == "supersede":
            what = f"{item['id']} supersedes {item['old_id']}"
        elif item["action"] == "skipped":
            what = item.get("reason", "")
        print(f"  {item['action']:<10} {item['type']:<10} {item['title'][:50]:<50} {what}")
    shown = len(reply["entries"])
    total = sum(counts.values())
    if total > shown:
        print(f"  ... and {total - shown} more (--json lists the first {shown} too)")
    for item in reply.get("files_skipped", []):
        print(f"  skipped {item['file']}: {item['reason']}")
    if reply.get("gone"):
        print(f"  no longer in the files (left as they are): {', '.join(reply['gone'])}")
    if reply["status"] == "preview":
        print("nothing written; run again with --confirm to write them in one commit")
    elif reply.get("commit"):
        print(f"commit {reply['commit'][:12]}  index {reply.get('generation')}")
    else:
        print("nothing to write")
