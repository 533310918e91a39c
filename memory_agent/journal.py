"""The journal (layer L0): what agents did, turn by turn, one append-only file per session.

    journal/<session>.jsonl                      appended by `memory-agent hook`
    journal/<session>.jsonl.<size>-<mtime>.gz    a compacted part (the plain file of that
                                                 size and mtime, gzipped once it was idle a day)

    {"ts", "session", "event": "start"|"prompt"|"tool"|"stop"|"end", "client", "cwd", ...}
      prompt: "prompt"        tool: "tool", "input", "output", "ok", "error"
      stop:   "answer"        start/end: "source" / "reason"

Everything is redacted (`memory_agent.redact`) and cut (`MAX_FIELD`, tool output 2,000
characters) before it is written; each record is one `write` of one line (O_APPEND), so
concurrent hooks of a session never interleave inside a line. Lines are never rewritten or
dropped: compaction gzips a whole file crash-safely (a part gets its name only when complete,
and names the size and mtime of what it holds, so a plain file left by a crash is recognised
and a session resumed later simply starts a new plain file), and retention only decides which
episodes are searchable.

Standard library only: the hook command writes here without the daemon.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from memory_agent.redact import redact

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["MAX_OUTPUT", "append", "compact", "read_session", "session_name", "sessions"]

MAX_OUTPUT = 2_000  # characters of a tool's output kept
MAX_FIELD = 4_000  # characters of any other text field (a prompt, an answer, an input)
_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def session_name(session_id: str) -> str:
    """A file-name-safe name for an agent's session id (UUIDs pass through unchanged)."""
    if _SAFE.match(session_id or ""):
        return session_id
    import hashlib  # here: the capture hook's start-up pays only for what it uses

    return "s-" + hashlib.sha256((session_id or "").encode("utf-8")).hexdigest()[:24]


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        text = redact(value)
        if len(text) > limit:
            return (
                text[: limit // 2]
                + f"\n[... {len(text) - limit} characters cut ...]\n"
                + text[-limit // 2 :]
            )
        return text
    if isinstance(value, dict):
        return {str(k)[:100]: _cut(v, limit) for k, v in list(value.items())[:50]}
    if isinstance(value, list):
        return [_cut(v, limit) for v in value[:50]]
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return _cut(str(value), limit)


def append(folder: Path, session_id: str, record: dict[str, Any]) -> Path:
    """Append one redacted, cut record to the session's journal; its path."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{session_name(session_id)}.jsonl"
    clean = {k: _cut(v, MAX_OUTPUT if k == "output" else MAX_FIELD) for k, v in record.items()}
    clean["session"] = session_id[:200] if isinstance(session_id, str) else str(session_id)
    data = (json.dumps(clean, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


_PART = re.compile(r"^(?P<session>.+)\.jsonl\.(?P<size>\d+)-(?P<mtime>\d+)\.gz$")


def sessions(folder: Path) -> dict[str, list[Path]]:
    """{session name: its files, oldest part first, the plain file last}."""
    out: dict[str, list[Path]] = {}
    if not folder.is_dir():
        return out
    parts = []
    for path in folder.iterdir():
        m = _PART.match(path.name)
        if m:
            parts.append((m.group("session"), int(m.group("mtime")), path))
    for name, _, path in sorted(parts):
        out.setdefault(name, []).append(path)
    for suffix in (".jsonl.compacting", ".jsonl"):  # aside (being compacted), then live
        for path in sorted(folder.glob("*" + suffix)):
            out.setdefault(path.name[: -len(suffix)], []).append(path)
    return out


def read_session(paths: list[Path]) -> Iterator[dict[str, Any]]:
    """The records of a session's files, in order; a torn or corrupt line is skipped."""
    import gzip

    for path in paths:
        opener = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        yield record
        except (OSError, EOFError, gzip.BadGzipFile):
            continue


def compact(folder: Path, *, idle_s: float = 86400.0, now: float | None = None) -> list[str]:
    """Gzip the plain files of sessions idle for `idle_s` into parts, crash-safely: the file
    is first renamed aside (a hook that appends meanwhile starts a new plain file), then
    gzipped to a temp name, synced and renamed to its part name, and only then removed."""
    done: list[str] = []
    if not folder.is_dir():
        return done
    now = time.time() if now is None else now
    _finish_asides(folder, done)  # a compaction that died: finish it before anything else
    for path in sorted(folder.glob("*.jsonl")):
        aside = path.with_name(path.name + ".compacting")
        try:
            if now - path.stat().st_mtime < idle_s or aside.exists():
                continue
            os.rename(path, aside)
        except FileNotFoundError:
            continue
    _finish_asides(folder, done)
    return done


def _finish_asides(folder: Path, done: list[str]) -> None:
    import gzip
    import secrets

    for aside in sorted(folder.glob("*.jsonl.compacting")):
        st = aside.stat()
        plain = aside.name[: -len(".compacting")]
        part = aside.with_name(f"{plain}.{st.st_size}-{st.st_mtime_ns}.gz")
        if not part.exists():
            tmp = aside.with_name(f".{plain}.gz.tmp-{os.getpid()}-{secrets.token_hex(3)}")
            with open(aside, "rb") as src, gzip.open(tmp, "wb") as dst:
                while chunk := src.read(1 << 16):
                    dst.write(chunk)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, part)
        aside.unlink()
        if plain not in done:
            done.append(plain)
