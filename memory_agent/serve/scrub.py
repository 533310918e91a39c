"""`memory-agent scrub`: redact what earlier versions already stored.

Versions before the structured redaction (issue 17) stored some secrets verbatim: the value of
a `{"password": ...}` key, `curl -u user:pass`, a search query holding a token. The scrub runs
today's redaction (`memory_agent.intake.redact`) over everything captured so far:

- the journal (`journal/`): every record of the plain files, the gzipped parts and any file a
  compaction left aside. A gzipped part is rewritten crash-safely under its own name (a temp
  file in the folder, fsynced, renamed over it); a plain file is first renamed aside - a hook
  that appends meanwhile starts a new plain file, nothing is lost - then gzipped, redacted, into
  a part exactly as `journal.compact` names it;
- the usage events (`events/`, plain and gzipped): the free text of each event;
- the gate's inbox (`inbox/state.json`): proposals quote commands and errors; and the gate's
  read positions of each session whose files were rewritten are reset (it knows a file by
  the hash of its first line and reads on from an offset: a rewritten file would be read
  again whole, its episodes counted twice), with its observations from that session, so
  the gate reads the session once more, cleanly. The daemon's gate must not run meanwhile:
  at start the scrub holds the gate's lock; `memory-agent scrub` stops a running daemon
  when it has a journal file or the state to rewrite, and holds the spawn lock throughout;
- temp files a crashed compaction left behind (they hold unredacted copies) are removed.

Episodes are derived from the journal, so the index follows: a daemon re-derives a session's
episodes when its files change, and `memory-agent scrub` asks the daemon for a fresh index
generation (`rebuild`), which also drops the old generation's files. Lessons the gate wrote by
itself (`source: auto`) are listed for a person to review, each with the one command that
archives it. Idempotent: a second run changes nothing.

Run once on upgrade: the daemon runs it at start while `<home>/run/scrub-v1` is absent
(`at_start`: the files before it serves, so the gate never reads the old text, unless there
are more than 8 MB of them; the index in a thread).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memory_agent.files import replacing, temp_name
from memory_agent.intake import journal
from memory_agent.intake.redact import redact, redact_value
from memory_agent.procs import pid_alive
from memory_agent.recall.events import redact_event

__all__ = [
    "MARKER",
    "auto_lessons",
    "needed",
    "at_start",
    "run_at_start",
    "scrub_command",
    "scrub_home",
]

log = logging.getLogger("memory_agent.scrub")
MARKER = "scrub-v1"  # in <home>/run: present once every file stored before issue 17 is scrubbed


def _line_of(record: Any) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def _transform(clean: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[bytes], bytes]:
    """A line-to-line redaction: a JSON object is redacted on its structure; a corrupt line
    as text (it is kept, as the readers skip it)."""

    def line(raw: bytes) -> bytes:
        text = raw.decode("utf-8", "replace")
        body = text.rstrip("\n")
        if not body.strip():
            return raw
        try:
            record = json.loads(body)
        except ValueError:
            red = redact(body)
            return raw if red == body else (red + text[len(body) :]).encode("utf-8")
        if not isinstance(record, dict):
            return raw
        new = clean(record)
        return raw if new == record else _line_of(new)

    return line


_JOURNAL = _transform(lambda record: redact_value(record))
_EVENTS = _transform(redact_event)


def _changed(
    lines: Iterable[bytes], transform: Callable[[bytes], bytes]
) -> tuple[list[bytes], int]:
    out, changed = [], 0
    for raw in lines:
        new = transform(raw)
        changed += new != raw
        out.append(new)
    return out, changed


def _read(path: Path) -> list[bytes]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return fh.readlines()
    with open(path, "rb") as fh:
        return fh.readlines()


def _replace(path: Path, lines: list[bytes]) -> None:
    """Write `lines` over `path` crash-safely (gzipped if its name ends in .gz): a temp file
    unique to this process (hidden, so `_stale_temps` finds it), fsynced, renamed over it."""
    tmp = path.with_name("." + temp_name(f"{path.name}.scrub"))
    with replacing(path, tmp=tmp, gz=path.name.endswith(".gz")) as fh:
        fh.writelines(lines)


def _stale_temps(folder: Path) -> int:
    """Remove temp files of compactions or scrubs whose process is gone (unredacted copies)."""
    removed = 0
    for tmp in folder.glob(".*tmp-*"):
        parts = tmp.name.rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit() and not pid_alive(int(parts[1])):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def scrub_journal(folder: Path) -> dict[str, int]:
    """Redact the journal's files; `sessions` in the report: the sessions whose files were
    rewritten (the gate's read positions for them no longer hold)."""
    report: dict[str, Any] = {
        "files": 0,
        "rewritten": 0,
        "lines": 0,
        "temps_removed": 0,
        "sessions": [],
    }
    touched: set[str] = set()
    if not folder.is_dir():
        return report
    report["temps_removed"] = _stale_temps(folder)
    for path in sorted(folder.glob("*.jsonl")):  # a live file: renamed aside, then gzipped
        aside = path.with_name(path.name + ".compacting")
        try:
            if aside.exists() or not _changed(_read(path), _JOURNAL)[1]:
                continue
            os.rename(path, aside)
        except FileNotFoundError:
            continue
    for aside in sorted(folder.glob("*.jsonl.compacting")):
        _, changed = _changed(_read(aside), _JOURNAL)
        report["lines"] += changed
        report["rewritten"] += changed > 0
        if changed:
            touched.add(aside.name[: -len(".jsonl.compacting")])
    journal.finish_asides(folder, _JOURNAL)
    report["files"] = sum(len(p) for p in journal.sessions(folder).values())
    for name, parts in journal.sessions(folder).items():
        for path in parts:
            if not path.name.endswith(".gz"):
                continue
            try:
                lines, changed = _changed(_read(path), _JOURNAL)
            except (OSError, EOFError) as exc:
                log.warning("scrub: cannot read %s (%s); left as it is", path.name, exc)
                continue
            if changed:
                _replace(path, lines)
                report["rewritten"] += 1
                report["lines"] += changed
                touched.add(name)
    report["sessions"] = sorted(touched)
    return report


def scrub_events(folder: Path, keep: Iterable[Path] = ()) -> dict[str, int]:
    """Redact the events' free text; `keep` (a running daemon's own file, which it holds
    open) is skipped: it was written by this version, redacted."""
    kept = {p.resolve() for p in keep}
    report = {"files": 0, "rewritten": 0, "lines": 0, "temps_removed": 0}
    if not folder.is_dir():
        return report
    report["temps_removed"] = _stale_temps(folder)
    for path in sorted([*folder.glob("*.jsonl"), *folder.glob("*.jsonl.gz")]):
        if path.resolve() in kept:
            continue
        report["files"] += 1
        try:
            lines, changed = _changed(_read(path), _EVENTS)
        except (OSError, EOFError) as exc:
            log.warning("scrub: cannot read %s (%s); left as it is", path.name, exc)
            continue
        if changed:
            _replace(path, lines)
            report["rewritten"] += 1
            report["lines"] += changed
    return report


def scrub_inbox(home: Path, sessions: Iterable[str] = ()) -> int:
    """Redact the gate's proposals (they quote commands and errors); 1 if redacted. And
    `reset_gate_sessions` for the `sessions` whose journal files were rewritten, in the same
    atomic write of the state."""
    path = home / "inbox" / "state.json"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    if not isinstance(state, dict):
        return 0
    reset = reset_gate_sessions(state, sessions)
    clean = redact_value(state)
    if clean == state and not reset:
        return 0
    from ragcore import atomic_write  # the gate's own helper (`Gate._save`), same format

    atomic_write(path, json.dumps(clean, ensure_ascii=False, indent=1), mode=0o600)
    return int(clean != state)


def reset_gate_sessions(state: dict[str, Any], sessions: Iterable[str]) -> bool:
    """Make the gate read these sessions again from their start, once, without counting
    anything twice. The gate knows a journal file by the hash of its first line and reads on
    from a byte offset (`memory_agent.capture.observations.scan`): a rewritten file no longer
    matches, and it would be read whole ON TOP of what was already counted. So each session's read
    positions, prompt counter and open episode (`journal[name]`) go, and so do the
    observations derived from it (its episode ids and its name in `observed`; an observation
    left with no episode goes). What the gate decided (promoted, proposed, rejected, skipped)
    stays: the episodes it reads again have the same ids. Whether anything changed."""
    names = set(sessions)
    if not names:
        return False
    changed = False
    positions = state.get("journal")
    if isinstance(positions, dict):
        for name in names & set(positions):
            del positions[name]
            changed = True
    observed = state.get("observed")
    if isinstance(observed, dict):
        for key in list(observed):
            obs = observed[key]
            if not isinstance(obs, dict):
                continue
            episodes = [
                e
                for e in obs.get("episodes", [])
                if not (isinstance(e, str) and _episode_session(e) in names)
            ]
            kept = [s for s in obs.get("sessions", []) if s not in names]
            if episodes == obs.get("episodes", []) and kept == obs.get("sessions", []):
                continue
            changed = True
            if episodes:
                obs["episodes"], obs["sessions"] = episodes, kept
            else:
                del observed[key]
    return changed


def _episode_session(episode_id: str) -> str:
    """`episodes/<session>/<n>` -> `<session>` (session names hold no `/`)."""
    parts = episode_id.rsplit("/", 2)
    return parts[1] if len(parts) == 3 else ""


def auto_lessons(home: Path) -> list[dict[str, str]]:
    """Active lessons the gate wrote by itself (`source: auto`), with the command that
    archives each."""
    from memory_agent.kb.entries import ValidationError, read_entry
    from memory_agent.kb.files import kb_files

    files, _ = kb_files(home / "kb")
    out = []
    for path in files:
        try:
            entry = read_entry(path)
        except ValidationError:
            continue
        if entry.extra.get("source") != "auto" or entry.status != "active":
            continue
        out.append(
            {
                "id": entry.id,
                "title": entry.title,
                "path": str(path.relative_to(home)),
                "archive": f"memory-agent archive {shlex.quote(entry.id)} --reason "
                f"'reviewed after the scrub' --confirm",
            }
        )
    return out


def marker_path(home: Path) -> Path:
    return home / "run" / MARKER


def needed(home: Path) -> bool:
    """Whether this home was never scrubbed (the upgrade's run is due)."""
    return not marker_path(home).exists()


def scrub_home(
    home: Path,
    *,
    events_keep: Iterable[Path] = (),
    mark: bool = True,
    gate_lock: Any = None,
    lessons: bool = True,
) -> dict[str, Any]:
    """Scrub the home's journal, usage events and gate inbox; write the marker (with `mark`).
    With `lessons`, list the `source: auto` lessons to review: that reads every KB file
    (minutes at 1,000,000 entries), so a starting daemon leaves it to `memory-agent scrub`.
    The gate's read positions of each session whose files were rewritten are reset in its
    state (`reset_gate_sessions`). `gate_lock` (a running daemon's, when the scrub runs
    inside it) is held throughout, so no gate run reads a file between its rewrite and the
    reset, nor saves a state read before it. The report: what was rewritten and the
    `source: auto` lessons to review."""
    import contextlib

    home = Path(home)
    with gate_lock if gate_lock is not None else contextlib.nullcontext():
        scrubbed = scrub_journal(home / "journal")
        report: dict[str, Any] = {
            "home": str(home),
            "journal": scrubbed,
            "events": scrub_events(home / "events", keep=events_keep),
            "inbox": scrub_inbox(home, scrubbed["sessions"]),
            "auto_lessons": auto_lessons(home) if lessons else None,
        }
    if mark:
        write_marker(home)
    return report


def needs_daemon_stopped(home: Path) -> bool:
    """Whether the scrub would rewrite a journal file or the gate's state: then a running
    daemon must not run its gate meanwhile (another process: no lock is shared with it)."""
    folder = home / "journal"
    if folder.is_dir():
        for paths in journal.sessions(folder).values():
            for path in paths:
                try:
                    if _changed(_read(path), _JOURNAL)[1]:
                        return True
                except (OSError, EOFError):
                    continue
    try:
        state = json.loads((home / "inbox" / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return redact_value(state) != state


def write_marker(home: Path) -> None:
    marker = marker_path(home)
    marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker.write_text("journal, events and inbox redacted by memory-agent scrub\n")


SYNC_BYTES = 8_000_000  # up to this much journal and events, a starting daemon scrubs first


def at_start(service: Any) -> None:
    """The upgrade's scrub, called by a starting daemon while the marker is absent. Up to
    `SYNC_BYTES` of journal and events it scrubs the files before the daemon serves (a few
    seconds at most, once), so the gate never reads the old text; more than that, in a thread.
    A fresh index generation (if the journal changed) is built in a thread; the marker is
    written last, so a daemon stopped before the end scrubs again at its next start."""
    import threading

    home = service.memory.home
    if not needed(home):
        return
    stored = sum(
        p.stat().st_size
        for folder in (home / "journal", home / "events")
        if folder.is_dir()
        for p in folder.iterdir()
        if p.is_file()
    )
    if stored > SYNC_BYTES:
        threading.Thread(target=run_at_start, args=(service,), name="scrub", daemon=True).start()
        return
    report = _scrub_files(service)
    if report is not None:
        threading.Thread(
            target=_refresh_index, args=(service, report), name="scrub-rebuild", daemon=True
        ).start()


def run_at_start(service: Any) -> None:
    report = _scrub_files(service)
    if report is not None:
        _refresh_index(service, report)


def _scrub_files(service: Any) -> dict[str, Any] | None:
    try:
        report = scrub_home(
            service.memory.home,
            events_keep=[service.events.path],
            mark=False,
            gate_lock=service.gate_lock,
            lessons=False,  # before the daemon serves: no pass over every KB file
        )
    except Exception as exc:  # noqa: BLE001 - retried at the next start (no marker)
        log.error("scrub: failed (%s: %s); retried at the next start", type(exc).__name__, exc)
        return None
    j, e = report["journal"], report["events"]
    log.info(
        "scrub: %d journal line(s) in %d file(s), %d event line(s), inbox %d redacted; "
        "`memory-agent scrub` lists the lessons the gate wrote by itself, to review",
        j["lines"],
        j["rewritten"],
        e["lines"],
        report["inbox"],
    )
    return report


def _refresh_index(service: Any, report: dict[str, Any]) -> None:
    """Episodes follow the journal: a fresh generation drops the old episode text."""
    if report["journal"]["lines"]:
        try:
            service.rebuild()
        except Exception as exc:  # noqa: BLE001 - the next sync re-derives the episodes anyway
            log.warning("scrub: rebuild failed (%s); run `memory-agent rebuild`", exc)
    write_marker(service.memory.home)


def scrub_command(home: Path, *, rebuild: bool = True) -> dict[str, Any]:
    """`memory-agent scrub`: an older daemon (it writes unredacted events) is stopped first; a
    daemon of this version too when a journal file or the gate's state is to be rewritten
    (its gate must not run meanwhile), else it keeps running (its own events file is skipped:
    it is redacted). The spawn lock is held throughout: no daemon starts meanwhile.
    If a journal record changed, the daemon builds a fresh index generation, so the episodes
    follow the scrubbed journal and the old generation's files are dropped."""
    from memory_agent import __version__
    from memory_agent.client import DaemonClient

    client = DaemonClient(home)
    with client.spawn_lock():  # no daemon starts while the files are rewritten
        health, stopped = client.health(), None
        # An older daemon writes unredacted events; this version's daemon runs its gate,
        # which must not read a journal file between its rewrite and the reset of its read
        # positions (`scrub_home`), nor save a state read before: stopped when that applies.
        if health is not None and (
            health.get("version") != __version__ or needs_daemon_stopped(home)
        ):
            client.stop(wait=True)
            stopped, health = health.get("pid"), None
        live = (
            [] if health is None else list((home / "events").glob(f"*-{health.get('pid')}-*.jsonl"))
        )
        reply = scrub_home(home, events_keep=live)
    reply["stopped_daemon"] = stopped
    reply["index"] = None
    if reply["journal"]["lines"] and rebuild:
        try:
            reply["index"] = client.admin("rebuild")
        except Exception as exc:  # noqa: BLE001 - the files are scrubbed: say the fix
            reply["index"] = {"error": str(exc), "fix": "run `memory-agent rebuild`"}
    return reply
