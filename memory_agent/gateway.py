"""The write gateway: the only way anything is written to the knowledge base.

    dedup search -> validate -> intent -> atomic write -> git commit (exactly those files)
    -> incremental index refresh -> reply {status, id, path, commit, generation}

Nothing is deleted or rewritten in place: `supersede` writes a new entry and marks the old one
(both in one commit); `archive` marks an entry archived with a reason (the file stays). Both
return a preview and write nothing unless `confirm=True`.

Crash safety: before touching a file, the gateway writes an *intent* (`run/pending/*.json`)
holding the full text of every file it is about to write and the commit message. `recover()`,
run before every write and by `status`, redoes any intent left by a killed process: it writes
the files (idempotent), commits whatever is not committed yet, refreshes the index and files the
reply under the request id. So a SIGKILL between write and commit, or between commit and
refresh, loses nothing.

Idempotency: a reply is stored under its `request_id` (`run/requests/`); a retried call with
the same id gets the first reply back instead of writing again.

Design and failure cases: docs/adr/0004-write-intents-as-a-redo-log.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

from memory_agent.errors import Conflict, Invalid, NotFound, ReadOnly
from memory_agent.gitrepo import KBRepo
from memory_agent.kb import (
    ENTRY_TYPES,
    Entry,
    ValidationError,
    entry_path,
    iter_entry_files,
    make_id,
    read_entry,
    render_entry,
    utc_now,
    validate,
)
from memory_agent.memory import KB_SOURCE, Memory, content_key
from ragcore import Filter, atomic_write

__all__ = ["DEDUP_THRESHOLDS", "Gateway", "pending_intents"]

# Cosine similarity at or above which a new entry is a near-duplicate of an existing active
# entry, per embedder. minilm: the middle of the gap between distinct/related entries (max
# 0.775) and light rewordings (min 0.954) on the demo KB, experiments/dedup-threshold.
# bge-m3: the seed system's calibration on its own KB (distinct <= 0.792, re-adds >= 0.949);
# not re-measured here (no BGE-M3 weights on the measuring machine).
DEDUP_THRESHOLDS = {"minilm": 0.865, "bge-m3": 0.88}
FAULT_ENV = "MEMORY_AGENT_FAULT"  # test hook: "after-write" or "after-commit" kills the process


def _fault(point: str) -> None:
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def _pending_dir(memory: Memory) -> Path:
    return memory.run_dir / "pending"


def pending_intents(memory: Memory) -> list[Path]:
    folder = _pending_dir(memory)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


class Gateway:
    def __init__(self, memory: Memory):
        self.memory = memory

    # -- plumbing -------------------------------------------------------------------------
    @property
    def repo(self) -> KBRepo:
        return KBRepo(self.memory.kb_dir)

    def _request_file(self, request_id: str) -> Path:
        digest = hashlib.sha256(request_id.encode("utf-8")).hexdigest()[:32]
        return self.memory.run_dir / "requests" / f"{digest}.json"

    def _replayed(self, request_id: str | None) -> dict[str, Any] | None:
        if not request_id:
            return None
        path = self._request_file(request_id)
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))["reply"]
        return None

    def _remember(self, request_id: str | None, reply: dict[str, Any]) -> None:
        if request_id:
            path = self._request_file(request_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps({"request_id": request_id, "reply": reply}))

    def _apply(
        self, files: dict[Path, str], message: str, request_id: str | None, reply: dict[str, Any]
    ) -> dict[str, Any]:
        """Intent, atomic writes, one commit of exactly these files, refresh, reply."""
        intent = {
            "files": {str(p.relative_to(self.memory.kb_dir)): text for p, text in files.items()},
            "message": message,
            "request_id": request_id,
            "reply": reply,
        }
        intent_path = _pending_dir(self.memory) / f"{uuid.uuid4().hex}.json"
        intent_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(intent_path, json.dumps(intent, ensure_ascii=False))
        for path, text in files.items():
            atomic_write(path, text)
        _fault("after-write")
        commit = self.repo.commit_paths(list(files), message)
        _fault("after-commit")
        return self._finish(intent_path, intent, commit)

    def _finish(self, intent_path: Path, intent: dict[str, Any], commit: str) -> dict[str, Any]:
        self.memory.sync()
        reply = dict(intent["reply"], commit=commit, generation=self.memory.index.generation)
        self._remember(intent["request_id"], reply)
        intent_path.unlink(missing_ok=True)
        return reply

    def recover(self) -> list[dict[str, Any]]:
        """Finish every write a killed process left half done. Call with the home lock held."""
        done = []
        for intent_path in pending_intents(self.memory):
            try:
                intent = json.loads(intent_path.read_text(encoding="utf-8"))
            except ValueError:  # the intent itself was torn: nothing was written after it
                intent_path.unlink()
                continue
            repo = self.repo
            paths, uncommitted = [], []
            for rel, text in intent["files"].items():
                path = self.memory.kb_dir / rel
                paths.append(path)
                if repo.committed_text(path) == text:
                    continue  # committed before the crash; a later edit on disk is the user's
                current = path.read_text(encoding="utf-8") if path.exists() else None
                if current != text:
                    atomic_write(path, text)
                uncommitted.append(path)
            if uncommitted:
                commit = repo.commit_paths(uncommitted, intent["message"] + " (recovered)")
            else:
                commit = repo.last_commit_touching(paths[0]) or repo.head() or ""
            done.append(self._finish(intent_path, intent, commit))
        for tmp in self.memory.kb_dir.glob("*/.*.tmp"):
            tmp.unlink(missing_ok=True)  # an atomic write that never reached its rename
        return done

    def _begin(self, request_id: str | None) -> dict[str, Any] | None:
        """Start a write: replay a known request, finish what a killed process left (which may
        be this very request), and scan for outside changes."""
        replay = self._replayed(request_id)
        if replay is None:
            self.recover()
            replay = self._replayed(request_id)
        if replay is None:
            self.memory.sync()
        return replay

    # -- lookups ----------------------------------------------------------------------------
    def _existing_ids(self) -> set[str]:
        return {p.stem for p in iter_entry_files(self.memory.kb_dir)}

    def _load_writable(self, entry_id: str) -> tuple[Path, Entry]:
        if not isinstance(entry_id, str) or not entry_id:
            raise Invalid("id: missing; pass the id of an entry (memory_search shows ids)")
        if "/" in entry_id:
            label = entry_id.split("/", 1)[0]
            if any(c.label == label for c in self.memory.corpora()):
                raise ReadOnly(
                    f"{entry_id} belongs to the read-only corpus {label!r}; corpus "
                    "files are edited in their own repository, not through memory"
                )
        path = self.memory.find_path(entry_id) if "/" not in entry_id else None
        if path is None:
            raise NotFound(
                f"no entry with id {entry_id!r}: find ids with memory_search "
                "(or `memory-agent search`)"
            )
        try:
            return path, read_entry(path)
        except ValidationError as exc:
            raise Invalid(
                f"{entry_id}: the file on disk is invalid ({exc}); fix it by hand first"
            ) from exc

    def _duplicate(self, title: str, body: str, exclude: set[str]) -> dict[str, Any] | None:
        """An active KB entry with the same normalised text, or a near-duplicate above the
        embedder's threshold."""
        key = content_key(title, body)
        for doc in self.memory.kb_documents():
            if doc.id in exclude or doc.meta.get("status") != "active":
                continue
            if content_key(doc.title, doc.body) == key:
                return {"duplicate_of": doc.id, "score": 1.0, "match": "exact"}
        threshold = DEDUP_THRESHOLDS.get(self.memory.cfg.embedder, 0.9)
        nearest = self.nearest(title, body, exclude)
        if nearest is not None and nearest[1] >= threshold:
            return {"duplicate_of": nearest[0], "score": round(nearest[1], 4), "match": "near"}
        return None

    def nearest(
        self, title: str, body: str, exclude: set[str] = frozenset()
    ) -> tuple[str, float] | None:
        """The active KB entry most similar to this text (cosine of the first chunk's dense
        vector against every stored chunk), or None. The dedup decision and its calibration
        (experiments/dedup-threshold) both use exactly this."""
        from ragcore import Document, chunk_document

        index = self.memory.index
        chunk = chunk_document(Document("new", title, body), index.max_chars)[0]
        vector = index.embedder.embed_documents([chunk.text])[0].dense
        hits = index.store.search_dense(
            vector, 5 + len(exclude), Filter(statuses=("active",), sources=(KB_SOURCE,))
        )
        for chunk_id, score in hits:
            doc_id = index.payloads.get(chunk_id, {}).get("doc_id")
            if doc_id and doc_id not in exclude:
                return doc_id, score
        return None

    @staticmethod
    def _clean_tags(tags: Any) -> list[str]:
        if tags is None:
            return []
        if isinstance(tags, str):
            tags = [tags]
        if not isinstance(tags, list):
            raise Invalid("tags: must be a list of words, like [git, testing]")
        return list(dict.fromkeys(str(t).strip() for t in tags if str(t).strip()))

    def _new_entry(
        self, title: str, body: str, entry_type: str, tags: list[str], taken: set[str], **extra: Any
    ) -> Entry:
        if not isinstance(title, str) or not title.strip():
            raise Invalid("title: missing; give the entry a one-line title")
        if entry_type not in ENTRY_TYPES:
            raise Invalid(
                f"type: {entry_type!r} is not a type; use one of {', '.join(ENTRY_TYPES)}"
            )
        entry = Entry(
            id=make_id(title.strip(), taken),
            title=title.strip(),
            type=entry_type,
            status="active",
            created=utc_now(),
            body=(body or "").strip(),
            tags=tags,
            extra=extra,
        )
        problems = validate(entry.meta, entry.body)
        if problems:
            raise Invalid("invalid entry, nothing written: " + "; ".join(problems))
        return entry

    # -- the tools --------------------------------------------------------------------------
    def add(
        self,
        title: str,
        body: str,
        type: str = "note",
        tags: Any = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        with self.memory.session():
            replay = self._begin(request_id)
            if replay is not None:
                return replay
            entry = self._new_entry(title, body, type, self._clean_tags(tags), self._existing_ids())
            duplicate = self._duplicate(entry.title, entry.body, exclude=set())
            if duplicate is not None:
                reply = {"status": "duplicate", "id": duplicate["duplicate_of"], **duplicate}
                self._remember(request_id, reply)
                return reply
            path = entry_path(self.memory.kb_dir, entry.type, entry.id)
            reply = {"status": "created", "id": entry.id, "path": str(path)}
            return self._apply(
                {path: render_entry(entry)}, f"memory: add {entry.id}", request_id, reply
            )

    def supersede(
        self,
        old_id: str,
        title: str,
        body: str,
        type: str | None = None,
        tags: Any = None,
        confirm: bool = False,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        with self.memory.session():
            replay = self._begin(request_id if confirm else None)
            if replay is not None:
                return replay
            old_path, old = self._load_writable(old_id)
            if old.status == "superseded":
                raise Conflict(
                    f"{old_id} is already superseded by "
                    f"{old.extra.get('superseded_by')}; supersede that entry instead"
                )
            if old.status == "archived":
                raise Conflict(
                    f"{old_id} is archived ({old.extra.get('archive_reason')}); "
                    "add a new entry instead"
                )
            new_tags = self._clean_tags(tags) if tags is not None else list(old.tags)
            new = self._new_entry(
                title, body, type or old.type, new_tags, self._existing_ids(), supersedes=[old.id]
            )
            now = new.created
            old.status = "superseded"
            old.extra.update(superseded_by=new.id, superseded_at=now)
            new_path = entry_path(self.memory.kb_dir, new.type, new.id)
            files = {new_path: render_entry(new), old_path: render_entry(old)}
            if not confirm:
                return {
                    "status": "preview",
                    "id": new.id,
                    "old_id": old.id,
                    "preview": {str(p): text for p, text in files.items()},
                    "next": "call again with confirm=true to write both files in one commit",
                }
            duplicate = self._duplicate(new.title, new.body, exclude={old.id})
            if duplicate is not None:
                reply = {
                    "status": "duplicate",
                    "id": duplicate["duplicate_of"],
                    "old_id": old.id,
                    **duplicate,
                }
                self._remember(request_id, reply)
                return reply
            reply = {"status": "superseded", "id": new.id, "old_id": old.id, "path": str(new_path)}
            return self._apply(
                files, f"memory: supersede {old.id} with {new.id}", request_id, reply
            )

    def archive(
        self, entry_id: str, reason: str, confirm: bool = False, request_id: str | None = None
    ) -> dict[str, Any]:
        with self.memory.session():
            replay = self._begin(request_id if confirm else None)
            if replay is not None:
                return replay
            path, entry = self._load_writable(entry_id)
            if not isinstance(reason, str) or not reason.strip():
                raise Invalid("reason: missing; say why the entry is retired")
            if entry.status == "archived":
                raise Conflict(
                    f"{entry_id} is already archived ({entry.extra.get('archived_at')}: "
                    f"{entry.extra.get('archive_reason')})"
                )
            if entry.status == "superseded":
                raise Conflict(
                    f"{entry_id} is superseded by {entry.extra.get('superseded_by')} "
                    "and already out of search; archive the successor if it is wrong"
                )
            entry.status = "archived"
            entry.extra.update(archived_at=utc_now(), archive_reason=" ".join(reason.split()))
            text = render_entry(entry)
            if not confirm:
                return {
                    "status": "preview",
                    "id": entry.id,
                    "preview": {str(path): text},
                    "next": "call again with confirm=true to archive it (the file stays)",
                }
            reply = {"status": "archived", "id": entry.id, "path": str(path)}
            return self._apply({path: text}, f"memory: archive {entry.id}", request_id, reply)

    def archive_many(self, ids: list[str], reason: str, confirm: bool = False) -> dict[str, Any]:
        """Archive several entries in ONE commit (used by gc). Preview unless `confirm`.
        Call with the home lock held (the daemon's service lock, or a session)."""
        files: dict[Path, str] = {}
        for entry_id in ids:
            path, entry = self._load_writable(entry_id)
            if entry.status != "active":
                continue
            entry.status = "archived"
            entry.extra.update(archived_at=utc_now(), archive_reason=reason)
            files[path] = render_entry(entry)
        if not confirm or not files:
            return {
                "status": "preview",
                "ids": [p.stem for p in files],
                "preview": {str(p): text for p, text in files.items()},
                "next": "run again with confirm to archive them in one commit",
            }
        reply = {"status": "archived", "ids": [p.stem for p in files]}
        return self._apply(files, f"memory: gc archives {len(files)} idle entries", None, reply)
