"""The gate's evidence: verified outcomes found in the journal, read incrementally.

A *verified outcome* inside one episode: a command failed (an error signature), then a file was
changed, then the same command succeeded (`Observation`). One is an observation, not a lesson;
the gate decides when enough of them agree (`memory_agent.capture.gate`).

Incremental: the gate's state remembers how far each journal file was read (by its first line,
so a file compacted into a gzipped part is recognised) and the observations found so far; `scan`
reads only what was appended since (its byte count is `read_bytes` in the gate's report), and
keeps the steps of a session's unfinished episode for the next run.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_agent.capture.episodes import Episode, Step, command_key, episodes_of
from memory_agent.capture.lessons import lesson_key
from memory_agent.intake import journal
from memory_agent.intake.journal import sessions
from memory_agent.intake.projects import identify

__all__ = ["Observation", "merge", "observations", "observe", "scan"]

log = logging.getLogger("memory_agent.gate")
MAX_EPISODES = 200  # episode ids remembered per lesson
TAIL_STEPS = 100  # steps of a session's unfinished episode kept in the state


@dataclass
class Observation:
    key: str
    command: str
    error: str
    files: list[str]
    episode: str
    session: str
    project: str = ""  # the identity of the project it was seen in ("": none)


def _fixes(episode: Episode) -> list[tuple[str, str, list[str]]]:
    """(command, error, files changed) for each failure in the episode that a change fixed."""
    out = []
    for i, step in enumerate(episode.steps):
        if step.ok or step.is_edit or not step.error:
            continue
        key = command_key(step.target)
        edits: list[str] = []
        for later in episode.steps[i + 1 :]:
            if later.is_edit:
                edits.append(later.target)
            elif edits and later.tool == step.tool and command_key(later.target) == key:
                if later.ok:
                    out.append((key, step.error, list(dict.fromkeys(edits))))
                break
    return out


_PROJECTS: dict[str, str] = {}  # cwd -> identity, for journals written before records had it


def _project(episode: Episode) -> str:
    if episode.project or not episode.cwd:
        return episode.project
    if episode.cwd not in _PROJECTS:
        found = identify(episode.cwd)
        _PROJECTS[episode.cwd] = found.identity if found is not None else ""
    return _PROJECTS[episode.cwd]


def observe(episode: Episode) -> list[Observation]:
    """The verified failure -> fix outcomes of one episode."""
    found = []
    for command, error, files in _fixes(episode):
        key = lesson_key(command, error)
        found.append(
            Observation(key, command, error, files, episode.id, episode.session, _project(episode))
        )
    return found


def observations(folder: Path) -> list[Observation]:
    """Every verified failure -> fix in the journal (read whole)."""
    journal: dict[str, Any] = {}
    return [o for episode in scan(folder, journal)[0] for o in observe(episode)]


# -- reading the journal incrementally ------------------------------------------------------------
def _head(data: bytes) -> str:
    """A file's identity: the hash of its first line (a part holds its plain file's lines)."""
    return hashlib.sha256(data.split(b"\n", 1)[0]).hexdigest()[:16]


def _read_new(path: Path, files: dict[str, Any], parts: list[str]) -> tuple[list[dict], int]:
    """The records of `path` past what `files` says was read of it; bytes read."""
    import gzip

    gz = path.name.endswith(".gz")
    try:
        if not gz:
            st = path.stat()
            for entry in files.values():  # unchanged since the last run: not even opened
                if entry.get("ino") == st.st_ino and entry.get("offset") == st.st_size:
                    return [], 0
        with (gzip.open if gz else open)(path, "rb") as fh:
            first = fh.readline()
            if not first.endswith(b"\n") and not gz:
                return [], 0  # a first line still being written
            key = _head(first)
            entry = files.setdefault(key, {"offset": 0})
            size = re.search(r"\.(\d+)-\d+\.gz$", path.name) if gz else None
            if size and entry["offset"] >= int(size.group(1)):  # read whole as a plain file
                parts.append(path.name)
                return [], 0
            fh.seek(entry["offset"])
            data = fh.read()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        log.warning("gate: cannot read %s (%s); it is retried at the next run", path.name, exc)
        return [], 0
    if not gz:
        data = data[: data.rfind(b"\n") + 1]  # a torn last line waits for the next run
        entry["ino"] = st.st_ino
    else:
        parts.append(path.name)  # a part never changes: never opened again
    entry["offset"] += len(data)
    lines = data.decode("utf-8", errors="replace").splitlines()
    records = [r for r in map(journal.parse_line, lines) if r is not None]
    return records, len(data)


def scan(folder: Path, journal: dict[str, Any]) -> tuple[list[Episode], int]:
    """The episodes that gained records since `journal` (updated in place) was last read, and
    the bytes read. A session's last episode may still grow: its steps are kept in the state
    and it is looked at again when its session's file grows."""
    touched: list[Episode] = []
    total = 0
    for name, paths in sessions(folder).items():
        if any(p.name.endswith(".compacting") for p in paths):
            continue  # a compaction is under way (daemon start): read it when it is done
        entry = journal.setdefault(name, {"files": {}, "parts": [], "prompts": 0, "tail": None})
        records: list[dict] = []
        for path in paths:
            if path.name in entry["parts"]:
                continue
            got, n = _read_new(path, entry["files"], entry["parts"])
            records.extend(got)
            total += n
        if not records:
            continue
        tail = entry.get("tail")
        current = None
        if tail:
            current = Episode(name, int(tail["n"]), 0.0, project=str(tail.get("project") or ""))
            current.steps = [Step(s[0], s[1], bool(s[2]), s[3]) for s in tail["steps"]]
        eps = episodes_of(name, records)
        if eps and eps[0].n == 0 and current is not None:  # the open episode goes on
            current.steps.extend(eps.pop(0).steps)
        for e in eps:
            if e.n > 0:
                e.n += int(entry["prompts"])
        entry["prompts"] = int(entry["prompts"]) + sum(1 for e in eps if e.n > 0)
        if current is not None:
            touched.append(current)
        touched.extend(eps)
        last = eps[-1] if eps else current
        if last is None:
            continue
        # Kept for the steps still to come: from its first failure on (nothing before one can
        # be part of a fix), nothing once the session ended.
        failed = [i for i, s in enumerate(last.steps) if not s.ok and not s.is_edit and s.error]
        steps = [] if records[-1].get("event") == "end" or not failed else last.steps[failed[0] :]
        entry["tail"] = {
            "n": last.n,
            "project": _project(last),
            "steps": [[s.tool, s.target, s.ok, s.error] for s in steps[-TAIL_STEPS:]],
        }
    return touched, total


def merge(observed: dict[str, Any], found: list[Observation]) -> None:
    """Add `found` to `observed` (the state's {lesson key: command, error, files, episodes,
    sessions}), each episode and session once, the most recent MAX_EPISODES kept."""
    for obs in found:
        known = observed.setdefault(
            obs.key,
            {
                "command": obs.command,
                "error": obs.error,
                "files": [],
                "episodes": [],
                "sessions": [],
            },
        )
        if obs.episode not in known["episodes"]:
            known["episodes"] = [*known["episodes"], obs.episode][-MAX_EPISODES:]
        if obs.session not in known["sessions"]:
            known["sessions"] = [*known["sessions"], obs.session][-MAX_EPISODES:]
        known["files"] = list(dict.fromkeys([*known["files"], *obs.files]))[:20]
        projects = known.setdefault("projects", [])
        if obs.project not in projects:
            projects.append(obs.project)
