"""The index: generation directories, an atomic CURRENT pointer, a manifest, a consistency check,
and incremental refresh.

    index/CURRENT              name of the live generation ("gen-000007"), replaced atomically
    index/gen-000007/store/    the vector store of that generation (qdrant local mode)
    index/gen-000007/manifest.json
                               what the generation holds: embedder, and per document its
                               content hash and chunk count

A full `build` writes a new generation and moves CURRENT to it only after the consistency check
passes (manifest points == store points, same embedder and dimension). A build that dies leaves
an orphan directory nobody reads; the next build removes it. `refresh` updates the live
generation in place: it embeds only documents whose content hash changed, deletes chunks of
documents that went away, and leaves everything else alone. An index that fails the check
refuses to search (`IndexInconsistent`, naming `memory-agent rebuild`): it never answers empty.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.atomic import atomic_write
from ragcore.documents import DEFAULT_MAX_CHARS, Chunk, Document, chunk_document
from ragcore.embedding import Embedder
from ragcore.errors import IndexError_, IndexInconsistent
from ragcore.lexical import BM25Index, Tokenizer, term_frequencies
from ragcore.store import Point, QdrantStore

__all__ = ["BuildReport", "Consistency", "Index", "Prepared", "RefreshReport"]

MANIFEST = "manifest.json"
CURRENT = "CURRENT"
_GEN = re.compile(r"^gen-(\d{6})$")
REBUILD_HINT = "run `memory-agent rebuild` to build a fresh generation from the Markdown files"
# Payload keys copied from a document's frontmatter (filters and display use them).
META_KEYS = (
    "type",
    "tags",
    "status",
    "created",
    "updated",
    "supersedes",
    "superseded_by",
    "superseded_at",
    "archived_at",
)

Progress = Callable[[str, int, int], None]


@dataclass
class Consistency:
    consistent: bool
    generation: str | None
    manifest_points: int
    points: int
    embedder: str | None
    problems: list[str] = field(default_factory=list)


@dataclass
class BuildReport:
    generation: str
    documents: int
    chunks: int
    embedded: int
    seconds: float
    removed_generations: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    """A generation written and checked, not yet live."""

    generation: str
    documents: int
    chunks: int
    seconds: float


@dataclass
class RefreshReport:
    generation: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    chunks_embedded: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def _payload(doc: Document, chunk: Chunk, writable: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "doc_id": doc.id,
        "n": chunk.n,
        "title": doc.title,
        "heading": chunk.heading,
        "text": chunk.body,
        "source": doc.source,
        "path": doc.path,
        "writable": writable,
        "links": doc.links,
    }
    for key in META_KEYS:
        if key in doc.meta and doc.meta[key] is not None:
            value = doc.meta[key]
            payload[key] = value if isinstance(value, (str, int, float, bool, list)) else str(value)
    payload.setdefault("status", "active")
    payload.setdefault("type", "note")
    if isinstance(payload.get("tags"), str):
        payload["tags"] = [payload["tags"]]
    return payload


class Index:
    """The index of one home. Not safe for two processes at once: the owner (the daemon, or a
    CLI command with no daemon) serialises all calls through one lock."""

    def __init__(
        self,
        root: str | Path,
        embedder: Embedder,
        *,
        tokenizer: Tokenizer | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        writable_sources: Sequence[str] | None = None,
        batch_size: int = 64,
        qdrant_url: str | None = None,
    ):
        self.root = Path(root)
        self.embedder = embedder
        self.tokenizer = tokenizer or Tokenizer()
        self.max_chars = max_chars
        self.writable_sources = set(writable_sources) if writable_sources is not None else None
        self.batch_size = batch_size
        # With a Qdrant server, each generation is a collection named after the index
        # directory and the generation; the directory still holds the manifest and CURRENT.
        self.qdrant_url = qdrant_url
        self.lock = threading.RLock()
        self._generation: str | None = None
        self._store: QdrantStore | None = None
        self._manifest: dict[str, Any] | None = None
        self.bm25 = BM25Index()
        self.payloads: dict[str, dict[str, Any]] = {}
        self.sparse: dict[str, dict[int, float]] = {}

    # -- paths and pointer ------------------------------------------------------------------
    def generations(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _GEN.match(p.name))

    def current(self) -> str | None:
        try:
            name = (self.root / CURRENT).read_text().strip()
        except FileNotFoundError:
            return None
        return name if _GEN.match(name) else None

    @property
    def generation(self) -> str | None:
        return self._generation

    @property
    def manifest(self) -> dict[str, Any]:
        self._ensure_open()
        assert self._manifest is not None
        return self._manifest

    @property
    def store(self) -> QdrantStore:
        self._ensure_open()
        assert self._store is not None
        return self._store

    def _store_for(self, generation: str) -> QdrantStore:
        if self.qdrant_url:
            tag = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:8]
            return QdrantStore(url=self.qdrant_url, collection=f"memory-agent-{tag}-{generation}")
        return QdrantStore(self.root / generation / "store")

    def _writable(self, doc: Document) -> bool:
        return self.writable_sources is None or doc.source in self.writable_sources

    # -- open / close ---------------------------------------------------------------------
    def exists(self) -> bool:
        return self.current() is not None

    def open(self) -> None:
        """Open the live generation and load the lexical index and payloads into memory."""
        with self.lock:
            name = self.current()
            if name is None:
                raise IndexError_(f"no index under {self.root}: {REBUILD_HINT}")
            gen_dir = self.root / name
            try:
                manifest = json.loads((gen_dir / MANIFEST).read_text())
            except (OSError, ValueError) as exc:
                raise IndexInconsistent(
                    f"generation {name} has no readable manifest ({exc}); {REBUILD_HINT}"
                ) from exc
            self._check_embedder(manifest, name)
            self.close()
            store = self._store_for(name)
            if not store.exists():
                store.close()
                raise IndexInconsistent(f"generation {name} has no vector store; {REBUILD_HINT}")
            self._store, self._manifest, self._generation = store, manifest, name
            self.bm25 = BM25Index()
            self.payloads.clear()
            self.sparse.clear()
            for point in store.scroll():
                self._remember(point)
            try:
                self.check(raise_on_error=True)
            except IndexInconsistent:
                self.close()
                raise

    def _check_embedder(self, manifest: dict[str, Any], name: str) -> None:
        emb = manifest.get("embedder", {})
        if emb.get("id") != self.embedder.model_id or emb.get("dim") != self.embedder.dim:
            raise IndexError_(
                f"generation {name} was built with embedder {emb.get('id')} (dim {emb.get('dim')}), "
                f"but the configured embedder is {self.embedder.model_id} (dim {self.embedder.dim}); "
                f"{REBUILD_HINT}, or switch the embedder back"
            )

    def _ensure_open(self) -> None:
        if self._store is None:
            self.open()

    def close(self) -> None:
        with self.lock:
            if self._store is not None:
                self._store.close()
            self._store = None
            self._manifest = None
            self._generation = None

    def _remember(self, point: Point) -> None:
        self.payloads[point.chunk_id] = point.payload
        self.bm25.add(point.chunk_id, point.sparse.get("bm25", {}))
        if "sparse" in point.sparse:
            self.sparse[point.chunk_id] = point.sparse["sparse"]

    def _forget(self, chunk_id: str) -> None:
        self.payloads.pop(chunk_id, None)
        self.bm25.remove(chunk_id)
        self.sparse.pop(chunk_id, None)

    # -- consistency ----------------------------------------------------------------------
    def check(self, raise_on_error: bool = False) -> Consistency:
        """Manifest points == store points == points held in memory, same embedder.

        Opens the live generation first if needed (which raises if it cannot be opened)."""
        with self.lock:
            if self._store is None:
                self.open()  # open() runs this check itself
            assert self._store is not None and self._manifest is not None
            manifest_points = sum(d["chunks"] for d in self._manifest["docs"].values())
            points = self._store.count()
            problems = []
            current = self.current()
            if current != self._generation:
                problems.append(
                    f"CURRENT names {current or 'no generation'} but {self._generation} is open"
                    + ("" if current and (self.root / current).is_dir() else " (it is missing)")
                )
            if points != manifest_points:
                problems.append(
                    f"the store holds {points} points but the manifest lists {manifest_points}"
                )
            if len(self.payloads) != points:
                problems.append(f"{len(self.payloads)} points in memory but {points} in the store")
            result = Consistency(
                not problems,
                self._generation,
                manifest_points,
                points,
                self._manifest["embedder"]["id"],
                problems,
            )
            if raise_on_error and not result.consistent:
                raise IndexInconsistent(
                    f"index generation {result.generation} is inconsistent: "
                    f"{'; '.join(result.problems)}. {REBUILD_HINT}"
                )
            return result

    # -- building -------------------------------------------------------------------------
    def _points(
        self, docs: Sequence[Document], progress: Progress | None, done: int, total: int
    ) -> Iterable[list[Point]]:
        """Chunk, embed (through the cache) and yield points in batches."""
        pending: list[tuple[Document, Chunk]] = []

        def flush() -> list[Point]:
            embeddings = self.embedder.embed_documents([c.text for _, c in pending])
            points = []
            for (doc, chunk), emb in zip(pending, embeddings, strict=True):
                sparse = {"bm25": term_frequencies(self.tokenizer(chunk.text))}
                if emb.sparse is not None:
                    sparse["sparse"] = emb.sparse
                points.append(
                    Point(chunk.id, emb.dense, sparse, _payload(doc, chunk, self._writable(doc)))
                )
            pending.clear()
            return points

        for doc in docs:
            for chunk in chunk_document(doc, self.max_chars):
                pending.append((doc, chunk))
            done += 1
            if len(pending) >= self.batch_size:
                yield flush()
                if progress:
                    progress("embed", done, total)
        if pending:
            yield flush()
        if progress:
            progress("embed", done, total)

    def _next_generation(self) -> str:
        numbers = [int(_GEN.match(g).group(1)) for g in self.generations()]  # type: ignore[union-attr]
        return f"gen-{(max(numbers) + 1) if numbers else 1:06d}"

    def build(self, docs: Iterable[Document], progress: Progress | None = None) -> BuildReport:
        """Write every document into a new generation, check it, then switch CURRENT to it.

        The live generation keeps serving until the switch. Orphans of builds that died and
        generations older than the previous one are removed afterwards.
        """
        return self.activate(self.prepare(docs, progress))

    def prepare(self, docs: Iterable[Document], progress: Progress | None = None) -> Prepared:
        """Write and check a new generation without switching to it. Takes no lock: searches
        on the live generation go on meanwhile (one prepare at a time is the caller's job)."""
        start = time.perf_counter()
        docs = list(docs)
        self.root.mkdir(parents=True, exist_ok=True)
        seen: set[str] = set()
        unique_docs = []
        for doc in docs:
            if doc.id in seen:
                raise IndexError_(f"two documents share the id {doc.id!r}; ids must be unique")
            seen.add(doc.id)
            unique_docs.append(doc)
        name = self._next_generation()
        gen_dir = self.root / name
        gen_dir.mkdir()
        store = self._store_for(name)
        manifest: dict[str, Any] = {
            "format": 1,
            "generation": name,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "embedder": {
                "id": self.embedder.model_id,
                "dim": self.embedder.dim,
                "sparse": self.embedder.has_sparse,
            },
            "max_chars": self.max_chars,
            "docs": {},
        }
        chunks = 0
        try:
            sparse_names = ["bm25", "sparse"] if self.embedder.has_sparse else ["bm25"]
            store.create(self.embedder.dim, sparse_names)
            with store.bulk():
                for batch in self._points(unique_docs, progress, 0, len(unique_docs)):
                    store.upsert(batch)
                    chunks += len(batch)
            for doc in unique_docs:
                manifest["docs"][doc.id] = self._manifest_entry(doc)
            atomic_write(gen_dir / MANIFEST, json.dumps(manifest, ensure_ascii=False).encode())
            points = store.count()
            expected = sum(d["chunks"] for d in manifest["docs"].values())
            if points != expected or chunks != expected:
                raise IndexInconsistent(
                    f"new generation {name} holds {points} points, expected {expected}; "
                    "CURRENT was not switched"
                )
        finally:
            store.close()
        return Prepared(name, len(unique_docs), chunks, time.perf_counter() - start)

    def activate(self, prepared: Prepared) -> BuildReport:
        """Switch CURRENT to a prepared generation (atomically) and open it."""
        with self.lock:
            start = time.perf_counter()
            previous = self.current()
            atomic_write(self.root / CURRENT, (prepared.generation + "\n").encode())
            removed = self._clean(keep={prepared.generation, previous} - {None})
            self.open()
            return BuildReport(
                prepared.generation,
                prepared.documents,
                prepared.chunks,
                prepared.chunks,
                prepared.seconds + time.perf_counter() - start,
                removed,
            )

    def _manifest_entry(self, doc: Document) -> dict[str, Any]:
        return {
            "hash": doc.content_hash,
            "chunks": len(chunk_document(doc, self.max_chars)),
            "source": doc.source,
        }

    def _clean(self, keep: set[str]) -> list[str]:
        """Remove generations other than `keep`: orphans of dead builds and old ones."""
        removed = []
        for gen in self.generations():
            if gen not in keep:
                if self.qdrant_url:
                    store = self._store_for(gen)
                    store.drop()
                    store.close()
                shutil.rmtree(self.root / gen, ignore_errors=True)
                removed.append(gen)
        return removed

    # -- incremental refresh ------------------------------------------------------------
    def refresh(
        self,
        docs: Iterable[Document],
        *,
        sources: Iterable[str] | None = None,
        keep: Iterable[str] = (),
        progress: Progress | None = None,
    ) -> RefreshReport:
        """Bring the live generation in line with `docs`.

        Documents whose content hash changed are re-chunked and re-embedded (the cache makes
        unchanged chunks free); documents of `sources` (all sources when None) that are not in
        `docs` are removed, except the ids in `keep` (files that exist but cannot be read
        right now keep their last good version). Documents of other sources are left alone.
        """
        with self.lock:
            self._ensure_open()
            self.check(raise_on_error=True)
            assert self._manifest is not None and self._store is not None
            known: dict[str, Any] = self._manifest["docs"]
            report = RefreshReport(self._generation or "")
            docs = list(docs)
            wanted = {d.id for d in docs} | set(keep)
            scope = set(sources) if sources is not None else None
            changed = [d for d in docs if known.get(d.id, {}).get("hash") != d.content_hash]
            gone = [
                doc_id
                for doc_id, entry in known.items()
                if doc_id not in wanted and (scope is None or entry.get("source") in scope)
            ]
            if not changed and not gone:
                return report
            for doc in changed:
                (report.updated if doc.id in known else report.added).append(doc.id)
            report.removed = gone
            stale: list[str] = []
            for doc_id in gone + [d.id for d in changed if d.id in known]:
                stale.extend(f"{doc_id}#{n}" for n in range(known[doc_id]["chunks"]))
            new_points: list[Point] = []
            for batch in self._points(changed, progress, 0, len(changed)):
                new_points.extend(batch)
            new_ids = {p.chunk_id for p in new_points}
            to_delete = [c for c in stale if c not in new_ids]
            self._store.upsert(new_points)
            self._store.delete(to_delete)
            for chunk_id in to_delete:
                self._forget(chunk_id)
            for point in new_points:
                self._remember(point)
            for doc_id in gone:
                known.pop(doc_id, None)
            for doc in changed:
                known[doc.id] = self._manifest_entry(doc)
            report.chunks_embedded = len(new_points)
            atomic_write(
                self.root / self._generation / MANIFEST,  # type: ignore[operator]
                json.dumps(self._manifest, ensure_ascii=False).encode(),
            )
            self.check(raise_on_error=True)
            return report

    # -- lookups used by search -----------------------------------------------------------
    def dense_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.store.dense_vectors(chunk_ids)
