"""The write gateway's two logs: a redo log of writes in flight, and the replies of finished
writes kept under their request ids.

Redo log (`run/pending/*.json`). Before touching a file, a write records an intent: the full
text of every file it will write, the text each had before, and the commit message. Then:

- the write succeeds: files, commit, index refresh; the intent is removed;
- the write fails in this process (a read-only folder, a stale `.git/index.lock`, a bad date
  for git): it is rolled back at once - each file gets its earlier text back (or is removed
  if it is new), the index of git is reset for those paths, the intent is removed - and the
  caller gets `WriteFailed` saying "rolled back", with the cause and the fix. If the commit
  was made and only a later step failed, the write counts as done and the error says
  "finished";
- the process is killed (SIGKILL, power loss): the intent stays, and `recover` (run before
  every write and when the model has loaded) finishes it - it writes the files (idempotent),
  commits what is not committed yet, refreshes the index and files the reply. A file whose
  committed text already matches is left alone, so a later edit is never overwritten.

Only the temp files of atomic writes named in an intent, left by a process that is gone, are
removed; nothing else in the KB is ever deleted.

Request replies (`run/requests/<sha256 of the id>.json`): `{request_id, tool, fingerprint,
at, reply}`. A retry with the same id, the same tool and the same arguments gets the first
reply back; the same id with another tool or other arguments is a `conflict` naming the
original write. Replies expire after `request_ttl` seconds (a setting, default one day).

Design and failure cases: docs/adr/0004-write-intents-as-a-redo-log.md.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_agent.errors import Conflict, GitError, MemoryAgentError, WriteFailed
from memory_agent.faults import NONE, Faults
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.procs import pid_alive
from ragcore import atomic_write, temp_files

__all__ = ["Intent", "RedoLog", "RequestLog", "fingerprint"]

PRUNE_EVERY_S = 60.0


def fingerprint(tool: str, arguments: dict[str, Any]) -> str:
    """A digest of a call: the tool and its (normalised) arguments."""
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RequestLog:
    def __init__(self, folder: Path, clock: Callable[[], float], ttl: float):
        self.folder = folder
        self.clock = clock
        self.ttl = float(ttl)
        self._pruned = 0.0

    def _path(self, request_id: str) -> Path:
        digest = hashlib.sha256(request_id.encode("utf-8")).hexdigest()[:32]
        return self.folder / f"{digest}.json"

    def _load(self, request_id: str) -> dict[str, Any] | None:
        path = self._path(request_id)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("request_id") != request_id:
            return None
        if self.clock() - float(record.get("at", 0)) > self.ttl:
            return None  # expired: the id may be used again
        return record

    def replay(self, request_id: str | None, tool: str, print_: str) -> dict[str, Any] | None:
        """The first reply to this exact call, or None if the id is new (or expired). Raises
        `Conflict` when the id was used for another call."""
        if not request_id:
            return None
        record = self._load(request_id)
        if record is None:
            return None
        if record.get("tool") == tool and record.get("fingerprint") == print_:
            return record["reply"]
        first = record.get("reply") or {}
        what = first.get("id") or first.get("ids") or "a write"
        raise Conflict(
            f"request_id {request_id!r} was already used by {record.get('tool')} for "
            f"{what} ({first.get('status', 'done')}) with other arguments",
            "use a new request_id for a new write; reuse an id only to retry the same call",
        )

    def remember(
        self, request_id: str | None, tool: str, print_: str, reply: dict[str, Any]
    ) -> None:
        if not request_id:
            return
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        record = {
            "request_id": request_id,
            "tool": tool,
            "fingerprint": print_,
            "at": self.clock(),
            "reply": reply,
        }
        atomic_write(self._path(request_id), json.dumps(record, ensure_ascii=False))
        self.prune()

    def prune(self, force: bool = False) -> int:
        """Remove expired replies (at most once a minute unless `force`)."""
        if not force and time.monotonic() - self._pruned < PRUNE_EVERY_S:
            return 0
        self._pruned = time.monotonic()
        removed = 0
        now = self.clock()
        for path in self.folder.glob("*.json") if self.folder.is_dir() else ():
            try:
                at = float(json.loads(path.read_text(encoding="utf-8")).get("at", 0))
            except (OSError, ValueError, AttributeError):
                continue
            if now - at > self.ttl:
                path.unlink(missing_ok=True)
                removed += 1
        return removed


@dataclass
class Intent:
    path: Path
    files: dict[str, str]  # relative path -> new text
    before: dict[str, str | None]  # relative path -> text before (None: the file is new)
    message: str
    request: dict[str, Any]  # {request_id, tool, fingerprint}
    reply: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "before": self.before,
            "message": self.message,
            "request": self.request,
            "reply": self.reply,
        }


def _cause(exc: BaseException) -> str:
    if isinstance(exc, MemoryAgentError):
        return exc.message
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full ({exc.strerror}: {exc.filename or ''})"
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}: {exc.filename or ''}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def _fix(exc: BaseException, kb_dir: Path) -> str:
    if isinstance(exc, MemoryAgentError) and exc.fix:
        return exc.fix
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = Path(str(exc.filename)).parent if exc.filename else kb_dir
        return f"the disk holding {where} is full: free some space on it, then retry"
    if isinstance(exc, OSError) and exc.filename:
        return f"make sure {Path(str(exc.filename)).parent} is a writable folder, then retry"
    return f"fix the cause and retry; {kb_dir} is as it was"


class RedoLog:
    def __init__(self, folder: Path, kb_dir: Path, faults: Faults = NONE):
        self.folder = folder
        self.kb_dir = kb_dir
        self.faults = faults  # the test seam (memory_agent.faults)
        self.made: tuple[str, str, tuple[str, ...]] | None = None  # `KBRepo.made` of `apply`

    def pending(self) -> list[Path]:
        return sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []

    def begin(
        self,
        files: dict[Path, str],
        message: str,
        request: dict[str, Any],
        reply: dict[str, Any],
    ) -> Intent:
        rel = {str(p.relative_to(self.kb_dir)): text for p, text in files.items()}
        before = {
            r: (p.read_text(encoding="utf-8") if p.exists() else None)
            for r, p in zip(rel, files, strict=True)
        }
        intent = Intent(
            self.folder / f"{uuid.uuid4().hex}.json", rel, before, message, request, reply
        )
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            atomic_write(intent.path, json.dumps(intent.as_json(), ensure_ascii=False))
        except OSError as exc:
            raise WriteFailed(
                f"could not record the write in {self.folder} ({_cause(exc)}); nothing was written",
                _fix(exc, self.folder)
                if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                else f"make {self.folder} writable, then retry",
            ) from exc
        return intent

    def apply(self, intent: Intent) -> str:
        """Write the files and commit them; the commit hash. On failure roll back and raise
        `WriteFailed` ("rolled back")."""
        repo = KBRepo(self.kb_dir, faults=self.faults)
        self.made = None
        written: list[str] = []
        try:
            for rel, text in intent.files.items():
                written.append(rel)
                atomic_write(self.kb_dir / rel, text, mode=0o600)
            self.faults.reach("after-write")
            commit = repo.commit_paths([self.kb_dir / r for r in intent.files], intent.message)
        except (OSError, GitError) as exc:
            problems = self.rollback(intent, written, repo)
            if problems:
                raise WriteFailed(
                    f"the write failed ({_cause(exc)}) and could not be rolled back "
                    f"({'; '.join(problems)}); it stays pending and is finished by the next "
                    "write once the cause is fixed",
                    _fix(exc, self.kb_dir),
                    outcome="pending",
                ) from exc
            raise WriteFailed(
                f"the write failed and was rolled back, nothing changed: {_cause(exc)}",
                _fix(exc, self.kb_dir),
            ) from exc
        except BaseException:
            self.rollback(intent, written, repo)
            raise
        self.made = repo.made
        self.faults.reach("after-commit")
        return commit

    def rollback(self, intent: Intent, written: list[str], repo: KBRepo) -> list[str]:
        """Give each written file its earlier text back, reset git's index for them, drop the
        intent. Returns what could not be undone (then the intent stays)."""
        problems = []
        for rel in written:
            path = self.kb_dir / rel
            old = intent.before.get(rel)
            try:
                if old is None:
                    path.unlink(missing_ok=True)
                elif not path.exists() or path.read_text(encoding="utf-8") != old:
                    atomic_write(path, old, mode=0o600)
            except OSError as exc:
                problems.append(f"{rel}: {_cause(exc)}")
        try:
            repo.unstage([self.kb_dir / r for r in intent.files])
        except GitError as exc:
            problems.append(exc.message)
        self._clean_tmp(intent)
        if not problems:
            self.done(intent)
        return problems

    def done(self, intent: Intent) -> None:
        intent.path.unlink(missing_ok=True)

    def load(self, path: Path) -> Intent | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Intent(
                path,
                dict(data["files"]),
                dict(data.get("before") or {}),
                str(data["message"]),
                dict(data.get("request") or {}),
                dict(data["reply"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def redo(self, intent: Intent) -> str:
        """Finish an intent a killed process left: the commit that holds its files."""
        repo = KBRepo(self.kb_dir)
        paths, uncommitted = [], []
        for rel, text in intent.files.items():
            path = self.kb_dir / rel
            paths.append(path)
            if repo.committed_text(path) == text:
                continue  # committed before the crash; a later edit on disk is the user's
            current = path.read_text(encoding="utf-8") if path.exists() else None
            if current != text:
                atomic_write(path, text, mode=0o600)
            uncommitted.append(path)
        self._clean_tmp(intent)
        if uncommitted:
            return repo.commit_paths(uncommitted, intent.message + " (recovered)")
        return repo.last_commit_touching(paths[0]) or repo.head() or ""

    def _clean_tmp(self, intent: Intent) -> None:
        """Remove temp files of this intent's atomic writes whose writer is gone."""
        for rel in intent.files:
            for tmp, pid in temp_files(self.kb_dir / rel):
                if pid == os.getpid() or not pid_alive(pid):  # never another live writer's
                    tmp.unlink(missing_ok=True)
