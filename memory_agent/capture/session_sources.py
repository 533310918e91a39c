"""Where past sessions are: `memory-agent import`'s PATHs walked, each file recognised by
what it holds, and read by its format's reader one session at a time.

    Claude Code   ~/.claude/projects/<project>/<session>.jsonl      (`capture.transcript_formats`)
    Codex         ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl      (`capture.transcript_formats`)
    opencode      ~/.local/share/opencode/opencode.db (SQLite)      (`capture.opencode_store`)
    Aider         <repository>/.aider.chat.history.md               (`capture.aider_history`)

A PATH is a file or a folder; a folder is walked (`.git`, `node_modules`, `__pycache__` and
`.venv` are not entered, links to folders are not followed) and each candidate file
(`*.jsonl`, `*.db`, `*.sqlite`, `.aider.chat.history.md`) is recognised by its content, not
its name alone: a JSONL file by its first records (a `session_meta` record: a Codex rollout;
a `sessionId` or `uuid` on a `user`, `assistant`, `summary`, ... record: a Claude Code
transcript), a SQLite file by opencode's tables, a Markdown file by Aider's first line
(`# aider chat started at`). Anything else is not a session source (a folder may hold notes
as well: `import` reads those as notes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memory_agent.capture.past_sessions import PastSession

__all__ = ["AIDER_HISTORY", "FORMATS", "Source", "detect", "find_sources", "read_source"]

AIDER_HISTORY = ".aider.chat.history.md"  # Aider's default --chat-history-file
FORMATS = ("claude-code", "codex", "opencode", "aider")
NOT_ENTERED = {".git", "node_modules", "__pycache__", ".venv"}
_HEAD = 65_536  # bytes of a file read to recognise it
_CLAUDE_TYPES = {"user", "assistant", "summary", "system", "progress", "file-history-snapshot"}
_CLAUDE_TYPES |= {"queue-operation", "attachment", "last-prompt"}


@dataclass
class Source:
    path: Path
    format: str
    size: int


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD)
    except OSError:
        return b""


def _jsonl_format(head: bytes) -> str | None:
    import json

    for line in head.splitlines()[:40]:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # the last line of the head may be cut
        if not isinstance(row, dict):
            return None
        if row.get("type") == "session_meta":
            return "codex"
        if row.get("type") in _CLAUDE_TYPES and ("sessionId" in row or "uuid" in row):
            return "claude-code"
    return None


def detect(path: Path) -> str | None:
    """The format of one file (`FORMATS`), or None when it is not a session source."""
    name = path.name
    if name.endswith(".jsonl"):
        return _jsonl_format(_head(path))
    if name.endswith((".md", ".txt")):
        first = _head(path)[:4096].decode("utf-8", "replace").lstrip()
        return "aider" if first.startswith("# aider chat started at") else None
    if name.endswith(".db") or name.endswith(".sqlite"):
        if not _head(path).startswith(b"SQLite format 3\x00"):
            return None
        from memory_agent.capture.opencode_store import is_opencode_db

        return "opencode" if is_opencode_db(path) else None
    return None


def find_sources(paths: list[str]) -> tuple[list[Source], list[str]]:
    """The session sources under `paths` (files or folders, walked), in a stable order, and
    the paths that do not exist. A file given by name counts only when it is recognised."""
    found: list[Source] = []
    missing: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(os.path.expanduser(raw)).absolute()
        if not path.exists():
            missing.append(raw)
            continue
        files = [path] if path.is_file() else _walk(path)
        for file in files:
            real = file.resolve()
            if real in seen:
                continue
            kind = detect(file)
            if kind is not None:
                seen.add(real)
                try:
                    size = file.stat().st_size
                except OSError:
                    continue
                found.append(Source(file, kind, size))
    return found, missing


def _walk(folder: Path) -> Iterator[Path]:
    for here, dirs, files in os.walk(folder):  # links to folders are not followed
        dirs[:] = sorted(d for d in dirs if d not in NOT_ENTERED)
        for name in sorted(files):
            if name.endswith((".jsonl", ".db", ".sqlite")) or name == AIDER_HISTORY:
                yield Path(here) / name


def read_source(source: Source) -> Iterator[PastSession]:
    """The sessions of one source, one at a time."""
    if source.format in ("claude-code", "codex"):
        from memory_agent.capture.transcript_formats import read_claude, read_codex

        reader = read_claude if source.format == "claude-code" else read_codex
        yield from reader(source.path)
    elif source.format == "opencode":
        from memory_agent.capture.opencode_store import read_opencode

        yield from read_opencode(source.path)
    elif source.format == "aider":
        from memory_agent.capture.aider_history import read_aider

        yield from read_aider(source.path)
