"""`Memory`: one home — the knowledge base, the read-only corpora, the index — and the read side
of every tool (search, get, status, rebuild). Writes go through `memory_agent.gateway`.

Two ways to run:
- resident (the daemon): the home lock is held for the process's life and the index stays open;
- per call (a CLI command with no daemon): each call takes the home lock, opens the index, does
  its work and closes it again. qdrant-client's local mode allows one process per index, and
  the lock makes concurrent CLI processes take turns instead of failing.

Before every search the KB and the corpora are scanned for changes (stat first, content hash
only for files whose stat changed), so files edited outside the tool are picked up without a
rebuild.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

from memory_agent import config as config_mod
from memory_agent import limits
from memory_agent.clock import Clock
from memory_agent.corpora import Corpus, load_corpora, load_corpus_document
from memory_agent.errors import Invalid, NotFound, NotReady
from memory_agent.events import EntryStats
from memory_agent.home import DEMO_KB, Home
from memory_agent.kb import ENTRY_TYPES, read_entry
from memory_agent.ranking import Ranked, rerank
from memory_agent.scanner import KB_SOURCE, Scanner, SourceStatus, entry_file, kb_files
from ragcore import (
    CachedEmbedder,
    Document,
    DocumentError,
    EmbeddingCache,
    Filter,
    Index,
    IndexError_,
    SearchConfig,
    make_embedder,
    search,
)

__all__ = ["DEMO_KB", "KB_SOURCE", "Memory", "SourceStatus"]

FAULT_ENV = "MEMORY_AGENT_FAULT"  # test hook: "pause-rebuild" holds a rebuild before it embeds


def _pause_point(name: str, run_dir: Path) -> None:
    """Test hook: with MEMORY_AGENT_FAULT=<name>, wait (at most 60 s) until
    `run/fault-continue` exists, so a test can act while this step is in progress."""
    if os.environ.get(FAULT_ENV) != name:
        return
    (run_dir / f"fault-{name}").touch()
    deadline = time.monotonic() + 60
    while not (run_dir / "fault-continue").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


class Memory:
    def __init__(
        self,
        cfg: config_mod.Config | None = None,
        *,
        resident: bool = False,
        embedder: Any = None,
        clock: Clock | None = None,
    ):
        self.cfg = cfg or config_mod.load()
        self.place = Home(self.cfg.home_dir)
        self.home = self.place.root
        self.kb_dir = self.place.kb_dir
        self.run_dir = self.place.run_dir
        self.resident = resident
        self._given_embedder = embedder  # a model handed in (tests, experiments) wins over config
        self._embedder: CachedEmbedder | None = None
        self._index: Index | None = None
        self.scanner = Scanner(self.home, self.kb_dir, self.corpora)
        self.sources: dict[str, SourceStatus] = {}
        self.last_refresh: str | None = None
        self.lock = FileLock(str(self.run_dir / "home.lock")) if self.run_dir.is_dir() else None
        # Learned per-entry stats (the daemon folds them from events/) and the clock the
        # dynamics use; both are plain attributes so experiments can set them.
        self.stats: dict[str, EntryStats] = {}
        self.clock = clock or Clock.from_setting(self.cfg.clock)
        self.last_channels: dict[str, str] = {}

    # -- setup ------------------------------------------------------------------------------
    def require_home(self) -> None:
        self.place.require()
        if self.lock is None:
            self.lock = FileLock(str(self.run_dir / "home.lock"))

    @property
    def embedder(self) -> CachedEmbedder:
        if self._embedder is None:
            inner = self._given_embedder or make_embedder(
                self.cfg.embedder, model_path=self.cfg.model_path or None
            )
            if isinstance(inner, CachedEmbedder):
                self._embedder = inner
            else:
                self._embedder = CachedEmbedder(inner, EmbeddingCache(self.cfg.cache_dir))
        return self._embedder

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = Index(
                self.cfg.index_dir,
                self.embedder,
                writable_sources=[KB_SOURCE],
                max_chars=int(self.cfg.max_chars),
                qdrant_url=self.cfg.qdrant_url or None,
            )
        return self._index

    def current_generation(self) -> str | None:
        """The generation CURRENT names, read from disk (touches no model or store)."""
        try:
            name = (self.cfg.index_dir / "CURRENT").read_text().strip()
        except OSError:
            return None
        return name or None

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
            try:
                yield self
            finally:
                if self._index is not None:
                    self._index.close()

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
        if self._embedder is not None and getattr(self._embedder, "cache", None) is not None:
            self._embedder.cache.close()

    # -- scanning ---------------------------------------------------------------------------
    def scan(self) -> tuple[list[Document], set[str], set[str]]:
        """All documents now on disk, the sources that could be read, and the ids of entries
        whose files are present but broken (kept in the index as they were)."""
        found = self.scanner.scan()
        self.sources = found.sources
        return found.docs, found.readable, found.broken

    def kb_documents(self) -> list[Document]:
        """The KB entries as the last scan read them (no file is read again)."""
        return self.scanner.kb_documents()

    def sync(self) -> dict[str, Any]:
        """Bring the index in line with the files (build it if there is none yet)."""
        docs, readable, broken = self.scan()
        index = self.index
        if not index.exists():
            report = index.build(docs)
            self.last_refresh = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            return {"built": report.generation, "documents": report.documents}
        known = index.manifest["docs"]
        keep = {doc_id for doc_id in broken if doc_id in known}
        kept_docs = [d for d in docs if d.id not in keep]
        # Prune every source except corpora that are configured but unreadable right now: a
        # missing folder keeps its entries; a label removed from repos.json loses them.
        unavailable = {label for label, st in self.sources.items() if not st.available}
        scope = (readable | {d.get("source") for d in known.values()}) - unavailable
        report = index.refresh(kept_docs, sources=scope, keep=keep)
        if report.changed:
            self.last_refresh = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for label, status in self.sources.items():
            if not status.available:
                status.entries = sum(1 for d in known.values() if d.get("source") == label)
        return {"added": report.added, "updated": report.updated, "removed": report.removed}

    # -- reads ------------------------------------------------------------------------------
    @staticmethod
    def check_search(query: Any, limit: Any, types: Any, tags: Any, as_of: Any) -> float | None:
        """Refuse bad search arguments (naming the bound); the as_of cutoff, if any."""
        if not isinstance(query, str) or not query.strip():
            raise Invalid("query: empty", "say what you are looking for, e.g. 'how do we release'")
        limits.check_text("query", query, limits.MAX_QUERY)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise Invalid(f"limit: {limit!r} is not a whole number", "pass 1 to 50")
        if not 1 <= limit <= limits.MAX_LIMIT:
            raise Invalid(
                f"limit: {limit} is out of range", f"pass a number from 1 to {limits.MAX_LIMIT}"
            )
        if types is not None:
            if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
                raise Invalid("types: must be a list of types", f"use {', '.join(ENTRY_TYPES)}")
            unknown = [t for t in types if t not in ENTRY_TYPES]
            if unknown:
                raise Invalid(
                    f"types: {', '.join(map(repr, unknown))} "
                    f"{'is not a type' if len(unknown) == 1 else 'are not types'}",
                    f"use any of {', '.join(ENTRY_TYPES)}",
                )
        if tags is not None:
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise Invalid("tags: must be a list of words", "pass tags like [git, testing]")
            if len(tags) > limits.MAX_TAGS:
                raise Invalid(
                    f"tags: {len(tags)} tags is over the limit of {limits.MAX_TAGS}",
                    "filter by fewer tags",
                )
        return _as_of_cutoff(as_of) if as_of else None

    def search(
        self,
        query: str,
        *,
        limit: int = 8,
        types: list[str] | None = None,
        tags: list[str] | None = None,
        include_readonly: bool = True,
        include_archived: bool = False,
        explain: bool = False,
        as_of: str | None = None,
        use_dense: bool = True,
    ) -> dict[str, Any]:
        """Relevance from ragcore, then the dynamics of `memory_agent.ranking` on top.

        `as_of` ("YYYY-MM-DD") answers from the entries as they stood at the end of that day:
        created by then, and not yet superseded or archived then."""
        cutoff = self.check_search(query, limit, types, tags, as_of)
        with self.session():
            if use_dense:
                self.sync()
            elif not self.index.exists():
                raise NotReady(
                    "the first index of this home is not built yet (the model is loading)",
                    "retry in a few seconds",
                )
            if cutoff is not None:
                statuses = None  # the lifecycle is judged by its dates, below
                doc_ids = self._standing_at(cutoff)
            else:
                statuses = ("active", "archived") if include_archived else ("active",)
                doc_ids = None
            flt = Filter(
                types=tuple(types) if types else None,
                tags=tuple(tags) if tags else None,
                statuses=statuses,
                sources=None if include_readonly else (KB_SOURCE,),
                doc_ids=doc_ids,
            )
            result = search(
                self.index,
                query,
                limit=max(limit * 3, 30),
                flt=flt,
                config=SearchConfig(),
                use_dense=use_dense,
            )
            candidates = [
                Ranked(h.doc_id, h.score, h.payload, h.snippet, h.explain() if explain else None)
                for h in result.hits
            ]
            # The channel that ranked each candidate best, for the usage log (recall events).
            self.last_channels = {
                h.doc_id: min(h.channels, key=lambda n: h.channels[n].rank)
                for h in result.hits
                if h.channels
            }
            ranked = rerank(
                candidates,
                stats=self.stats,
                now=self.clock(),
                neighbours=self._neighbours(),
                lookup=self._lookup,
                allowed=flt.matches,
            )[:limit]
            hits = []
            for r in ranked:
                p = r.payload
                hit = {
                    "id": r.doc_id,
                    "title": p.get("title", ""),
                    "type": p.get("type", "note"),
                    "status": p.get("status", "active"),
                    "score": round(r.score, 4),
                    "snippet": r.snippet,
                    "source": p.get("source"),
                    "writable": bool(p.get("writable")),
                }
                if explain:
                    s = self.stats.get(r.doc_id)
                    hit["why"] = {
                        **(r.why or {"fused": 0.0, "channels": {}}),
                        "relevance": round(r.relevance, 6),
                        "signals": {k: round(v, 6) for k, v in r.signals.items()},
                        "state": r.state,
                        "recall_count": s.recall_count if s else 0,
                        "importance": s.importance if s else None,
                    }
                hits.append(hit)
            out: dict[str, Any] = {"hits": hits, "generation": result.generation}
            if result.degraded:
                out["degraded"] = result.degraded
            return out

    # -- dynamics helpers -------------------------------------------------------------------
    def _neighbours(self) -> dict[str, list[tuple[str, str]]]:
        """Link graph of the index: [[wikilinks]] (a link to a superseded entry leads on to its
        successor, as a `supersedes` edge), both directions."""
        successor: dict[str, str] = {}
        links: dict[str, list[str]] = {}
        for payload in self.index.payloads.values():
            if payload.get("n") != 0:
                continue
            doc = payload["doc_id"]
            links[doc] = list(payload.get("links") or [])
            if payload.get("superseded_by"):
                successor[doc] = str(payload["superseded_by"])
        graph: dict[str, list[tuple[str, str]]] = {}
        for doc, targets in links.items():
            for target in targets:
                kind = "wikilink"
                seen = {target}
                while target in successor and successor[target] not in seen:
                    target, kind = successor[target], "supersedes"
                    seen.add(target)
                if target in links:
                    graph.setdefault(doc, []).append((target, kind))
                    graph.setdefault(target, []).append((doc, kind))
        return graph

    def _lookup(self, doc_id: str) -> tuple[dict[str, Any], str] | None:
        payload = self.index.payloads.get(f"{doc_id}#0")
        if payload is None:
            return None
        text = " ".join(str(payload.get("text") or payload.get("title", "")).split())
        return payload, text if len(text) <= 240 else text[:239] + "…"

    def _standing_at(self, cutoff: float) -> tuple[str, ...]:
        """Ids of the entries that existed and were neither superseded nor archived at `cutoff`."""
        from memory_agent.ranking import _ts

        keep = []
        for payload in self.index.payloads.values():
            if payload.get("n") != 0:
                continue
            created = _ts(payload.get("created"))
            ended = [
                t
                for t in (_ts(payload.get("superseded_at")), _ts(payload.get("archived_at")))
                if t is not None
            ]
            if created is not None and created > cutoff:
                continue
            if ended and min(ended) <= cutoff:
                continue
            keep.append(payload["doc_id"])
        return tuple(sorted(keep))

    def history(self, entry_id: str) -> dict[str, Any]:
        """The supersede chain through `entry_id`, oldest first, read from the files."""
        self.require_home()
        limits.check_text("id", entry_id, limits.MAX_ID, required=True, one_line=True)
        if self.find_path(entry_id) is None:
            raise NotFound(f"no entry with id {entry_id!r}")
        files, _ = kb_files(self.kb_dir)
        entries = {p.stem: p for p in files}

        def load(eid: str):
            path = entries.get(eid)
            return read_entry(path) if path is not None else None

        first = load(entry_id)
        seen = {entry_id}
        while first is not None and first.extra.get("supersedes"):
            prev = next(
                (p for p in first.extra["supersedes"] if p in entries and p not in seen), None
            )
            if prev is None:
                break
            seen.add(prev)
            first = load(prev)
        chain, current, visited = [], first, set()
        while current is not None and current.id not in visited:
            visited.add(current.id)
            step = {
                "id": current.id,
                "title": current.title,
                "type": current.type,
                "status": current.status,
                "created": current.created,
            }
            for key in ("superseded_by", "superseded_at", "archived_at", "archive_reason"):
                if key in current.extra:
                    step[key] = current.extra[key]
            if current.status == "superseded":
                step["reason"] = f"superseded by {current.extra.get('superseded_by')}"
            elif current.status == "archived":
                step["reason"] = current.extra.get("archive_reason")
            chain.append(step)
            nxt = current.extra.get("superseded_by")
            current = load(nxt) if nxt else None
        return {"id": entry_id, "chain": chain}

    def find_path(self, entry_id: str) -> Path | None:
        """The file of a KB entry (a regular file, never through a link), or None."""
        return entry_file(self.kb_dir, entry_id)

    def get(self, entry_id: str) -> dict[str, Any]:
        """An entry read from disk (the truth), KB or read-only corpus."""
        self.require_home()
        limits.check_text("id", entry_id, limits.MAX_ID, required=True, one_line=True)
        path = self.find_path(entry_id) if "/" not in entry_id else None
        if path is not None:
            entry = read_entry(path)
            return {
                "id": entry.id,
                "title": entry.title,
                "type": entry.type,
                "status": entry.status,
                "tags": entry.tags,
                "body": entry.body,
                "path": str(path),
                "writable": True,
                "supersedes": entry.extra.get("supersedes", []),
                "superseded_by": entry.extra.get("superseded_by"),
                "created": entry.created,
                **{
                    k: entry.extra[k]
                    for k in ("superseded_at", "archived_at", "archive_reason")
                    if k in entry.extra
                },
            }
        if "/" not in entry_id:
            raise NotFound(f"no entry with id {entry_id!r}")
        corpus, rel, full = self.scanner.corpus_file(entry_id)
        try:
            doc = load_corpus_document(corpus, rel, full)
        except DocumentError as exc:
            raise NotFound(f"{entry_id}: {exc}") from exc
        return {
            "id": entry_id,
            "title": doc.title,
            "type": doc.meta["type"],
            "status": "active",
            "tags": doc.meta.get("tags") or [],
            "body": doc.body,
            "path": str(full),
            "writable": False,
            "supersedes": [],
            "superseded_by": None,
            "created": _text_or_none(doc.meta.get("created")),
        }

    def pending_writes(self) -> int:
        folder = self.run_dir / "pending"
        return len(list(folder.glob("*.json"))) if folder.is_dir() else 0

    def status(self, sync: bool = True) -> dict[str, Any]:
        """The index's state. Never raises for a broken index: it reports it (with the fix)."""
        with self.session():
            problem = None
            if sync:
                try:
                    self.sync()
                except IndexError_ as exc:
                    problem = str(exc)
            elif not self.index.exists():
                problem = "no index yet: it is built when the model has loaded"
            if problem is None:
                check = self.index.check()
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
                    "sources": [s.as_json() for s in self.sources.values()],
                    "pending": self.pending_writes(),
                    "last_refresh": self.last_refresh,
                    "problems": [problem],
                }
            manifest = self.index.manifest
            return {
                "generation": check.generation,
                "consistent": check.consistent,
                "entries": len(manifest["docs"]),
                "points": check.points,
                "manifest_points": check.manifest_points,
                "embedder": check.embedder,
                "sources": [s.as_json() for s in self.sources.values()],
                "pending": self.pending_writes(),
                "last_refresh": self.last_refresh,
                "problems": check.problems,
            }

    def rebuild(self, hold: Any = None) -> dict[str, Any]:
        """A fresh generation from the files. `hold` (the daemon's service lock) is taken only
        to scan and to switch: searches keep answering from the live generation meanwhile."""
        hold = hold if hold is not None else contextlib.nullcontext()
        with hold, self.session():
            docs, _, _ = self.scan()
        _pause_point("pause-rebuild", self.run_dir)
        with self.session():
            prepared = self.index.prepare(docs)
        with hold, self.session():
            report = self.index.activate(prepared)
            self.sync()  # writes that landed while the new generation was built
            self.last_refresh = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            return {
                "generation": report.generation,
                "documents": report.documents,
                "chunks": report.chunks,
                "seconds": round(report.seconds, 2),
                "removed_generations": report.removed_generations,
            }

    # -- init -------------------------------------------------------------------------------
    def init(
        self, *, demo: bool = False, embedder: str | None = None, sync: bool = True
    ) -> dict[str, Any]:
        """Create (or adopt) the home and the KB repository; optionally add the demo entries
        (dated relative to the clock). `embedder` is written to config.toml."""
        created = self.place.create(demo=demo, clock=self.clock)
        if embedder:
            config_mod.write_setting(self.home, "embedder", embedder)
        self.lock = FileLock(str(self.run_dir / "home.lock"))
        self.cfg = config_mod.load({"home": str(self.home)})
        if self._embedder is not None and self._embedder.cache is not None:
            self._embedder.cache.close()
        self._embedder = None
        self._index = None
        synced = None
        if sync:
            with self.session():
                synced = self.sync()
        return {**created, "embedder": self.cfg.embedder, "index": synced}


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _as_of_cutoff(as_of: str) -> float:
    """The end of the day `as_of` (YYYY-MM-DD, UTC) as a timestamp."""
    import datetime as dt

    try:
        day = dt.date.fromisoformat(str(as_of))
    except ValueError as exc:
        raise Invalid(f"as_of: {as_of!r} is not a date; use YYYY-MM-DD, e.g. 2026-06-30") from exc
    end = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC) + dt.timedelta(days=1)
    return end.timestamp() - 0.001


def content_key(title: str, body: str) -> str:
    """Normalised text of an entry, for exact-duplicate detection."""
    from ragcore import normalize_text

    text = " ".join(normalize_text(f"{title}\n{body}").lower().split())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
