"""`Service`: what the daemon serves — one `Memory`, one model, calls served concurrently.

- Reads never wait for writes. Search, get, history, the recall hook, status and the browser's
  routes take no lock: they answer from the index's published snapshot (`Index.snapshot`),
  which a write replaces whole when it is done, so a read sees each write whole or not at all.
- Writes are serialised among themselves by `lock` (the memory's write lock): add, supersede,
  archive, gc, sync, a rebuild's scan and switch, the gate's writes. A write's reply comes
  after its snapshot is published: a search sent after the reply sees the write.
- Embedding happens outside any lock: a write's chunks are embedded (into the embedding
  cache) before it takes the write lock, so the write itself finds them cached; a search
  embeds its query with no lock held (ONNX Runtime and numpy release the GIL).
- The gate's runs are serialised among themselves (`gate_lock`); its journal parse and
  summarizer hold no other lock, and its gateway writes take the write lock.
- The model loads in the background on first use (or at start with `preload`). While it
  loads, `search` answers from the lexical channel at once and says so (`degraded`); writes wait
  for the model *before* taking the lock, so they never hold searches up.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import threading
import time
from typing import Any

from memory_agent import __version__, limits
from memory_agent.capture import journal
from memory_agent.capture.gate import Gate
from memory_agent.capture.redact import redact
from memory_agent.errors import Conflict, Invalid, NotReady, describe
from memory_agent.index.memory import Memory
from memory_agent.kb.gateway import Gateway
from memory_agent.recall import injection as recall_mod
from memory_agent.recall import reads
from memory_agent.recall.events import EventLog, apply_event, compact, fold
from memory_agent.recall.reads import Found, run_search
from ragcore import Document, chunk_document

__all__ = ["Service"]

log = logging.getLogger("memory_agent.service")
QUERY_LOG_CHARS = 500  # a query is logged (usage events) up to this many characters


class _LockedGateway:
    """The gateway as the gate sees it: each write embeds its text first (no lock), then runs
    under the write lock; the gate's own work (journal parse, summarizer) holds no lock."""

    def __init__(self, service: Service):
        self._service = service

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._service.gateway, name)
        if name not in ("add", "supersede", "archive", "archive_many"):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            self._service.pre_embed(kwargs.get("title", args[0] if args else None),
                                     kwargs.get("body", args[1] if len(args) > 1 else None))  # fmt: skip
            with self._service.lock:
                return attr(*args, **kwargs)

        return locked


class Service:
    def __init__(self, memory: Memory):
        self.memory = memory
        self.gateway = Gateway(memory)
        # Usage events: fold what earlier sessions logged, then log this session to its own file.
        events_dir = memory.home / "events"
        folded = fold(events_dir)
        memory.stats = folded.stats
        self.fold_report = folded
        self.events = EventLog(events_dir, clock=memory.clock)
        self._qid_prefix = secrets.token_hex(4) + "-"
        self._qids = itertools.count(1)
        try:  # gzip finished sessions' files; the fold reads both forms
            compacted = compact(events_dir, keep=self.events.path)
            if compacted:
                log.info("events: compacted %d old session file(s)", len(compacted))
        except OSError as exc:  # derived data: a failed compaction must not stop the daemon
            log.warning("events: compaction failed (%s); it is retried at the next start", exc)
        if folded.corrupt_lines or folded.read_errors:
            log.warning(
                "events: %d corrupt line(s) skipped, read errors: %s",
                folded.corrupt_lines,
                folded.read_errors,
            )
        try:  # gzip idle sessions' journals; the reader reads both forms
            compacted = journal.compact(memory.place.journal_dir)
            if compacted:
                log.info("journal: compacted %d idle session file(s)", len(compacted))
        except OSError as exc:
            log.warning("journal: compaction failed (%s); it is retried at the next start", exc)
        self.lock = memory.write_lock  # writes only: reads never take it
        self._rebuild_lock = threading.Lock()
        self._stats_lock = threading.Lock()  # the live usage stats, changed by every read
        self.gate_lock = threading.Lock()  # one gate run (or accept, reject) at a time
        self._start_lock = threading.Lock()  # the model-load thread and the gate timer
        self.gate = Gate(memory, _LockedGateway(self), events=self._event)
        self._gate_timer: threading.Timer | None = None
        self.started = time.time()
        self.last_used = time.monotonic()
        self._model_thread: threading.Thread | None = None
        self._model_error: str | None = None
        self._model_fix = ""
        self._model_ready = threading.Event()
        self.repair_error: str | None = None

    # -- model loading -----------------------------------------------------------------
    @property
    def model_loaded(self) -> bool:
        return self._model_ready.is_set() and self._model_error is None

    def start_model_load(self) -> None:
        with self._start_lock:
            if self._model_thread is not None:
                return
            self._model_thread = threading.Thread(
                target=self._load_model, name="model-load", daemon=True
            )
            self._model_thread.start()

    def _load_model(self) -> None:
        t = time.perf_counter()
        try:
            self.memory.embedder.load()
            log.info(
                "model %s loaded in %.1f s", self.memory.embedder.model_id, time.perf_counter() - t
            )
        except Exception as exc:  # reported through health, status and every call
            info = describe(exc)
            self._model_error = info.message
            self._model_fix = info.fix
            log.error(
                "model failed to load: %s", self._model_error,
                exc_info=exc if info.code == "internal" else None,
            )  # fmt: skip
            self._model_ready.set()
            return
        try:
            self.repair()
        finally:
            self._model_ready.set()

    def repair(self) -> None:
        """Build a new home's first index and finish writes a killed process left behind, so
        the state is repaired before anyone asks. A failure here is not a model failure: it is
        logged, shown by health, and retried by the next write (or fixed by a rebuild)."""
        try:
            with self.lock, self.memory.session():
                if not self.memory.index.exists():
                    self.memory.sync()
                done = self.gateway.recover()
            self.repair_error = None
            if done:
                log.info(
                    "recovered %d unfinished write(s): %s",
                    len(done),
                    ", ".join(str(r.get("id", r.get("ids"))) for r in done),
                )
        except Exception as exc:
            self.repair_error = f"{type(exc).__name__}: {exc}"
            log.error(
                "could not finish the pending writes yet: %s", self.repair_error, exc_info=exc
            )

    def wait_for_model(self) -> None:
        self.start_model_load()
        self._model_ready.wait()
        if self._model_error:
            raise NotReady(
                f"the embedding model {self.memory.cfg.embedder!r} could not be loaded: "
                f"{self._model_error}",
                (self._model_fix + "; then " if self._model_fix else "")
                + "restart the daemon with `memory-agent stop` (or `memory-agent init "
                "--embedder minilm` for the offline model)",
            )

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def _event(self, kind: str, **fields: Any) -> None:
        event = self.events.append(kind, **fields)
        with self._stats_lock:
            apply_event(self.memory.stats, event)

    def pre_embed(self, title: Any, body: Any) -> None:
        """Embed a write's chunks into the embedding cache before it takes the write lock:
        the write (its dedup and its index refresh) then finds them cached, and a long entry's
        seconds of embedding hold up neither searches nor other writes."""
        if not (isinstance(title, str) and isinstance(body, str)) or not self.model_loaded:
            return
        if len(body) > limits.MAX_BODY or len(title) > limits.MAX_TITLE:
            return  # refused by the gateway anyway
        try:
            doc = Document("pre-embed", title.strip(), body.strip())
            chunks = chunk_document(doc, int(self.memory.cfg.max_chars))
            self.memory.embedder.embed_documents([c.text for c in chunks])
        except Exception as exc:  # noqa: BLE001 - an optimisation: the write embeds anyway
            log.debug("pre-embedding failed: %s", exc)

    # -- hooks: recall and the gate ---------------------------------------------------------
    def recall(self, prompt: str, session: str | None, event: str, cwd: str | None) -> dict:
        """What a hook injects: recall before a prompt, a digest at a session's start. Nothing
        while the model loads (a hook never waits for it)."""
        self.touch()
        if str(self.memory.cfg.inject) != "on":
            return {"context": "", "ids": [], "reason": "inject is off"}
        if not self.model_loaded:
            self.start_model_load()
            return {"context": "", "ids": [], "reason": "the model is loading"}
        limit = int(self.memory.cfg.recall_limit)
        if event == "session-start":  # no lock: it reads a snapshot
            found = recall_mod.digest(self.memory, cwd, limit=min(limit, 4))
        else:
            found = recall_mod.recall(self.memory, prompt, session, limit=limit)
        self._event("inject", session=session, event=event, ids=found.ids, chars=len(found.text))
        return {"context": found.text, "ids": found.ids}

    def hook_event(self, event: str, session: str | None) -> dict:
        """A turn or a session ended: run the gate soon (once for a burst of events)."""
        self.touch()
        if event in ("stop", "session-end") and str(self.memory.cfg.gate) != "off":
            with self._start_lock:
                if self._gate_timer is not None:
                    self._gate_timer.cancel()
                self._gate_timer = threading.Timer(2.0, self._gate_in_background)
                self._gate_timer.daemon = True
                self._gate_timer.start()
        return {"status": "ok"}

    def _gate_in_background(self) -> None:
        try:
            report = self.run_gate()
            if report["promoted"] or report["proposed"]:
                log.info("gate: %s", report)
        except Exception as exc:  # noqa: BLE001 - logged; the next event tries again
            info = describe(exc)
            log.warning("gate failed: %s", info.message,
                        exc_info=exc if info.code == "internal" else None)  # fmt: skip

    def run_gate(self) -> dict[str, Any]:
        self.touch()
        self.wait_for_model()
        with self.gate_lock:  # the journal parse and the summarizer run without the write lock
            return self.gate.run(write_lock=self.lock)

    # -- what the browser reads (memory_agent.ui) ------------------------------------------
    def overview(self) -> dict[str, Any]:
        """Counts by type, status and source, and what the gate and gc would do."""
        from collections import Counter

        from memory_agent.recall.gc import plan

        self.touch()
        with self.memory.session():  # no lock: one snapshot of the index
            by_type, by_status, by_source = Counter(), Counter(), Counter()
            snap = self.memory.index.snapshot() if self.memory.index.exists() else None
            for info in snap.docs() if snap is not None else ():
                by_source[info.source] += 1
                if info.source == "kb":
                    by_type[info.type] += 1
                    by_status[info.status] += 1
            gc = plan(self.memory, self.memory.clock()) if self.memory.index.exists() else {}
        return {
            "types": dict(by_type),
            "statuses": dict(by_status),
            "sources": dict(by_source),
            "dormant": len(gc.get("dormant", [])),
            "archive_candidates": len(gc.get("archive", [])),
            "proposals": len(self.gate.proposals()),
        }

    def entries(
        self, offset: int, limit: int, entry_type: str, status: str, source: str
    ) -> dict[str, Any]:
        """A page of documents, newest first, with their usage stats."""
        self.touch()
        with self.memory.session():  # no lock: one snapshot of the index
            docs = [
                info
                for info in self.memory.index.snapshot().docs()
                if (not entry_type or info.type == entry_type)
                and (not status or info.status == status)
                and (not source or info.source == source)
            ]
        docs.sort(key=lambda d: (str(d.meta.get("created") or ""), d.id), reverse=True)
        rows = []
        for info in docs[offset : offset + limit]:
            s = self.memory.stats.get(info.id)
            rows.append(
                {
                    "id": info.id,
                    "title": info.title,
                    "type": info.type,
                    "status": info.status,
                    "source": info.source,
                    "created": str(info.meta.get("created") or ""),
                    "recall_count": s.recall_count if s else 0,
                    "importance": s.importance if s else None,
                }
            )
        return {"total": len(docs), "offset": offset, "entries": rows}

    def entry_context(self, entry_id: str) -> dict[str, Any]:
        """An entry's usage stats and its linked neighbours."""
        self.touch()
        with self.memory.session():  # no lock: one snapshot of the index
            snap = self.memory.index.snapshot() if self.memory.index.exists() else None
            graph = self.memory.link_graph(snap) if snap is not None else {}
            neighbours = []
            for other, kind in graph.get(entry_id, []):
                info = snap.doc(other) if snap is not None else None
                if info is not None:
                    neighbours.append({"id": other, "title": info.title, "kind": kind})
        s = self.memory.stats.get(entry_id)
        return {
            "id": entry_id,
            "stats": s.as_json() if s else None,
            "neighbours": neighbours,
        }

    def proposals(self) -> dict[str, Any]:
        self.touch()
        return {"proposals": self.gate.proposals()}

    def accept(self, proposal_id: str) -> dict[str, Any]:
        self.touch()
        self.wait_for_model()
        with self.gate_lock:  # its gateway write takes the write lock
            return self.gate.accept(proposal_id)

    def reject(self, proposal_id: str, reason: str) -> dict[str, Any]:
        self.touch()
        limits.check_text("reason", reason, limits.MAX_REASON, required=True)
        with self.gate_lock:
            return self.gate.reject(proposal_id, " ".join(reason.split()))

    # -- calls ----------------------------------------------------------------------------
    def search(self, query: str, caller: str | None = None, **kwargs: Any) -> dict[str, Any]:
        self.touch()
        t = time.perf_counter()
        if not self.model_loaded:
            self.start_model_load()
            if not self._model_ready.wait(timeout=0.05):
                found = run_search(self.memory, query, use_dense=False, **kwargs)
                found.reply["degraded"] = (
                    "model loading: lexical channel only; files changed on "
                    "disk are indexed once the model is ready"
                )
                return self._log_search(query, found, t, caller)
            self.wait_for_model()
        found = run_search(self.memory, query, **kwargs)  # no lock: it reads a snapshot
        return self._log_search(query, found, t, caller)

    def _log_search(
        self, query: str, found: Found, started: float, caller: str | None
    ) -> dict[str, Any]:
        """Log the query and its hits (one write); fold the recalls into the live stats."""
        reply = found.reply
        qid = f"{self._qid_prefix}{next(self._qids):x}"  # unique per daemon, no system call
        items: list[tuple[str, dict[str, Any]]] = [
            (
                "query",
                {
                    "qid": qid,
                    # redacted with a margin, then cut exactly: a secret across the cut
                    # leaves nothing
                    "text": redact(query[: QUERY_LOG_CHARS + 4096])[:QUERY_LOG_CHARS],
                    "results": len(reply["hits"]),
                    "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                    "caller": caller,
                },
            )
        ]
        for rank, hit in enumerate(reply["hits"], start=1):
            items.append(
                (
                    "recall",
                    {
                        "qid": qid,
                        "entry": hit["id"],
                        "rank": rank,
                        "score": hit["score"],
                        "channel": found.channels.get(hit["id"], "links"),
                    },
                )
            )
        events = self.events.append_many(items)
        with self._stats_lock:
            for event in events[1:]:
                apply_event(self.memory.stats, event)
        return reply

    def get(self, entry_id: str) -> dict[str, Any]:
        self.touch()
        reply = reads.get(self.memory, entry_id)  # reads the file; no lock
        self._event("get", entry=reply["id"])
        return reply

    def set_importance(self, entry_id: str, importance: int, note: str | None) -> dict[str, Any]:
        """Its only side effect is an event (which the ranking reads)."""
        self.touch()
        if (
            isinstance(importance, bool)
            or not isinstance(importance, int)
            or not 1 <= importance <= 10
        ):
            raise Invalid(
                f"importance: {importance!r} is out of range",
                "pass a whole number from 1 (minor) to 10 (must not be missed)",
            )
        limits.check_text("note", note, limits.MAX_NOTE)
        entry = reads.get(self.memory, entry_id)  # refuses unknown ids
        self._event("importance", entry=entry["id"], importance=importance, note=note)
        return {"id": entry["id"], "importance": importance, "note": note}

    def history(self, entry_id: str) -> dict[str, Any]:
        self.touch()
        return reads.history(self.memory, entry_id)  # reads the files; no lock

    def gc(self, *, dry_run: bool = True, confirm: bool = False) -> dict[str, Any]:
        from memory_agent.recall.gc import plan

        self.touch()
        self.wait_for_model()
        with self.lock:
            with self.memory.session():
                self.memory.sync()
                report = plan(self.memory, self.memory.clock())
                if dry_run or not report["archive"]:
                    return {**report, "status": "dry-run" if dry_run else "nothing to archive"}
                ids = [c["id"] for c in report["archive"]]
                reply = self.gateway.archive_many(
                    ids, "idle past the archive threshold (memory-agent gc)", confirm=confirm
                )
            return {**report, **reply}

    def _write(self, fn, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """A write: embed its text with no lock held, then run it under the write lock. The
        reply comes after the new snapshot is published (read-your-writes)."""
        self.touch()
        self.wait_for_model()
        if kwargs.get("confirm", True):
            self.pre_embed(kwargs.get("title"), kwargs.get("body"))
        with self.lock:
            return fn(*args, **kwargs)

    def add(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self.gateway.add, **kwargs)

    def supersede(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self.gateway.supersede, **kwargs)

    def archive(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self.gateway.archive, **kwargs)

    def status(self) -> dict[str, Any]:
        from memory_agent.capture.clients import last_events

        reply = self._status()
        reply["clients"] = last_events(self.memory.home)  # each agent's last hook event
        return reply

    def _status(self) -> dict[str, Any]:
        self.touch()
        if not self.model_loaded:
            self.start_model_load()
            reply = self.memory.status(sync=False)
            reply["degraded"] = "model loading: status is of the index as last refreshed"
            return reply
        # Never waits for a write: with one in flight, the status is of the live snapshot
        # (the write applies what changed on disk).
        if self.lock.acquire(blocking=False):
            try:
                reply = self.memory.status()
            finally:
                self.lock.release()
        else:
            reply = self.memory.status(sync=False)
        if self.repair_error:
            reply["problems"] = [
                *reply.get("problems", []),
                f"pending writes could not be finished: {self.repair_error}; "
                "run `memory-agent rebuild`",
            ]
        return reply

    def rebuild(self) -> dict[str, Any]:
        """A fresh generation. The service lock is held only to scan and to switch, so
        searches keep answering from the live generation while it is built."""
        self.touch()
        self.wait_for_model()
        if not self._rebuild_lock.acquire(blocking=False):
            raise Conflict("a rebuild is already running", "wait for it to finish")
        try:
            reply = self.memory.rebuild(hold=self.lock)
        finally:
            self._rebuild_lock.release()
        self.repair()  # writes that could not be finished on a broken index can be now
        return reply

    def sync(self) -> dict[str, Any]:
        return self._write(self.memory.status)

    @property
    def model_state(self) -> str:
        if self._model_error:
            return "failed"
        if self._model_ready.is_set():
            return "ready"
        return "loading" if self._model_thread is not None else "not loaded"

    def health(self) -> dict[str, Any]:
        """Always answers, at once: touches neither the model nor the store."""
        return {
            "status": "ok",
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started, 1),
            "home": str(self.memory.home),
            "embedder": self.memory.cfg.embedder,
            "model": self.model_state,
            "model_loaded": self.model_loaded,
            "model_error": self._model_error,
            "model_fix": self._model_fix or None,
            "repair_error": self.repair_error,
            "generation": self.memory.current_generation(),
            "rebuilding": self._rebuild_lock.locked(),
        }
