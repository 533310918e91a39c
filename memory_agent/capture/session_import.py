"""Past sessions into the journal (layer L0), as if the hooks had captured them live.

`memory-agent import` finds the sources (`capture.past_sessions`), then each session's turns
become the hook calls they would have been (`past_sessions.hook_calls`) and each call the
journal record a live hook writes (`capture.records.record_for`), with the time the source
gave it, the session's cwd and, on its start and prompts, the identity of the project that
cwd is in (`intake.projects`; an Aider history: the folder holding it). Every record is
cleaned and redacted by the journal's own rule (`intake.journal.clean_record`) before it is
written; what redaction replaced is counted (`[REDACTED:...]` markers it added). The index
derives episodes from the journal and the gate reads it, as for a live session: nothing here
writes the knowledge base.

**Idempotent.** An imported record carries `imported` (its turn's index in the session, from
0) and the start and prompt records `from` (the source file). Before a session is written,
its journal is read: the turns it already holds are skipped (re-importing writes nothing; a
session that grew since is continued from its next turn; the same session met in two files
is written once); a session the hooks captured live (records without `imported`) is left as
it is. The journal is the ledger: nothing else records what was imported.

**Streamed.** One session at a time: a source is read record by record, a session's turns are
written as each turn is cleaned (one `write` per turn), and the preview reads exactly what the
confirm would write. `progress(done_bytes, total_bytes)` is called as sources are read.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.capture.past_sessions import PastSession, hook_calls
from memory_agent.capture.records import record_for
from memory_agent.capture.session_sources import Source, read_source
from memory_agent.intake import journal
from memory_agent.intake.projects import identify, short_name

__all__ = ["ImportReport", "import_sessions", "origin_of"]

_MARK = "[REDACTED"


@dataclass
class ImportReport:
    confirm: bool
    files: int = 0
    bytes: int = 0
    formats: Counter = field(default_factory=Counter)  # sessions per format
    sessions: int = 0  # sessions with turns written (or to write)
    turns: int = 0
    records: int = 0
    secrets: int = 0  # secrets redacted in what was written (or would be)
    projects: Counter = field(default_factory=Counter)  # sessions per project ("": none)
    first: float | None = None
    last: float | None = None
    already: int = 0  # turns the journal held already (imported before)
    live: int = 0  # sessions the hooks captured live: left as they are
    before_since: int = 0  # sessions started before --since
    other_project: int = 0  # sessions of another project than --project
    unsearchable: int = 0  # turns older than journal_retention_days: journaled, not indexed
    errors: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        from memory_agent.clock import iso

        status = "unchanged" if not self.turns else ("imported" if self.confirm else "preview")
        return {
            "status": status,
            "files": self.files,
            "bytes": self.bytes,
            "formats": dict(self.formats),
            "sessions": self.sessions,
            "turns": self.turns,
            "records": self.records,
            "secrets_redacted": self.secrets,
            "projects": {k or "(none)": v for k, v in self.projects.most_common()},
            "first": iso(self.first) if self.first is not None else None,
            "last": iso(self.last) if self.last is not None else None,
            "turns_already_imported": self.already,
            "sessions_captured_live": self.live,
            "sessions_before_since": self.before_since,
            "sessions_of_other_projects": self.other_project,
            "turns_older_than_retention": self.unsearchable,
            "errors": self.errors,
            "seconds": round(self.seconds, 2),
        }


def origin_of(path: Path) -> str:
    """The source file as a record names it (`~` for the home folder)."""
    text = str(path.absolute())
    home = os.path.expanduser("~")
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text


class _Journal:
    """What the journal already holds of each session (read once per session)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.files = journal.sessions(folder)
        self.done: dict[str, int] = {}  # session name -> turns journaled
        self.live: set[str] = set()

    def turns_held(self, session_id: str) -> int | None:
        """Turns of the session the journal holds (None: captured live, leave it)."""
        name = journal.session_name(session_id)
        if name in self.live:
            return None
        if name not in self.done:
            held = -1
            for record in journal.read_session(self.files.get(name, [])):
                mark = record.get("imported")
                if not isinstance(mark, int):
                    self.live.add(name)
                    return None
                if record.get("event") == "prompt":
                    held = max(held, mark)
            self.done[name] = held + 1
        return self.done[name]


class _Projects:
    def __init__(self):
        self.known: dict[str, str] = {}

    def of(self, cwd: str) -> str:
        if cwd not in self.known:
            found = identify(cwd) if cwd and os.path.isdir(cwd) else None
            self.known[cwd] = found.identity if found is not None else ""
        return self.known[cwd]


def _matches(identity: str, wanted: str) -> bool:
    return bool(identity) and (identity == wanted or short_name(identity) == wanted)


def import_sessions(
    sources: list[Source],
    journal_dir: Path,
    *,
    confirm: bool,
    since: float | None = None,
    project: str | None = None,
    retention_days: float | None = None,
    now: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Preview (`confirm=False`) or write the sessions of `sources` into `journal_dir`."""
    started = time.monotonic()
    report = ImportReport(confirm=confirm, files=len(sources), bytes=sum(s.size for s in sources))
    held = _Journal(journal_dir)
    projects = _Projects()
    horizon = None
    if retention_days is not None and now is not None:
        horizon = now - float(retention_days) * 86400.0
    done_bytes = 0
    for source in sources:
        try:
            for session in read_source(source):
                _one(session, source, held, projects, report, since, project, horizon, confirm)
        except Exception as exc:  # noqa: BLE001 - one unreadable source never stops the rest
            report.errors.append(
                {"file": str(source.path), "reason": f"{type(exc).__name__}: {exc}"}
            )
        done_bytes += source.size
        if progress is not None:
            progress(done_bytes, report.bytes)
    report.seconds = time.monotonic() - started
    return report


def _one(
    session: PastSession,
    source: Source,
    held: _Journal,
    projects: _Projects,
    report: ImportReport,
    since: float | None,
    wanted: str | None,
    horizon: float | None,
    confirm: bool,
) -> None:
    if since is not None and session.started < since:
        report.before_since += 1
        return
    identity = projects.of(session.cwd)
    if wanted is not None and not _matches(identity, wanted):
        report.other_project += 1
        return
    start = held.turns_held(session.session_id)
    if start is None:
        report.live += 1
        return
    report.already += min(start, len(session.turns))
    if start >= len(session.turns):
        return
    origin = origin_of(source.path)
    batch: list[dict[str, Any]] = []
    current = start
    for n, event, payload, ts, exit_code in hook_calls(session, range(start, len(session.turns))):
        if n != current:
            _write(batch, session, held, report, confirm)
            current = n
        record = record_for(event, payload, ts, session.client, exit_code)
        record["imported"] = n
        if event in ("prompt", "session-start"):
            record["from"] = origin
            if identity:
                record["project"] = identity
        batch.append(record)
    _write(batch, session, held, report, confirm)
    turns = session.turns[start:]
    report.sessions += 1
    report.formats[source.format] += 1
    report.projects[identity] += 1
    report.turns += len(turns)
    first, last = turns[0].ts, session.ended
    report.first = first if report.first is None else min(report.first, first)
    report.last = last if report.last is None else max(report.last, last)
    if horizon is not None:
        report.unsearchable += sum(1 for t in turns if t.ts < horizon)
    held.done[journal.session_name(session.session_id)] = len(session.turns)


def _write(
    batch: list[dict[str, Any]],
    session: PastSession,
    held: _Journal,
    report: ImportReport,
    confirm: bool,
) -> None:
    """Clean one turn's records (counting what redaction replaced) and, with `confirm`,
    append them to the session's journal in one write."""
    if not batch:
        return
    cleaned = []
    for record in batch:
        before = json.dumps(record, ensure_ascii=False, default=str).count(_MARK)
        clean = journal.clean_record(record, session.session_id)
        report.secrets += max(0, json.dumps(clean, ensure_ascii=False).count(_MARK) - before)
        cleaned.append(clean)
    report.records += len(cleaned)
    if confirm:
        journal.append_cleaned(held.folder, session.session_id, cleaned)
    batch.clear()
