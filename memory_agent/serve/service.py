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
  summarizer hold no other lock, and its gateway writes take the write lock
  (`serve.gate_runs`).
- The model loads in the background on first use (or at start with `preload`; `serve.model`).
  While it loads, `search` answers from the lexical channel at once and says so (`degraded`);
  writes wait for the model *before* taking the lock, so they never hold searches up.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from memory_agent import limits
from memory_agent.config import endpoint_of
from memory_agent.errors import Conflict, describe
from memory_agent.index.memory import Memory
from memory_agent.intake import journal
from memory_agent.intake.projects import ProjectCache
from memory_agent.kb.kbs import KbPlace, split_id
from memory_agent.kb.scopes import project_named
from memory_agent.recall import injection as recall_mod
from memory_agent.recall import reads
from memory_agent.recall.gc import plan
from memory_agent.recall.history import history
from memory_agent.serve import browse, health, kb_admin
from memory_agent.serve.gate_runs import GateRuns
from memory_agent.serve.model import ModelLoader
from memory_agent.serve.pre_embed import PreEmbed
from memory_agent.serve.read_calls import ReadCalls
from memory_agent.serve.readers import Readers
from memory_agent.serve.remote_runs import KbRemotes, RemoteRuns
from memory_agent.serve.usage import Usage
from memory_agent.sync.remote import Syncer
from memory_agent.write.gateway import Gateway
from ragcore import EndpointError

__all__ = ["Service"]

log = logging.getLogger("memory_agent.service")


class Service:
    """The hub the daemon's routes and the MCP tools call. Its parts: the model's lifecycle
    (`model`), the embedding before a write's lock (`pre_embed`), the usage log (`usage`), the
    gate's runs (`gate_runs`) and the browser's reads (`serve.browse`); the tool calls, the
    recall hook, repair, status and health are its own."""

    def __init__(self, memory: Memory):
        self.memory = memory
        self.gateway = Gateway(memory)
        # Usage events: fold what earlier sessions logged, then log this session to its own file.
        self.usage = Usage(memory)
        self.events = self.usage.events  # this session's file (the scrub keeps it)
        try:  # gzip idle sessions' journals; the reader reads both forms
            compacted = journal.compact(memory.place.journal_dir)
            if compacted:
                log.info("journal: compacted %d idle session file(s)", len(compacted))
        except OSError as exc:
            log.warning("journal: compaction failed (%s); it is retried at the next start", exc)
        self.lock = memory.write_lock  # writes only: reads never take it
        self._rebuild_lock = threading.Lock()
        self.repair_error: str | None = None
        self.model = ModelLoader(memory, after_load=self.repair)
        self.pre_embed = PreEmbed(memory, self.model)  # a write's text, before its lock
        self.gate_runs = GateRuns(
            memory,
            self.gateway,
            write_lock=self.lock,
            model=self.model,
            pre_embed=self.pre_embed.write,
            record=self.usage.record,
        )
        self.gate_lock = self.gate_runs.lock  # one gate run (or accept, reject) at a time
        self.started = time.time()
        self.last_used = time.monotonic()
        self.projects = ProjectCache()  # a call's folder -> its project, asked of git
        self._gateways: dict[KbPlace, Gateway] = {self.gateway.place: self.gateway}
        self._gateways_lock = threading.Lock()
        self.remote = KbRemotes(self._remote_runs, memory.kbs.all)  # each KB's rounds
        self.reads = ReadCalls(memory, self.model, self.usage, self.project, self.touch)
        self.rankers = self.reads.rankers  # the recall hook ranks on them too
        self.readers: Readers | None = None  # the reader processes, if any (`run_daemon`)

    def _remote_runs(self, place: KbPlace) -> RemoteRuns:
        syncer = Syncer(
            place.dir,
            place.run_dir or self.memory.run_dir,
            self.memory.write_lock,
            refresh=self.memory.refresh_paths,
            clock=self.memory.clock,
            pre_embed=self.pre_embed.entries,
            faults=self.memory.faults,
            push=place.writable,
        )
        return RemoteRuns(syncer, float(self.memory.cfg.sync_interval))

    def gateway_for(self, name: str | None) -> Gateway:
        """The gateway of the KB `name` (None: personal): `not_found` for an unknown KB,
        `read_only` for one added read-only (`kb.kbs.Registry.writable`)."""
        place = self.memory.kbs.writable(name)
        with self._gateways_lock:  # calls come from many threads; one gateway per KB
            gateway = self._gateways.get(place)
            if gateway is None:
                gateway = self._gateways[place] = Gateway(self.memory, place)
            return gateway

    def project(self, where: str | None) -> str | None:
        """The identity of the project a call comes from: `where` is its folder (the proxy's
        MCP roots or working directory, the CLI's), a project's name or identity; None (no
        project: global) outside a repository."""
        return project_named(where, self.memory.kb_dir, self.projects)

    # -- the model and repair ----------------------------------------------------------------
    def start_model_load(self) -> None:
        self.model.start()

    def repair(self) -> None:
        """Build a new home's first index and finish writes a killed process left behind, so
        the state is repaired before anyone asks. A failure here is not a model failure: it is
        logged, shown by health, and retried by the next write (or fixed by a rebuild)."""
        stage = "pending writes could not be finished"
        try:
            with self.lock, self.memory.session():
                if not self.memory.index.exists():
                    stage = "the first index could not be built"
                    self.memory.refresh()
                    stage = "pending writes could not be finished"
                done = []
                for place in self.memory.kbs.all():  # every KB's writes a kill left
                    if place.writable and place.dir.is_dir():
                        done += self.gateway_for(place.name).recover()
            self.repair_error = None
            if done:
                log.info(
                    "recovered %d unfinished write(s): %s",
                    len(done),
                    ", ".join(str(r.get("id", r.get("ids"))) for r in done),
                )
        except Exception as exc:
            info = describe(exc)
            # what failed, and its own fix (a server that is down wants the server back, not
            # a rebuild); a bug's fix is the log, with a rebuild to get going meanwhile
            fix = info.fix if info.code != "internal" else f"{info.fix}; run `memory-agent rebuild`"
            self.repair_error = f"{stage}: {info.message}; fix: {fix}"
            log.error("%s: %s", stage, info.message, exc_info=exc)

    def touch(self) -> None:
        self.last_used = time.monotonic()

    # -- hooks: recall and the gate ---------------------------------------------------------
    def recall(
        self,
        prompt: str,
        session: str | None,
        event: str,
        cwd: str | None,
        project: str | None = None,
    ) -> dict:
        """What a hook injects: recall before a prompt, a digest at a session's start, from the
        session's project (`project`, the identity the hook found; else the one `cwd` is in)
        and global. Nothing while the model loads (a hook never waits for it)."""
        self.touch()
        self.usage.catch_up()  # what the readers logged: the ranking reads it
        if not project and cwd:
            found = self.projects.of(cwd)
            project = found.identity if found is not None else None
        if str(self.memory.cfg.inject) != "on":
            return {"context": "", "ids": [], "reason": "inject is off"}
        if not self.model.loaded:
            self.model.start()
            why = "not answering" if self.model.error else "loading"
            return {"context": "", "ids": [], "reason": f"the model is {why}"}
        limit = int(self.memory.cfg.recall_limit)
        budget = int(self.memory.cfg.inject_budget)
        try:
            if event == "session-start":  # no lock: it reads a snapshot
                found = recall_mod.digest(
                    self.memory, cwd, limit=min(limit, 4), project=project, budget=budget
                )
            else:
                found = recall_mod.recall(
                    self.memory,
                    prompt,
                    session,
                    limit=limit,
                    project=project,
                    budget=budget,
                    ranker=self.rankers,
                )
        except EndpointError as exc:  # the server went away: nothing injected this time
            self.model.lost(exc)
            return {"context": "", "ids": [], "reason": "the model is not answering"}
        self.usage.record(
            "inject", session=session, event=event, ids=found.ids, chars=len(found.text)
        )
        return {"context": found.text, "ids": found.ids}

    def hook_event(self, event: str, session: str | None) -> dict:
        """A turn or a session ended: run the gate soon (once for a burst of events)."""
        self.touch()
        if event in ("stop", "session-end"):
            self.gate_runs.schedule(self.run_gate)  # through the hub: a run counts as use
        return {"status": "ok"}

    def run_gate(self) -> dict[str, Any]:
        self.touch()
        return self.gate_runs.run()

    def proposals(self) -> dict[str, Any]:
        self.touch()
        return {"proposals": self.gate_runs.proposals()}

    def accept(self, proposal_id: str) -> dict[str, Any]:
        self.touch()
        return self.gate_runs.accept(proposal_id)

    def reject(self, proposal_id: str, reason: str) -> dict[str, Any]:
        self.touch()
        return self.gate_runs.reject(proposal_id, reason)

    # -- what the browser reads (memory_agent.ui) ------------------------------------------
    def overview(self) -> dict[str, Any]:
        self.touch()
        self.usage.catch_up()  # the browser shows each entry's use
        return browse.overview(self.memory, proposals=len(self.gate_runs.proposals()))

    def entries(
        self, offset: int, limit: int, entry_type: str, status: str, source: str, scope: str = ""
    ) -> dict[str, Any]:
        self.touch()
        self.usage.catch_up()  # the browser shows each entry's use
        return browse.entries(self.memory, offset, limit, entry_type, status, source, scope)

    def entry_context(self, entry_id: str) -> dict[str, Any]:
        self.touch()
        self.usage.catch_up()  # the browser shows each entry's use
        return browse.entry_context(self.memory, entry_id)

    # -- calls ----------------------------------------------------------------------------
    def search(
        self, query: str, caller: str | None = None, where: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self.reads.search(query, caller, where, **kwargs)

    def get(self, entry_id: str, caller: str | None = None) -> dict[str, Any]:
        return self.reads.get(entry_id, caller)

    def set_importance(self, entry_id: str, importance: int, note: str | None) -> dict[str, Any]:
        """Its only side effect is an event (which the ranking reads)."""
        self.touch()
        limits.check_importance(importance)
        limits.check_text("note", note, limits.MAX_NOTE)
        entry = reads.get(self.memory, entry_id)  # refuses unknown ids
        self.usage.record("importance", entry=entry["id"], importance=importance, note=note)
        return {"id": entry["id"], "importance": importance, "note": note}

    def history(self, entry_id: str) -> dict[str, Any]:
        self.touch()
        return history(self.memory, entry_id)  # reads the files; no lock

    def gc(self, *, dry_run: bool = True, confirm: bool = False) -> dict[str, Any]:
        self.touch()
        self.usage.catch_up(force=True)  # idleness is judged by every process's recalls
        self.model.wait()
        with self.lock:
            with self.memory.session():
                self.memory.refresh()
                report = plan(self.memory, self.memory.clock())
                if dry_run or not report["archive"]:
                    return {**report, "status": "dry-run" if dry_run else "nothing to archive"}
                ids = [c["id"] for c in report["archive"]]
                reply = self.gateway.archive_many(
                    ids, "idle past the archive threshold (memory-agent gc)", confirm=confirm
                )
            return {**report, **reply}

    def fanout(self, kb: Any = None, confirm: bool = False) -> dict[str, Any]:
        """`memory-agent fanout`: the preview, or the moves' commit (`Gateway.fan_out`)."""
        self.touch()
        self.model.wait()
        with self.lock:
            return self.gateway_for(kb or None).fan_out(confirm)

    def _write(self, fn, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """A write: embed its text with no lock held, then run it under the write lock. The
        reply comes after the new snapshot is published (read-your-writes)."""
        self.touch()
        self.model.wait()
        if kwargs.get("confirm", True):
            self.pre_embed.write(kwargs.get("title"), kwargs.get("body"))
        try:
            with self.lock:
                reply = fn(*args, **kwargs)
        except Exception as exc:
            self.model.lost(exc)  # if its server went away (searches then go lexical)
            raise
        if kwargs.get("confirm", True):
            owner = getattr(fn, "__self__", None)  # the KB written: its round, soon
            self.remote.poke(name=owner.place.name if isinstance(owner, Gateway) else None)
        return reply

    # -- the remote ---------------------------------------------------------------------------
    def remote_set(self, url: str) -> dict[str, Any]:
        self.touch()
        with self.lock:
            reply = self.remote.syncer.set_url(url)
        self.remote.start()
        self.remote.poke(0.0)
        return reply

    def remote_sync(self, kb: str | None = None) -> dict[str, Any]:
        """One round now (`memory-agent sync`; every KB, or `kb` alone): its report."""
        self.touch()
        self.model.wait()  # the index refresh after a pull needs the model
        return kb_admin.sync(self.memory, self.remote, kb)

    def remote_status(self, look: bool = False) -> dict[str, Any]:
        return kb_admin.remote_status(self.remote, look)  # look: a person looks now

    # -- the knowledge bases of the home (`serve.kb_admin`) ---------------------------------
    def kb_list(self) -> dict[str, Any]:
        self.touch()
        return kb_admin.listing(self.memory, self.remote)

    def kb_add(self, name: Any, url: Any, writable: bool = True) -> dict[str, Any]:
        self.touch()
        self.model.wait()  # its entries are indexed at once
        return kb_admin.add(self.memory, self.remote, self.lock, name, url, writable)

    def kb_remove(self, name: Any) -> dict[str, Any]:
        self.touch()
        reply = kb_admin.remove(self.memory, self.remote, self.lock, name)
        with self._gateways_lock:
            self._gateways = {p: g for p, g in self._gateways.items() if p.name != name}
        return reply

    def add(self, where: str | None = None, kb: str | None = None, **kwargs: Any) -> dict[str, Any]:
        gateway = self.gateway_for(kb)
        return self._write(gateway.add, project=self.project(where), **kwargs)

    def supersede(self, where: str | None = None, **kwargs: Any) -> dict[str, Any]:
        gateway = self._gateway_of(kwargs.get("old_id"))
        return self._write(gateway.supersede, project=self.project(where), **kwargs)

    def archive(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self._gateway_of(kwargs.get("entry_id")).archive, **kwargs)

    def resolve_fork(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self._gateway_of(kwargs.get("entry_id")).resolve_fork, **kwargs)

    def allow_secret(self, fingerprint: Any, reason: Any, kb: str | None = None) -> dict[str, Any]:
        """`memory-agent secrets allow`: a finding released in the KB's allow-list."""
        return self._write(self.gateway_for(kb).allow_secret, fingerprint, reason)

    def _gateway_of(self, entry_id: Any) -> Gateway:
        """The gateway of the KB an id names (`team:x`; a bare id: personal)."""
        if not isinstance(entry_id, str) or "/" in entry_id:
            return self.gateway  # it refuses the id with the right error
        return self.gateway_for(split_id(entry_id)[0])

    def import_entries(
        self, sections: Any, label: Any, scope: Any = None, where: Any = None, confirm: bool = False
    ) -> dict[str, Any]:
        """`memory-agent import`: the sections the CLI read, through the gateway's batch
        write (`Gateway.import_entries`), from the project of `where`. Their text is redacted
        before it is embedded or written."""
        from memory_agent.write.imports import clean_sections

        self.touch()
        self.model.wait()
        items = clean_sections(sections)
        for item in items:
            self.pre_embed.write(item.title, item.body)
        project = self.project(where if isinstance(where, str) else None)
        with self.lock:
            return self.gateway.import_entries(
                items, label, scope=scope, project=project, confirm=confirm
            )

    def status(self) -> dict[str, Any]:
        from memory_agent.capture.clients import last_events

        reply = self._status()
        endpoint = endpoint_of(self.memory.cfg)  # the openai embedder's server (never its key)
        if endpoint is not None:
            reply["embedding_url"], reply["embedding_model"] = endpoint["url"], endpoint["model"]
        reply["clients"] = last_events(self.memory.home)  # each agent's last hook event
        reply["remote"] = self.remote_status()  # every KB's (`kbs`: those added)
        return reply

    def _status(self) -> dict[str, Any]:
        self.touch()
        if not self.model.loaded:
            self.model.start()
            reply = self.memory.status(sync=False)
            why = f"not answering ({self.model.error})" if self.model.error else "loading"
            reply["degraded"] = f"model {why}: status is of the index as last refreshed"
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
                self.repair_error,
            ]
        if self.readers is not None:
            reply["readers"] = self.readers.details()
        return reply

    def rebuild(self) -> dict[str, Any]:
        """A fresh generation. The service lock is held only to scan and to switch, so
        searches keep answering from the live generation while it is built."""
        self.touch()
        self.model.wait()
        if not self._rebuild_lock.acquire(blocking=False):
            raise Conflict("a rebuild is already running", "wait for it to finish")
        try:
            reply = self.memory.rebuild(hold=self.lock)
        finally:
            self._rebuild_lock.release()
        self.repair()  # writes that could not be finished on a broken index can be now
        return reply

    def refresh_index(self) -> dict[str, Any]:
        """Wait for the model, bring the index in line with the files, answer the status."""
        return self._write(self.memory.status)

    def rebuilding(self) -> bool:
        return self._rebuild_lock.locked()

    def busy(self) -> str | None:
        """Work in flight that no request waits on, which an idle exit would throw away: a
        rebuild, or the dense graph being built (at 1,000,000 entries, tens of minutes; a
        daemon that left mid-way started it again at its next start)."""
        if self.rebuilding():
            return "a rebuild"
        if self.memory.dense_state() == "building":
            return "the dense graph"
        return None

    def health(self) -> dict[str, Any]:
        """Always answers, at once: touches neither the model nor the store (`serve.health`)."""
        return health.health(self)
