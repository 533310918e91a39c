"""`memory-agent import PATH...`: past sessions and what people already wrote, each found by
its format.

- Session transcripts and histories (Claude Code, Codex, opencode, Aider;
  `memory_agent.capture.past_sessions`) become journal records, as the hooks would have
  written them (`memory_agent.capture.session_import`): previewed, or with `--confirm` written
  (under `run/import.lock`), then the daemon indexes them and runs the gate once.
- Markdown (`memory_agent.write.imports`) becomes entries, previewed or written through the
  daemon's gateway (`Gateway.import_entries`), one commit.

A folder is walked for both; a session file given by name is only a session.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from memory_agent.cli.shells import daemon_client, emit

BAR = 30  # characters of the progress bar


def cmd_import(args: argparse.Namespace) -> int:
    from memory_agent.capture.session_sources import find_sources

    sources, missing = find_sources(args.path)
    if missing:
        from memory_agent.errors import Invalid

        raise Invalid(
            f"{missing[0]}: no such file or folder",
            "give a transcript, a history file, a Markdown file or a folder",
        )
    given = {str(s.path) for s in sources}
    note_paths = [p for p in args.path if str(os.path.abspath(os.path.expanduser(p))) not in given]
    sessions = _import_sessions(args, sources) if sources else None
    notes = None
    if note_paths or sessions is None:
        from memory_agent.write.imports import read_sources

        sections, skipped = read_sources(note_paths)
        if sections or skipped or sessions is None:
            notes = _import_notes(args, sections, skipped, note_paths)
    reply = dict(notes) if notes is not None else {}
    if sessions is not None:
        reply["sessions"] = sessions
    return emit(args, reply, lambda r: _print(r, args.unchanged))


def _import_notes(args, sections, skipped, paths: list[str]) -> dict:
    where = args.project or os.getcwd()
    if os.path.isdir(where):
        where = os.path.abspath(where)
    payload = {
        "sections": [s.as_json() for s in sections],
        "label": ", ".join(paths)[:500],
        "scope": args.scope,
        "where": where,
        "confirm": bool(args.confirm),
    }
    reply = daemon_client(args).admin("import", payload=payload)
    reply["files_skipped"] = [s for s in skipped if "heading" not in s]
    reply["empty_sections"] = sum(1 for s in skipped if "heading" in s)
    return reply


class _Bar:
    """A progress bar on stderr (redrawn at most five times a second, and at the end)."""

    def __init__(self, label: str):
        self.label, self.shown, self.drawn = label, 0.0, False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.shown < 0.2:
            return
        self.shown, self.drawn = now, True
        share = done / total if total else 1.0
        filled = int(BAR * share)
        mb = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB"
        end = "\n" if done >= total else ""
        bar = "#" * filled + "-" * (BAR - filled)
        print(f"\r{self.label} [{bar}] {share:4.0%} {mb}", end=end, file=sys.stderr, flush=True)


def _wanted_project(value: str | None) -> str | None:
    """--project as an identity to keep: a folder's project, else the name or identity."""
    if not value:
        return None
    if os.path.isdir(value):
        from memory_agent.errors import Invalid
        from memory_agent.intake.projects import identify

        found = identify(value)
        if found is None:
            raise Invalid(
                f"--project {value}: this folder is in no git repository",
                "give a folder inside the project's repository, or its identity",
            )
        return found.identity
    return value


def _import_sessions(args, sources) -> dict:
    from memory_agent import config as config_mod
    from memory_agent.capture.session_import import import_sessions
    from memory_agent.clock import Clock, parse_time
    from memory_agent.errors import Invalid
    from memory_agent.files import FileLock
    from memory_agent.kb.home import Home

    cfg = config_mod.load({"home": args.home})
    home = cfg.home_dir
    Home(home).require()
    since = None
    if args.since:
        try:
            since = parse_time(args.since)
        except ValueError as exc:
            raise Invalid(f"--since: {exc}", "e.g. --since 2026-11-01") from None
    lock = FileLock(home / "run" / "import.lock") if args.confirm else None
    if lock is not None:
        (home / "run").mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=10.0)
    try:
        report = import_sessions(
            sources,
            home / "journal",
            confirm=bool(args.confirm),
            since=since,
            project=_wanted_project(args.project),
            retention_days=float(cfg.journal_retention_days),
            now=Clock.from_setting(cfg.clock).now(),
            progress=_Bar("reading sessions"),
        )
    finally:
        if lock is not None:
            lock.release()
    out = report.as_json()
    out["retention_days"] = cfg.journal_retention_days
    if args.confirm and report.turns:
        client = daemon_client(args)
        client.admin("refresh")  # the new episodes are searchable when the command returns
        gate = client.admin("gate")  # the gate reads them as it reads live sessions
        out["gate"] = {
            k: gate.get(k) for k in ("mode", "proposed", "promoted", "held") if k in gate
        }
    return out


def _print(reply: dict, list_unchanged: bool = False) -> None:
    if "counts" in reply:
        _print_notes(reply, list_unchanged)
    if "sessions" in reply:
        _print_sessions(reply["sessions"])


def _print_sessions(s: dict) -> None:
    verb = {"preview": "would import", "unchanged": "nothing new to import"}.get(
        s["status"], "imported"
    )
    formats = ", ".join(f"{k} {v}" for k, v in sorted(s["formats"].items())) or "none"
    print(
        f"{verb}: {s['sessions']} sessions ({formats}), {s['turns']} turns, {s['records']} "
        f"journal records, from {s['files']} files ({s['bytes'] / 1e6:.1f} MB)"
    )
    if s["projects"]:
        print("  projects: " + ", ".join(f"{k} ({v})" for k, v in s["projects"].items()))
    if s["first"]:
        print(f"  dates: {s['first'][:16]} .. {s['last'][:16]}")
    print(f"  secrets redacted: {s['secrets_redacted']}")
    print(
        f"  already in the journal: {s['turns_already_imported']} turns imported before, "
        f"{s['sessions_captured_live']} sessions captured live (left as they are)"
    )
    if s["sessions_before_since"] or s["sessions_of_other_projects"]:
        print(
            f"  left out: {s['sessions_before_since']} sessions before --since, "
            f"{s['sessions_of_other_projects']} of other projects"
        )
    if s["turns_older_than_retention"]:
        print(
            f"  {s['turns_older_than_retention']} turns are older than journal_retention_days "
            f"({s['retention_days']}): journaled, but not searchable until it is raised"
        )
    for error in s["errors"]:
        print(f"  not read: {error['file']}: {error['reason']}")
    if s["status"] == "preview":
        print("nothing written; run again with --confirm to write them to the journal")
    elif s.get("gate"):
        gate = s["gate"]
        print(
            f"journaled; the gate ({gate.get('mode')}) proposed {len(gate.get('proposed') or [])}"
            f" and wrote {len(gate.get('promoted') or [])} lessons"
        )


def _print_notes(reply: dict, list_unchanged: bool) -> None:
    counts = reply["counts"]
    verb = {"preview": "would import", "unchanged": "nothing new to import"}.get(
        reply["status"], "imported"
    )
    print(
        f"{verb} (scope {reply['scope']}): {counts['new']} new, {counts['supersede']} "
        f"superseding, {counts['unchanged']} unchanged, {counts['duplicate']} duplicates, "
        f"{counts['skipped']} skipped; {reply.get('empty_sections', 0)} empty sections left out"
    )
    for item in reply["entries"]:  # what changes first, all of it (`write.import_plan`)
        if item["action"] == "unchanged" and not list_unchanged:
            continue
        what = item.get("id") or ""
        if item["action"] == "duplicate":
            what = f"duplicate of {item['duplicate_of']} ({item['match']})"
        elif item["action"] == "supersede":
            what = f"{item['id']} supersedes {item['old_id']}"
        elif item["action"] == "skipped":
            what = item.get("reason", "")
        print(f"  {item['action']:<10} {item['type']:<10} {item['title'][:50]:<50} {what}")
    if counts["unchanged"] and not list_unchanged:
        print(f"  {counts['unchanged']} unchanged, not listed (--unchanged lists them)")
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


HELP = (
    "import past sessions (Claude Code, Codex, opencode, Aider) and what you wrote "
    "(CLAUDE.md, AGENTS.md, Cursor rules, Claude Code's memory, notes)"
)
DESCRIPTION = (
    "Read each PATH (a file, or a folder walked for both kinds) and show what it would "
    "become; --confirm writes it. Past sessions - Claude Code transcripts "
    "(~/.claude/projects), Codex rollouts (~/.codex/sessions), opencode's database "
    "(~/.local/share/opencode/opencode.db) and Aider's .aider.chat.history.md, each "
    "recognised by its content - become journal records and episodes exactly as if the "
    "hooks had captured them: redacted, in the project of the session's folder, with the "
    "source's times; importing again writes nothing, a session that grew is continued. "
    "Markdown becomes entries: one per second-level (##) section, titled by its heading, "
    "typed where the heading says (pitfalls, conventions, decisions, preferences), else "
    "note; secrets redacted; duplicates of the KB or of each other left out, in one "
    "commit naming the source; importing a file again writes only what changed."
)


def add_arguments(p: argparse.ArgumentParser, project_help: str) -> None:
    """The arguments of `memory-agent import` (`cli.main` makes the command)."""
    p.add_argument(
        "path",
        nargs="+",
        metavar="PATH",
        help="a transcript, a history, a Markdown file or a folder",
    )
    p.add_argument(
        "--scope",
        help="the project new entries belong to: project (default: the one the working "
        "directory is in; global outside a repository), global, or a project's name or identity",
    )
    p.add_argument(
        "--project",
        metavar="DIR|ID",
        help=project_help + "; past sessions: only the sessions of that project",
    )
    p.add_argument(
        "--since",
        metavar="DATE",
        help="past sessions: only those started on or after DATE (ISO 8601: 2026-11-01)",
    )
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument(
        "--unchanged",
        action="store_true",
        help="notes: list the sections that are unchanged too (default: counted; every "
        "change is always listed, and --json lists everything)",
    )
