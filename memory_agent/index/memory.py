"""`Memory`: one home's state - its configuration, the index, the scanner that keeps the index
in line with the files, the learned stats and the clock - and the refresh between them.

Two ways to run:
- resident (the daemon): the home lock is held for the process's life, the index stays open,
  and the scanner watches the files (inotify): a refresh with nothing changed looks at nothing;
- per call (a CLI command with no daemon, or a test): each call takes the home lock, opens the
  index, scans (stat only; a file is read only when its stat differs from the index's) and
  closes it again.

The reads (search, get, history) are `memory_agent.recall.reads`, which take a `Memory`; this
module does not import them (docs/adr/0013-layout-by-job.md). Writes go through
`memory_agent.write.gateway`; creating a home is `memory_agent.kb.home`.

Threads (the daemon serves calls concurrently): `write_lock` serialises everything that
changes the index - a write, a refresh, a rebuild's scan and switch. Reads take no lock: they
answer from the index's published snapshot (`Index.snapshot`). A read first refreshes only if no
write is in flight (`refresh_for_read`); otherwise the write in flight applies the changed files.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_agent import config as config_mod
from memory_agent.capture.episodes import EPISODES
from memory_agent.clock import Clock
from memory_agent.errors import MemoryAgentError
from memory_agent.faults import Faults
from memory_agent.files import FileLock
from memory_agent.index.changes import Changes
from memory_agent.index.corpora import Corpus, load_corpora
from memory_agent.index.kb_commit import KbCommit
from memory_agent.index.links import link_graph
from memory_agent.index.scanner import KB_SOURCE, Scanner, SourceStatus
from memory_agent.kb.files import entry_file
from memory_agent.kb.home import DEMO_KB, Home
from memory_agent.kb.kbs import Registry, is_kb_source, split_id
from ragcore import (
    CachedEmbedder,
    Document,
    EmbeddingCache,
    Index,
    IndexError_,
    live_generation,
    make_embedder,
    query_graph,
)

__all__ = ["DEMO_KB", "KB_SOURCE", "Memory", "SourceStatus"]

RESCAN_EVERY_S = 1.0  # without a change signal, a resident memory rescans at most this often

log = logging.getLogger("memory_agent.memory")


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Memory:
    follows = False  # True: the index is another process's, followed (`index.followed`)

    def __init__(
        self,
        cfg: config_mod.Config | None = None,
        *,
        resident: bool = False,
        embedder: Any = None,
        clock: Clock | None = None,
    ):
        self.cfg = cfg or config_mod.load()
        self.place = Home.of(self.cfg)
        self.home = self.place.root
        self.kb_dir = self.place.kb_dir
        self.run_dir = self.place.run_dir
        self.faults = Faults(str(self.cfg.fault), self.run_dir)  # the test seam
        self.resident = resident
        self._given_embedder = embedder  # a model handed in (tests, experiments) wins over config
        self._embedder: CachedEmbedder | None = None
        self._index: Index | None = None
        self.kbs = Registry(self.home)  # the personal KB and those added (`kb.kbs`)
        self.scanner = Scanner(
            self.home,
            self.kb_dir,
            self.corpora,
            lambda: self.repos_file,
            journal_dir=self.place.journal_dir,
            episodes_since=lambda: self.clock() - 86400.0 * float(self.cfg.journal_retention_days),
            other_kbs=self.kbs.others,
        )
        self.last_refresh: str | None = None
        self.lock = FileLock(self.run_dir / "home.lock") if self.run_dir.is_dir() else None
        # Learned per-entry stats (`recall.events.EntryStats` by id: the daemon folds them from
        # events/) and the clock the dynamics use; both are plain attributes so experiments can
        # set them. Typed loosely: the index side does not import the recall side (ADR 0013).
        self.stats: dict[str, Any] = {}
        self.clock = clock or Clock.from_setting(self.cfg.clock)
        self._keys: dict[str, set[str]] | None = None  # content key -> active KB entry ids
        self._graph: tuple[int, dict[str, list[tuple[str, str]]]] | None = None
        self.write_lock = threading.RLock()  # writers only; reads never take it
        self.kb_commit = KbCommit(self.kb_dir)  # the KB commit the index reflects
        self._graph_lock = threading.Lock()
        self._setup_lock = threading.Lock()

    # -- setup ------------------------------------------------------------------------------
    def require_home(self) -> None:
        self.place.require()
        if self.lock is None:
            self.lock = FileLock(self.run_dir / "home.lock")

    @property
    def embedder(self) -> CachedEmbedder:
        if self._embedder is None:  # made once; every search reads it after, with no lock
            with self._setup_lock:  # the daemon's first calls come from several threads
                if self._embedder is None:
                    self._embedder = self._make_embedder()
        return self._embedder

    def _make_embedder(self) -> CachedEmbedder:
        inner = self._given_embedder or make_embedder(
            self.cfg.embedder, **config_mod.embedder_args(self.cfg)
        )
        if isinstance(inner, CachedEmbedder):
            return inner
        return CachedEmbedder(inner, EmbeddingCache(self.cfg.cache_dir))

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = Index(
                self.cfg.index_dir,
                self.embedder,
                writable_sources=self.writable_sources(),
                max_chars=int(self.cfg.max_chars),
                **config_mod.qdrant_of(self.cfg),
                dense_graph=str(self.cfg.dense_graph).lower() not in ("off", "0", "false", "no"),
            )
        return self._index

    def query_graph(self) -> str | None:
        """The graph a query's model run uses once the model is loaded (MiniLM's `int8` or
        `float`, with the reason when int8 was asked for and could not be built); None before
        that, or for a model without the choice. Makes nothing (`/health`)."""
        return query_graph(self._embedder)

    def dense_state(self) -> str:
        """How dense search runs (`Index.dense_state`); "closed" while no index is made: this
        makes none, so it answers even when the embedder cannot be made (`/health`)."""
        index = self._index
        return "closed" if index is None else index.dense_state()

    def writable_sources(self) -> list[str]:
        """The sources whose documents are writable: every KB but those added read-only."""
        return [p.source for p in self.kbs.all() if p.writable]

    def current_generation(self) -> str | None:
        """The generation CURRENT names, read from disk (touches no model or store)."""
        return live_generation(self.cfg.index_dir)

    @property
    def repos_file(self) -> Path:
        return self.place.repos_file

    def corpora(self) -> list[Corpus]:
        return load_corpora(self.repos_file)

    @contextlib.contextmanager
    def session(self) -> Iterator[Memory]:
        """The home lock (and, per call, an open index) for the duration of the block."""
        self.require_home()
        assert self.lock is not None
        if self.resident:
            yield self
            return
        with self.lock:
            self._keys = self._graph = None  # another process may have changed the index
            self.kb_commit.forget()
            try:
                yield self
            finally:
                if self._index is not None:
                    self._index.close()

    def close(self) -> None:
        self.scanner.stop_watching()
        if self._index is not None:
            self._index.close()
        if self._embedder is not None and self._embedder.cache is not None:
            self._embedder.cache.close()

    def start_watching(self) -> bool:
        """Watch the files (the daemon does; the `watcher` setting says how, `rescan` not at
        all): a search with nothing changed then reads no file. True if it watches."""
        kind = "rescan" if int(self.cfg.no_inotify) else str(self.cfg.watcher)
        return self.scanner.start_watching(kind, self.run_dir / "watch")

    # -- keeping the index in line with the files ------------------------------------------
    def refresh(self, *, force: bool = False) -> dict[str, Any]:
        """Bring the index in line with the files (build it if there is none yet). A resident
        memory watches the files; without a change signal it rescans at most once a second -
        except for a writer (`force`): a write's own refresh must see the file it just wrote,
        and its dedup the entry written a moment before. Holds the write lock."""
        with self.write_lock:
            return self._refresh(force=force)

    def refresh_paths(self, paths: list[Path]) -> dict[str, Any]:
        """Bring these files' documents in line (a sync's pull: the files between the old
        head and the new); the rest of the index is not looked at. Holds the write lock."""
        with self.write_lock:
            if not self.index.exists():
                return self._refresh(force=True)
            head = self.kb_head()
            moved = self.kb_moved(head)  # the files since the recorded commit, too
            if moved is None:
                return self._refresh(force=True)  # a full scan
            report = self._apply(self.scanner.paths_changed([*paths, *moved], self.index.doc))
            self.kb_commit.record(head)
            return report

    def refresh_for_read(self) -> dict[str, Any] | None:
        """A refresh before a read, unless a write is in flight (then None: the read answers from
        the live snapshot and the write applies what changed). Waits only while there is no
        index yet (its first build)."""
        if not self.write_lock.acquire(blocking=False):
            if self.index.exists():
                return None
            self.write_lock.acquire()
        try:
            return self._refresh()
        finally:
            self.write_lock.release()

    def _refresh(self, *, force: bool = False) -> dict[str, Any]:
        index = self.index
        head = self.kb_head()  # before the files are read: a move after it is seen next time
        if not index.exists():
            changes = self.scanner.full(lambda _: None, lambda: (), self.scanner.current_corpora())
            report = index.build(changes.upserts)
            self.last_refresh = _now_iso()
            self._keys = None
            self.kb_commit.record(head)
            return {"built": report.generation, "documents": report.documents}
        moved = self.kb_moved(head)  # what git moved since the recorded commit (None: unknown)
        if moved is None:
            self.scanner.request_full()
        if (
            self.resident
            and not force
            and self.scanner.watcher is None
            and time.monotonic() - self.scanner.last_full < RESCAN_EVERY_S
            and not self.scanner.wants_full()
        ):
            if not moved:
                return {"added": [], "updated": [], "removed": []}
            changes = self.scanner.paths_changed(moved, index.doc)  # exactly git's files
        else:
            # one snapshot's lookups for the whole scan (the write lock is held: nothing moves)
            changes = self.scanner.changes(index.snapshot().doc, index.docs, also=moved or ())
            if changes.full:  # a KB added or removed is seen by a full scan
                index.writable_sources = set(self.writable_sources())
        report = self._apply(changes)
        self.kb_commit.record(head)
        return report

    # -- the KB commit the index reflects (ADR 0016) -----------------------------------------
    def kb_head(self) -> str | None:
        """The KB's HEAD commit (read from .git: no process), None without one."""
        return self.kb_commit.head()

    def indexed_commit(self) -> str | None:
        """The KB commit the index reflects (`refs/memory-agent/indexed`), None before the
        first refresh (`index.kb_commit`)."""
        return self.kb_commit.indexed()

    def kb_moved(self, head: str | None = None) -> list[Path] | None:
        """The KB files git changed since the commit the index reflects (`KbCommit.moved`)."""
        return self.kb_commit.moved(head)

    def _apply(self, changes: Changes) -> dict[str, Any]:
        index = self.index
        if changes.restamps:
            index.set_stamps(changes.restamps, changes.moved)
        if not changes.upserts and not changes.deletes:
            return {"added": [], "updated": [], "removed": []}
        before = {d: index.doc(d) for d in [*changes.deletes, *(u.id for u in changes.upserts)]}
        report = index.apply(changes.upserts, changes.deletes)
        self.last_refresh = _now_iso()
        if self._keys is not None:
            for doc_id, info in before.items():
                if info is not None and info.meta.get("key"):
                    self._keys.get(info.meta["key"], set()).discard(doc_id)
            for doc in changes.upserts:
                self._remember_key(doc.id, doc.meta)
        return {"added": report.added, "updated": report.updated, "removed": report.removed}

    def _remember_key(self, doc_id: str, meta: dict[str, Any]) -> None:
        assert self._keys is not None
        key = meta.get("key")
        if key and meta.get("status", "active") == "active":
            self._keys.setdefault(str(key), set()).add(doc_id)

    def same_text(
        self, key: str, exclude: set[str] = frozenset(), scopes: tuple[str, ...] | None = None
    ) -> str | None:
        """An active KB entry whose normalised title and body have this content key (in one
        of `scopes`; None: any)."""
        if self._keys is None:
            self._keys = {}
            for info in self.index.docs():
                if is_kb_source(info.source):
                    self._remember_key(info.id, info.meta)
        for doc_id in sorted(self._keys.get(key, ())):
            if doc_id in exclude:
                continue
            info = self.index.doc(doc_id) if scopes is not None else None
            if scopes is None or (info is not None and info.scope in scopes):
                return doc_id
        return None

    def link_graph(self, index: Any = None) -> dict[str, list[tuple[str, str]]]:
        """The link graph of the index (or of one `Index.snapshot()`), rebuilt only when the
        index changed."""
        index = self.index.snapshot() if index is None else index
        revision = index.revision
        cached = self._graph
        if cached is not None and cached[0] == revision:
            return cached[1]
        with self._graph_lock:  # computed once per revision, not by every search at once
            cached = self._graph
            if cached is not None and cached[0] == revision:
                return cached[1]
            graph = link_graph(index)
            if cached is None or cached[0] < revision:  # revisions only grow
                self._graph = (revision, graph)  # one assignment: old pair or new
            return graph

    def all_documents(self) -> list[Document]:
        """Every document on disk, read now (for a rebuild)."""
        corpora = self.scanner.current_corpora()
        self.index.writable_sources = set(self.writable_sources())
        return self.scanner.full(lambda _: None, lambda: (), corpora).upserts

    def search_sources(
        self, include_readonly: bool = True, include_episodes: bool = False
    ) -> tuple[str, ...]:
        """The sources a search looks in: the KB, the project docs, the episodes."""
        kbs = self.scanner.kbs if self.scanner.last_full else self.kbs.others()  # no scan yet
        out = [KB_SOURCE, *(p.source for p in kbs)]  # as the index holds them
        if include_readonly:
            out += [c.label for c in self.scanner.current_corpora()]
        if include_episodes:
            out.append(EPISODES)
        return tuple(out)

    def sources(self, index: Any = None) -> dict[str, SourceStatus]:
        counts: dict[str, int] = {}
        for info in (self.index if index is None else index).docs():
            counts[info.source] = counts.get(info.source, 0) + 1
        return self.scanner.sources(counts)

    def find_path(self, entry_id: str) -> Path | None:
        """The file of a KB entry (a regular file, never through a link), or None. `team:x`
        is entry x of the KB named team; a bare id is the personal KB's."""
        name, local = split_id(entry_id)
        try:
            place = self.kbs.get(name)
        except MemoryAgentError:  # an unknown KB (or an unreadable kbs.json) holds no entry
            return None
        return entry_file(place.dir, local)

    def pending_writes(self) -> int:
        """Writes a killed process left unfinished, in every KB (each has its redo log)."""
        folders = [self.run_dir / "pending"]
        try:
            folders += [p.run_dir / "pending" for p in self.kbs.others() if p.run_dir]
        except MemoryAgentError:
            pass  # an unreadable kbs.json: the status names it elsewhere
        return sum(len(list(f.glob("*.json"))) for f in folders if f.is_dir())

    def status(self, sync: bool = True) -> dict[str, Any]:
        """The index's state. Never raises for a broken index: it reports it (with the fix)."""
        with self.session():
            problem = None
            if sync:
                try:
                    self.refresh()
                except IndexError_ as exc:
                    problem = str(exc)
            elif not self.index.exists():
                problem = "no index yet: it is built when the model has loaded"
            if problem is None:
                try:
                    snap = self.index.snapshot()  # one state for every figure below
                    check = snap.check()
                except IndexError_ as exc:
                    problem = str(exc)
                else:
                    if not check.consistent:
                        problem = "; ".join(check.problems)
            if problem is not None:
                return {
                    "generation": self.current_generation(),
                    "consistent": False,
                    "entries": 0,
                    "points": 0,
                    "manifest_points": 0,
                    "embedder": self.cfg.embedder,
                    "sources": [s.as_json() for s in self.scanner.sources({}).values()],
                    "pending": self.pending_writes(),
                    "last_refresh": self.last_refresh,
                    "indexed_commit": self.indexed_commit(),
                    "problems": [problem],
                }
            return {
                "generation": check.generation,
                "consistent": check.consistent,
                "entries": len(snap),
                "points": check.points,
                "manifest_points": check.manifest_points,
                "embedder": check.embedder,
                "sources": [s.as_json() for s in self.sources(snap).values()],
                "pending": self.pending_writes(),
                "last_refresh": self.last_refresh,
                "indexed_commit": self.indexed_commit(),
                "problems": check.problems,
            }

    def rebuild(self, hold: Any = None) -> dict[str, Any]:
        """A fresh generation from the files. `hold` (the write lock) is taken only to scan and
        to switch: writes wait for those steps; searches never wait (they answer from the live
        snapshot until the new generation is published)."""
        hold = hold if hold is not None else self.write_lock
        with hold, self.session():
            docs = self.all_documents()
        self.faults.reach("pause-rebuild")
        with self.session():
            prepared = self.index.prepare(docs)
            loaded = self.index.load(prepared)  # the new read model, built with no lock held
        with hold, self.session():
            report = self.index.activate(prepared, loaded)
            self._keys = None
            # Writes that landed while the new generation was built were applied to the old
            # one, and the watcher's events for them are used up: rescan every stamp.
            self.scanner.request_full()
            self.refresh(force=True)
            self.last_refresh = _now_iso()
            return {
                "generation": report.generation,
                "documents": report.documents,
                "chunks": report.chunks,
                "seconds": round(report.seconds, 2),
                "removed_generations": report.removed_generations,
            }

    # -- init -------------------------------------------------------------------------------
    def init(
        self,
        *,
        demo: bool = False,
        embedder: str | None = None,
        sync: bool = True,
        settings: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create (or adopt) the home and the KB repository; optionally add the demo entries
        (dated relative to the clock). `embedder` and `settings` (the endpoint's URL and model)
        are written to config.toml."""
        created = self.place.create(demo=demo, clock=self.clock)
        if embedder:
            config_mod.write_setting(self.home, "embedder", embedder)
        for name, value in (settings or {}).items():
            config_mod.write_setting(self.home, name, value)
        self.lock = FileLock(self.run_dir / "home.lock")
        self.cfg = config_mod.load({"home": str(self.home)})
        if self._embedder is not None and self._embedder.cache is not None:
            self._embedder.cache.close()
        self._embedder = None
        self._index = None
        synced = None
        if sync:
            with self.session():
                synced = self.refresh()
        return {**created, "embedder": self.cfg.embedder, "index": synced}
