"""The usage event log: what was searched, recalled, opened and marked important.

Every daemon session appends JSON lines to its own file, `events/<start>-<pid>-<rand>.jsonl`, so
concurrent or successive daemons never write to the same file. Kinds:

    {"kind": "query", "qid", "text", "results", "latency_ms", "caller", "ts"}
    {"kind": "recall", "qid", "entry", "rank", "score", "channel", "ts"}
    {"kind": "get", "entry", "ts"}
    {"kind": "importance", "entry", "importance", "note", "ts"}
    {"kind": "inject", "session", "event", "ids", "chars", "ts"}      (what a hook showed)
    {"kind": "reinforce", "entry", "lesson", "ts"}     (the gate saw a promoted lesson again)
    {"kind": "look", "entry", "qid"?, "rank"?, "ts"}   (a person's look in the browser)

A person browsing the memory (`memory-agent ui`, whose calls name the caller `LOOK_CALLER`) is
not an agent using it: the hits of the browser's searches and the entries it opens are logged
as `look` events, which no ranking signal reads (`is_look`).

Free text (a query's `text`, an importance `note`) is redacted (`memory_agent.intake.redact`)
before it is written: a search for a pasted token must not store the token.

`fold` turns the files into per-entry `EntryStats`. It is a pure function of the files (same
files, same state): a corrupt line is skipped and counted, never fatal; a read error in the
middle of a file keeps what was read before it. Events are derived data: deleting `events/`
loses the learned ranking, never a memory.

A daemon and its reader processes (ADR 0028) each log to their own file and fold each other's:
`EventTail` reads the other processes' plain files as they grow, from where its last read
stopped, complete lines only (a line being written is read once it is whole); `fold` with a
tail records where it stopped in each, so no event is counted twice.

`compact` gzips the files of finished sessions, streaming, crash-safe
(`memory_agent.files.gzip_to`): the compressed copy is written to a temp name unique to the
process, fsynced, renamed to `<name>.jsonl.gz`, and only then is the plain file removed. If a
crash leaves both, `fold` reads the `.gz` (complete by construction: it only gets its name once
fully written) and ignores the plain file, so nothing is counted twice; the next `compact`
removes the leftover.

Design: docs/adr/0006-usage-events-and-bounded-reinforcement.md.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.files import gzip_to
from memory_agent.intake.redact import redact
from memory_agent.procs import pid_alive
from memory_agent.recall.policy import RECALL_COUNTS_UP_TO_RANK

__all__ = [
    "LOOK_CALLER",
    "EntryStats",
    "EventLog",
    "EventTail",
    "FoldReport",
    "apply_event",
    "compact",
    "fold",
    "is_look",
    "read_events",
    "redact_event",
]
FREE_TEXT = ("text", "note")  # the fields of an event that hold what a person typed
LOOK_CALLER = "memory-agent-ui"  # the browser's caller name: its reads are looks, not uses


def is_look(caller: str | None) -> bool:
    """Whether a call came from a person browsing (the UI), not from an agent."""
    return bool(caller) and str(caller).split("/", 1)[0] == LOOK_CALLER


@dataclass
class EntryStats:
    recall_count: int = 0
    last_recalled: float | None = None
    last_opened: float | None = None
    importance: int | None = None
    importance_ts: float | None = None
    importance_note: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "recall_count": self.recall_count,
            "last_recalled": self.last_recalled,
            "last_opened": self.last_opened,
            "importance": self.importance,
        }


@dataclass
class FoldReport:
    stats: dict[str, EntryStats] = field(default_factory=dict)
    files: int = 0
    events: int = 0
    corrupt_lines: int = 0
    read_errors: list[str] = field(default_factory=list)


def apply_event(stats: dict[str, EntryStats], event: dict[str, Any]) -> bool:
    """Fold one event into `stats`; False if it is not a well-formed event."""
    kind = event.get("kind")
    ts = event.get("ts")
    if not isinstance(ts, (int, float)):
        return False
    if kind in ("query", "inject", "look"):  # a search, a hook's text, a person's look
        return True
    entry = event.get("entry")
    if not isinstance(entry, str) or not entry:
        return False
    if kind == "recall":
        rank = event.get("rank")
        if not isinstance(rank, int):
            return False
        if rank <= RECALL_COUNTS_UP_TO_RANK:
            s = stats.setdefault(entry, EntryStats())
            s.recall_count += 1
            s.last_recalled = max(s.last_recalled or ts, ts)
        return True
    if kind == "reinforce":  # the gate saw a lesson again: as good as a recall at rank 1
        s = stats.setdefault(entry, EntryStats())
        s.recall_count += 1
        s.last_recalled = max(s.last_recalled or ts, ts)
        return True
    if kind == "get":
        s = stats.setdefault(entry, EntryStats())
        s.last_opened = max(s.last_opened or ts, ts)
        return True
    if kind == "importance":
        value = event.get("importance")
        if not isinstance(value, int) or not 1 <= value <= 10:
            return False
        s = stats.setdefault(entry, EntryStats())
        if s.importance_ts is None or ts >= s.importance_ts:  # last write wins
            s.importance, s.importance_ts = value, ts
            s.importance_note = event.get("note")
        return True
    return False


def redact_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its free text redacted (the same object when nothing changes)."""
    changed = {k: redact(event[k]) for k in FREE_TEXT if isinstance(event.get(k), str)}
    changed = {k: v for k, v in changed.items() if v != event[k]}
    return {**event, **changed} if changed else event


def _event_files(folder: Path) -> list[Path]:
    """Files to read: every `.jsonl.gz`, and every `.jsonl` that has no `.gz` twin."""
    if not folder.is_dir():
        return []
    gz = {p.name[: -len(".gz")] for p in folder.glob("*.jsonl.gz")}
    plain = [p for p in folder.glob("*.jsonl") if p.name not in gz]
    return sorted([*folder.glob("*.jsonl.gz"), *plain], key=lambda p: p.name)


def _lines(path: Path) -> Iterator[str]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield from fh
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh


def read_events(
    folder: Path, report: FoldReport | None = None, tail: EventTail | None = None
) -> list[dict[str, Any]]:
    """Every event of the folder's files (a `.jsonl` with a `.gz` twin is read once), ordered
    by time (then by file order) so last-write-wins does not depend on file names. Corrupt
    lines and unreadable files are counted in `report`, if given, and skipped. With `tail`, a
    plain file is read up to its last complete line and the tail starts there (its own file,
    `tail.own`, is not read)."""
    report = report if report is not None else FoldReport()
    events: list[dict[str, Any]] = []
    for path in _event_files(folder):
        if tail is not None and not path.name.endswith(".gz"):
            if path.name != tail.own:
                report.files += 1
                events.extend(tail.read_file(path, report))
            continue
        report.files += 1
        try:
            for line in _lines(path):
                _parse(line, events, report)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:  # keep what was read
            report.read_errors.append(f"{path.name}: {exc}")
    events.sort(key=lambda e: e.get("ts") if isinstance(e.get("ts"), (int, float)) else 0.0)
    return events


def _parse(line: str, events: list[dict[str, Any]], report: FoldReport) -> None:
    if not line.strip():
        return
    try:
        event = json.loads(line)
    except ValueError:
        report.corrupt_lines += 1
        return
    if isinstance(event, dict):
        events.append(event)
    else:
        report.corrupt_lines += 1


class EventTail:
    """The other processes' plain files of `folder`, read as they grow: each read takes the
    complete lines appended since the last one. `own`: this process's file's name (never
    read: its events are folded as they are logged). Not thread-safe: one reader at a time."""

    def __init__(self, folder: Path, own: str):
        self.folder = folder
        self.own = own
        self.offsets: dict[str, int] = {}  # file name -> bytes read (up to a newline)

    def read_file(self, path: Path, report: FoldReport) -> list[dict[str, Any]]:
        """The events appended to `path` since the last read of it (complete lines)."""
        start = self.offsets.get(path.name, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(start)
                data = fh.read()
        except OSError as exc:
            report.read_errors.append(f"{path.name}: {exc}")
            return []
        whole = data.rfind(b"\n") + 1  # a line still being written is read next time
        self.offsets[path.name] = start + whole
        events: list[dict[str, Any]] = []
        # lines end at "\n" only: a note may hold U+2028 or U+0085, which `splitlines` splits
        for line in data[:whole].decode("utf-8", "replace").split("\n"):
            _parse(line, events, report)
        return events

    def new_events(self, report: FoldReport | None = None) -> list[dict[str, Any]]:
        """What the other processes appended since the last read, ordered by time. A file
        compacted since (a `.gz` twin) was read whole before: a process's file is compacted a
        day after its last line."""
        report = report if report is not None else FoldReport()
        events: list[dict[str, Any]] = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return []
        names = {entry.name for entry in entries}
        for entry in entries:
            name = entry.name
            if not name.endswith(".jsonl") or name == self.own or name + ".gz" in names:
                continue  # (a plain file with a .gz twin: a compaction's leftover, as in `fold`)
            try:
                size = entry.stat().st_size
            except OSError:
                continue
            if size > self.offsets.get(name, 0):
                events.extend(self.read_file(Path(entry.path), report))
        events.sort(key=lambda e: e.get("ts") if isinstance(e.get("ts"), (int, float)) else 0.0)
        return events


def fold(folder: Path, tail: EventTail | None = None) -> FoldReport:
    """Every event of the folder folded into per-entry stats (`tail`: see `read_events`)."""
    report = FoldReport()
    events = read_events(folder, report, tail)
    for event in events:
        if apply_event(report.stats, event):
            report.events += 1
        else:
            report.corrupt_lines += 1
    return report


class EventLog:
    """This session's append-only file. Each event is one `write` of one line (O_APPEND)."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time):
        self.folder = folder
        self.clock = clock
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.path = folder / f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}.jsonl"
        self._fd: int | None = None
        self._lock = threading.Lock()

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        return self.append_many([(kind, fields)])[0]

    def append_many(self, items: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Several events in one `write` (a search's query and its recalls: one system call,
        and a reader sees all of them or, after a crash mid-write, a torn last line it skips)."""
        ts = round(self.clock(), 3)
        events = [redact_event({"kind": kind, "ts": ts, **fields}) for kind, fields in items]
        data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events).encode("utf-8")
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.write(self._fd, data)
        return events

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def compact(folder: Path, *, keep: Path | None = None, older_than_s: float = 86400.0) -> list[str]:
    """Gzip finished sessions' files older than `older_than_s` (never `keep`, the live one).
    Returns the names compacted. Safe to run while other processes append to their own files."""
    done: list[str] = []
    if not folder.is_dir():
        return done
    for tmp in folder.glob("*.gz.tmp-*"):  # a compaction that died: its process is gone
        pid = tmp.name.rsplit("-", 2)[-2]
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
    now = time.time()
    for path in sorted(folder.glob("*.jsonl")):
        gz = path.with_name(path.name + ".gz")
        if gz.exists():  # a crash after the rename: the .gz is complete, the plain is left over
            path.unlink(missing_ok=True)
            continue
        if keep is not None and path.resolve() == keep.resolve():
            continue
        try:
            if now - path.stat().st_mtime < older_than_s:
                continue
        except FileNotFoundError:
            continue
        gzip_to(path, gz)  # its temp name: `<name>.jsonl.gz.tmp-<pid>-<hex>` (cleaned above)
        path.unlink()
        done.append(path.name)
    return done
