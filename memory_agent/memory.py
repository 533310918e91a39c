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
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from memory_agent import config as config_mod
from memory_agent.corpora import Corpus, corpus_files, load_corpora, load_corpus_document
from memory_agent.errors import Invalid, NotFound, NotReady
from memory_agent.events import EntryStats
from memory_agent.gitrepo import KBRepo
from memory_agent.kb import ValidationError, iter_entry_files, read_entry
from memory_agent.ranking import Ranked, rerank
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

__all__ = ["Memory", "SourceStatus"]

DEMO_KB = Path(__file__).parent / "demo_kb"
KB_SOURCE = "kb"


@dataclass
class SourceStatus:
    label: str
    entries: int
    writable: bool
    available: bool
    path: str
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out = {
            "label": self.label,
            "entries": self.entries,
            "writable": self.writable,
            "available": self.available,
            "path": self.path,
        }
        if self.problems:
            out["problems"] = self.problems
        return out


@dataclass
class _Stat:
    key: tuple[int, int]  # (mtime_ns, size)
    doc: Document | None
    error: str | None


class Memory:
    def __init__(
        self, cfg: config_mod.Config | None = None, *, resident: bool = False, embedder: Any = None
    ):
        self.cfg = cfg or config_mod.load()
        self.home = self.cfg.home_dir
        self.kb_dir = self.home / "kb"
        self.run_dir = self.home / "run"
        self.resident = resident
        self._embedder = embedder
        self._index: Index | None = None
        self._stats: dict[str, _Stat] = {}
        self.sources: dict[str, SourceStatus] = {}
        self.last_refresh: str | None = None
        self.lock = FileLock(str(self.run_dir / "home.lock")) if self.run_dir.is_dir() else None
        # Learned per-entry stats (the daemon folds them from events/) and the clock the
        # dynamics use; both are plain attributes so experiments can set them.
        self.stats: dict[str, EntryStats] = {}
        self.clock = time.time
        self.last_channels: dict[str, str] = {}

    # -- setup ------------------------------------------------------------------------------
    def require_home(self) -> None:
        if not (self.kb_dir / ".git").exists():
            raise NotReady(
                f"no knowledge base at {self.kb_dir}: run `memory-agent init` "
                f"(or set MEMORY_AGENT_HOME / --home to your home)"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.lock is None:
            self.lock = FileLock(str(self.run_dir / "home.lock"))

    @property
    def embedder(self) -> CachedEmbedder:
        if self._embedder is None:
            inner = make_embedder(self.cfg.embedder, model_path=self.cfg.model_path or None)
            self._embedder = CachedEmbedder(inner, EmbeddingCache(self.cfg.cache_dir))
        elif not isinstance(self._embedder, CachedEmbedder):
            self._embedder = CachedEmbedder(self._embedder, EmbeddingCache(self.cfg.cache_dir))
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

    @property
    def repos_file(self) -> Path:
        env = os.environ.get("MEMORY_AGENT_REPOS")
        return Path(env) if env else self.home / "repos.json"

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
        if self._embedder is not None and self._embedder.cache is not None:
            self._embedder.cache.close()

    # -- scanning ---------------------------------------------------------------------------
    def _load(self, path: Path, loader) -> tuple[Document | None, str | None]:
        try:
            st = path.stat()
        except OSError as exc:
            return None, f"{path}: cannot read ({exc.strerror})"
        key = (st.st_mtime_ns, st.st_size)
        cached = self._stats.get(str(path))
        if cached is not None and cached.key == key:
            return cached.doc, cached.error
        doc, error = None, None
        try:
            doc = loader(path)
        except (ValidationError, ValueError, DocumentError) as exc:
            error = (
                f"{path.relative_to(self.home) if path.is_relative_to(self.home) else path}: {exc}"
            )
        self._stats[str(path)] = _Stat(key, doc, error)
        return doc, error

    def _kb_doc(self, path: Path) -> Document:
        entry = read_entry(path)
        if path.stem != entry.id or path.parent.name != entry.type:
            raise ValidationError(
                [
                    f"id/type: the file must be {entry.type}/{entry.id}.md to match "
                    f"its frontmatter; rename it or fix the frontmatter"
                ]
            )
        return entry.to_document(str(path))

    def scan(self) -> tuple[list[Document], set[str], list[str]]:
        """All documents now on disk, the sources that could be read, and the ids of entries
        whose files are present but broken (kept in the index as they were)."""
        docs: list[Document] = []
        broken: set[str] = set()
        readable = {KB_SOURCE}
        kb_status = SourceStatus(KB_SOURCE, 0, True, self.kb_dir.is_dir(), str(self.kb_dir))
        seen: dict[str, Path] = {}
        seen_paths: set[str] = set()
        for path in iter_entry_files(self.kb_dir):
            seen_paths.add(str(path))
            doc, error = self._load(path, self._kb_doc)
            if doc is not None and doc.id in seen:
                kb_status.problems.append(
                    f"{path.relative_to(self.kb_dir)}: id {doc.id!r} is already used by "
                    f"{seen[doc.id].relative_to(self.kb_dir)}; rename one of them"
                )
                continue
            if doc is not None:
                seen[doc.id] = path
                docs.append(doc)
            else:
                kb_status.problems.append(error or f"{path}: unreadable")
                broken.add(path.stem)
        kb_status.entries = sum(1 for d in docs if d.source == KB_SOURCE)
        self.sources = {KB_SOURCE: kb_status}
        for corpus in self.corpora():
            status = SourceStatus(corpus.label, 0, False, corpus.available, str(corpus.path))
            if corpus.available:
                for rel, full in corpus_files(corpus):
                    seen_paths.add(str(full))
                    doc, error = self._load(
                        full, lambda p, c=corpus, r=rel: load_corpus_document(c, r, p)
                    )
                    if doc is not None:
                        docs.append(doc)
                        status.entries += 1
                    else:
                        status.problems.append(error or f"{full}: unreadable")
                readable.add(corpus.label)
            else:
                status.problems = [
                    f"root {corpus.path} is missing or unreadable; its indexed "
                    "entries are kept until it comes back"
                ]
            self.sources[corpus.label] = status
        # Forget the stat cache of files that are gone.
        self._stats = {k: v for k, v in self._stats.items() if k in seen_paths}
        return docs, readable, broken

    def kb_documents(self) -> list[Document]:
        """The KB entries as the last scan read them (no file is read again)."""
        return [
            st.doc
            for path, st in self._stats.items()
            if st.doc is not None and st.doc.source == KB_SOURCE
        ]

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
        if not isinstance(query, str) or not query.strip():
            raise Invalid("query: empty; say what you are looking for, e.g. 'how do we release'")
        limit = max(1, min(int(limit), 50))
        cutoff = _as_of_cutoff(as_of) if as_of else None
        with self.session():
            if use_dense:
                self.sync()
            elif not self.index.exists():
                raise NotReady(
                    "the first index of this home is not built yet (the model is "
                    "loading); retry in a few seconds"
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
        start = self.find_path(entry_id)
        if start is None:
            raise NotFound(f"no entry with id {entry_id!r}: find ids with memory_search")
        entries = {p.stem: p for p in iter_entry_files(self.kb_dir)}

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
        for path in iter_entry_files(self.kb_dir):
            if path.stem == entry_id:
                return path
        return None

    def get(self, entry_id: str) -> dict[str, Any]:
        """An entry read from disk (the truth), KB or read-only corpus."""
        self.require_home()
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
        label, _, rel = entry_id.partition("/")
        for corpus in self.corpora():
            if corpus.label == label and rel and corpus.contains(rel):
                full = (corpus.path / rel).resolve()
                if not full.is_relative_to(corpus.path.resolve()) or not full.is_file():
                    break
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
                    "created": doc.meta.get("created"),
                }
        raise NotFound(
            f"no entry with id {entry_id!r}: find ids with memory_search (or `memory-agent search`)"
        )

    def status(self, sync: bool = True) -> dict[str, Any]:
        """The index's state. Never raises for a broken index: it reports it (with the fix)."""
        from memory_agent.gateway import pending_intents

        with self.session():
            problem = None
            if sync:
                try:
                    self.sync()
                except IndexError_ as exc:
                    problem = str(exc)
            elif not self.index.exists():
                problem = "no index yet: it is built when the model has loaded"
            if problem is not None:
                return {
                    "generation": self.index.current(),
                    "consistent": False,
                    "entries": 0,
                    "points": 0,
                    "manifest_points": 0,
                    "embedder": self.cfg.embedder,
                    "sources": [s.as_json() for s in self.sources.values()],
                    "pending": len(pending_intents(self)),
                    "last_refresh": self.last_refresh,
                    "problems": [problem],
                }
            check = self.index.check()
            manifest = self.index.manifest
            return {
                "generation": check.generation,
                "consistent": check.consistent,
                "entries": len(manifest["docs"]),
                "points": check.points,
                "manifest_points": check.manifest_points,
                "embedder": check.embedder,
                "sources": [s.as_json() for s in self.sources.values()],
                "pending": len(pending_intents(self)),
                "last_refresh": self.last_refresh,
                "problems": check.problems,
            }

    def rebuild(self) -> dict[str, Any]:
        with self.session():
            docs, _, _ = self.scan()
            report = self.index.build(docs)
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
        """Create (or adopt) the home and the KB repository; optionally add the demo entries."""
        for sub in ("kb", "index", "cache", "events", "run"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        config_file = self.home / "config.toml"
        if embedder and not config_file.exists():
            config_file.write_text(f'embedder = "{embedder}"\n', encoding="utf-8")
        repo, created = KBRepo.init(self.kb_dir)
        self.lock = FileLock(str(self.run_dir / "home.lock"))
        added: list[Path] = []
        if demo:
            for src in sorted(DEMO_KB.rglob("*.md")):
                dest = self.kb_dir / src.relative_to(DEMO_KB)
                if not dest.exists():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest)
                    added.append(dest)
        commit = repo.commit_paths(added, "Add the demo knowledge base") if added else repo.head()
        self.cfg = config_mod.load({"home": str(self.home)})
        self._embedder = None
        self._index = None
        synced = None
        if sync:
            with self.session():
                synced = self.sync()
        return {
            "home": str(self.home),
            "kb": str(self.kb_dir),
            "created_repo": created,
            "demo_entries_added": len(added),
            "commit": commit,
            "embedder": self.cfg.embedder,
            "index": synced,
        }


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
