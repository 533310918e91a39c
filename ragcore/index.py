"""The index: generation directories, an atomic CURRENT pointer, a consistency check, and
incremental changes - served from an in-memory read model.

    index/CURRENT                      name of the live generation ("gen-000007"), replaced
                                       atomically
    index/gen-000007/segment.sqlite    everything of that generation: the manifest (what each
                                       document was indexed from), each chunk's text and
                                       vectors (`ragcore.segment`)
    index/gen-000007/readmodel.arrays  the read model's arrays, saved for a fast open
                                       (derived from the segment; `ragcore.modelload`)

A full `build` writes a new generation (`prepare`, no lock held: searches go on) and moves
CURRENT to it only after the check passes (`activate`). A build that dies leaves an orphan
directory nobody reads; the next build removes it. `apply` changes the live generation in place,
one transaction per call: it embeds only the documents it is given (the embedding cache makes
unchanged chunks free) and drops the ids it is told are gone. `refresh` applies the difference
between a full list of documents and the manifest (by content hash). An index that fails the
check refuses to search (`IndexInconsistent`, naming a rebuild), never answering empty.

Opening a generation loads its read model (`ragcore.readmodel`), mapped from the saved arrays
when they fit the segment, else read from its rows (and saved). A large one gets an HNSW graph
for its dense vectors (`ragcore.ann`), opened from its file or built on a thread and attached
when done (exact scans meanwhile). With a Qdrant server (`qdrant_url`) the dense vectors live
in a collection per generation instead, and dense search runs there, the filter pushed down.

Readers never wait for writers: the live state is a `ragcore.snapshot.Snapshot` (a read
model, the segment and the generation's name), never changed once published. A change
(`apply`, `set_stamps`) embeds and writes the segment (`ragcore.rows` turns documents into
rows), applies itself to a copy-on-write clone of the read model (`ReadModel.clone`) and
publishes the clone by one reference assignment; `activate` loads the new generation's read
model before it moves CURRENT. A reader takes `snapshot()` once and answers from it, so a
search sees every write either whole or not at all. Writers are serialised by the index's lock
(and, above it, by the caller's writer lock).

Public lookups: `doc(id)`, `docs()`, `len(index)`, `revision` (changes with every change),
`similar(document, ...)` (the nearest documents to a new text), `snapshot()`; and
`open_in_background()`. Nothing else of the index's insides is part of its interface.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from ragcore import ann
from ragcore.atomic import atomic_write
from ragcore.docinfo import DocInfo
from ragcore.documents import DEFAULT_MAX_CHARS, Document
from ragcore.embedding import Embedder
from ragcore.errors import IndexError_, IndexInconsistent
from ragcore.reports import BuildReport, Prepared, RefreshReport
from ragcore.rows import Progress, RowBuilder, doc_rows, server_points
from ragcore.segment import FILE as SEGMENT_FILE
from ragcore.segment import FORMAT, ChunkRow, SegmentFile
from ragcore.snapshot import REBUILD_HINT, Consistency, Snapshot
from ragcore.store import Filter, QdrantStore, collection_for
from ragcore.tokenizer import Tokenizer

__all__ = [
    "BuildReport",
    "Index",
    "Prepared",
    "RefreshReport",
    "live_generation",
]

CURRENT = "CURRENT"
_GEN = re.compile(r"^gen-(\d{6})$")


def live_generation(root: Path) -> str | None:
    """The generation the CURRENT pointer under `root` names (None: no index yet). Reads one
    small file: no model, no store."""
    try:
        name = (Path(root) / CURRENT).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return name if _GEN.match(name) else None


class Index:
    """The index of one home. Not safe for two processes at once (the owner - the daemon, or
    a CLI command with no daemon - holds the home lock). Within a process, readers take a
    `snapshot()` and never wait; writers are serialised by `_lock`."""

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
        qdrant_location: str | None = None,
        dense_graph: bool = True,
        qdrant_api_key: str | None = None,
    ):
        self.root = Path(root)
        self.embedder = embedder
        self.tokenizer = tokenizer or Tokenizer()
        self.max_chars = max_chars
        self.writable_sources = set(writable_sources) if writable_sources is not None else None
        self.batch_size = batch_size
        # With a Qdrant server (or `qdrant_location`: qdrant-client's in-process engine), each
        # generation's dense vectors are a collection (`store.collection_for`).
        self.qdrant_url = qdrant_url
        self.qdrant_location = qdrant_location
        self.qdrant_api_key = qdrant_api_key  # a server's (Qdrant Cloud's); never logged
        self.dense_graph = dense_graph  # False: the exact dense scan at every size
        self._builds = ann.Builds()  # the dense graphs being built, by the rows of each
        self._lock = threading.RLock()  # writers (and the first open) only
        self._snap: Snapshot | None = None
        self.open_error: Exception | None = None  # why the last open failed (None: it did not)
        self._switching: str | None = None  # the generation activate is moving CURRENT to
        self._rows = RowBuilder(
            self.embedder, self.tokenizer, max_chars, batch_size, self._writable
        )

    # -- paths and pointer ------------------------------------------------------------------
    def generations(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _GEN.match(p.name))

    def current(self) -> str | None:
        return live_generation(self.root)

    def serving(self) -> tuple[str | None, ...]:
        """The generations CURRENT may name while this index serves (a snapshot's check): the
        live one and the one `activate` is moving CURRENT to (None where there is none)."""
        return (self.generation, self._switching)

    @property
    def generation(self) -> str | None:
        snap = self._snap
        return snap.generation if snap is not None else None

    @property
    def revision(self) -> int:
        """Changes with every change of the live generation (for callers' caches)."""
        snap = self._snap
        return snap.model.revision if snap is not None else 0

    def snapshot(self) -> Snapshot:
        """The live state, to read from without waiting (opens the index if needed)."""
        return self._ensure_open()

    @property
    def server_mode(self) -> bool:
        return bool(self.qdrant_url or self.qdrant_location)

    def _server_for(self, generation: str, new: bool = False) -> QdrantStore | None:
        if not self.server_mode:
            return None
        name = collection_for(self.root, generation, new=new)
        if self.qdrant_url:
            return QdrantStore(url=self.qdrant_url, collection=name, api_key=self.qdrant_api_key)
        # qdrant-client's local engine allows one client per path: one path per generation
        return QdrantStore(
            location=str(Path(str(self.qdrant_location)) / generation), collection=name
        )

    def _writable(self, doc: Document) -> bool:
        return self.writable_sources is None or doc.source in self.writable_sources

    # -- open / close ---------------------------------------------------------------------
    def exists(self) -> bool:
        return self.current() is not None

    def open(self) -> None:
        """Open the live generation and load its read model."""
        with self._lock:
            name = self.current()
            if name is None:
                raise IndexError_(f"no index under {self.root}", REBUILD_HINT)
            self._snap = self._load(name)  # the one before stays readable for its readers
            self.open_error = None
            self._graph_later(self._snap)

    def open_in_background(
        self, before: Callable[[], object], then: Callable[[Snapshot | None], object]
    ) -> bool:
        """Start opening the live generation on a thread ("index-open"); False if it is open or
        there is none. The thread holds the writers' lock before this returns: a reader that
        comes meanwhile waits for this open, never starts a second. On that thread `before()`
        runs first and `then(snapshot)` after the open, the lock released - `then(None)` if it
        failed: the error is kept (`open_error`), and the next reader opens again and raises it."""
        held = threading.Event()

        def run() -> None:
            snap = None
            with self._lock:
                held.set()
                try:
                    before()
                    snap = self._ensure_open()
                except Exception as exc:  # noqa: BLE001 - kept; the next reader raises it
                    self.open_error = exc
            then(snap)

        with self._lock:
            if self._snap is not None or not self.exists():
                return False
            threading.Thread(target=run, name="index-open", daemon=True).start()
        return held.wait()

    def _load(self, name: str) -> Snapshot:
        """Read generation `name` into a snapshot (not published)."""
        snap = Snapshot.open(self, name, self._server_for(name), with_dense=not self.server_mode)
        if not self.dense_graph:
            snap.model.attach_graph(None)  # not published yet
        return snap

    def _graph_later(self, snap: Snapshot) -> None:
        """A large model without its dense graph: build it on a thread, then attach it to
        the live model if that still has the rows it was built from (ADR 0022)."""
        if not self.dense_graph or snap.server is not None or not ann.wanted(snap.model):
            return

        def attach(base, graph) -> None:
            with self._lock:
                live = self._snap
                if graph is not None and live is not None and live.model.base_rows is base:
                    model = live.model.clone()
                    model.attach_graph(graph)
                    self._snap = live.with_model(model)

        self._builds.start(snap.model, self.root / snap.generation / ann.FILE, attach)

    def dense_state(self) -> str:
        """How dense search runs now: graph, building (exact meantime), exact, server, closed."""
        building = self._builds.running()  # before the snapshot: a build attaches, then ends
        snap = self._snap
        if snap is None or snap.server is not None:
            return "closed" if snap is None else "server"
        if snap.model.graph is not None:
            return "graph"
        return "building" if any(r is snap.model.base_rows for r in building) else "exact"

    def _ensure_open(self) -> Snapshot:
        snap = self._snap
        if snap is None:
            with self._lock:
                if self._snap is None:
                    self.open()
                snap = self._snap
        assert snap is not None
        return snap

    def close(self) -> None:
        with self._lock:
            snap, self._snap = self._snap, None
            if snap is not None:
                snap.close()

    # -- consistency ----------------------------------------------------------------------
    def check(self, raise_on_error: bool = False) -> Consistency:
        """CURRENT names the open generation, and the manifest lists exactly the chunks held.
        Cheap (in memory): it runs before every search. Opens the live generation if needed
        (which raises if it cannot be opened)."""
        return self._ensure_open().check(raise_on_error)

    # -- building -------------------------------------------------------------------------
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
        seen: set[str] = set()
        for doc in docs:
            if doc.id in seen:
                raise IndexError_(f"two documents share the id {doc.id!r}; ids must be unique")
            seen.add(doc.id)
        self.root.mkdir(parents=True, exist_ok=True)
        name = self._next_generation()
        gen_dir = self.root / name
        gen_dir.mkdir()
        segment = SegmentFile(gen_dir / SEGMENT_FILE, create=True)
        server = self._server_for(name, new=True)
        chunks = 0
        try:
            segment.set_meta(
                {
                    "format": FORMAT,
                    "generation": name,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "embedder": self.embedder.model_id,
                    "dim": self.embedder.dim,
                    "sparse": self.embedder.has_sparse,
                    "max_chars": self.max_chars,
                }
            )
            if server is not None:
                server.create(self.embedder.dim)
            for infos, rows in self._rows.rows(docs, progress):
                segment.write(doc_rows(infos), rows, bulk=True)
                if server is not None:
                    server.upsert(server_points(infos, rows))
                chunks += len(rows)
            listed, present = segment.counts()
            if listed != present or present != chunks:
                raise IndexInconsistent(
                    f"new generation {name} holds {present} chunks, expected {listed}; "
                    "CURRENT was not switched"
                )
            if server is not None and server.count() != chunks:
                raise IndexInconsistent(
                    f"new generation {name}: the Qdrant collection holds {server.count()} "
                    f"points, expected {chunks}; CURRENT was not switched"
                )
        finally:
            segment.close()
            if server is not None:
                server.close()
        return Prepared(name, len(docs), chunks, time.perf_counter() - start)

    def load(self, prepared: Prepared) -> Snapshot:
        """Read a prepared generation into a snapshot, not yet live (no lock: at 100k
        documents this takes seconds, and neither searches nor writes wait for it)."""
        return self._load(prepared.generation)

    def activate(self, prepared: Prepared, loaded: Snapshot | None = None) -> BuildReport:
        """Switch CURRENT to a prepared generation (atomically) and publish it (`loaded`, or
        read now). Searches go on meanwhile, on the snapshot they hold."""
        with self._lock:
            start = time.perf_counter()
            previous = self.current()
            snap = loaded if loaded is not None else self._load(prepared.generation)
            self._switching = prepared.generation
            try:
                atomic_write(self.root / CURRENT, (prepared.generation + "\n").encode())
                self._snap = snap  # the old snapshot stays readable for searches in flight
            finally:
                self._switching = None
            self._graph_later(snap)
            removed = self._clean(keep={prepared.generation, previous} - {None})
            p, seconds = prepared, prepared.seconds + time.perf_counter() - start
            return BuildReport(p.generation, p.documents, p.chunks, p.chunks, seconds, removed)

    def _clean(self, keep: set[str]) -> list[str]:
        """Remove generations other than `keep`: orphans of dead builds and old ones."""
        removed = []
        for gen in self.generations():
            if gen not in keep:
                server = self._server_for(gen)
                if server is not None:
                    server.drop()
                    server.close()
                shutil.rmtree(self.root / gen, ignore_errors=True)
                removed.append(gen)
        return removed

    # -- changes --------------------------------------------------------------------------
    def apply(
        self,
        upserts: Iterable[Document] = (),
        deletes: Iterable[str] = (),
        progress: Progress | None = None,
    ) -> RefreshReport:
        """Index these documents (new or changed) and drop these ids, in one transaction.
        Only the given documents are chunked and embedded; nothing else is looked at."""
        with self._lock:
            snap = self._ensure_open()
            snap.check(raise_on_error=True)
            model = snap.model
            upserts = list(upserts)
            gone = [d for d in dict.fromkeys(deletes) if d in model.docs]
            report = RefreshReport(snap.generation)
            for doc in upserts:
                (report.updated if doc.id in model.docs else report.added).append(doc.id)
            report.removed = gone
            if not upserts and not gone:
                return report
            infos: list[DocInfo] = []
            rows: list[ChunkRow] = []
            for batch_infos, batch_rows in self._rows.rows(upserts, progress):
                infos.extend(batch_infos)
                rows.extend(batch_rows)
            snap.segment.write(doc_rows(infos), rows, gone)
            if snap.server is not None:
                old = [
                    model.chunk_of(s) for d in [*gone, *report.updated] for s in model.slots_of(d)
                ]
                new_ids = {r.chunk_id for r in rows}
                snap.server.delete([c for c in old if c not in new_ids])
                snap.server.upsert(server_points(infos, rows))
            changed = model.clone()
            changed.apply(infos, rows, gone)
            self._snap = snap.with_model(changed)  # published whole: one assignment
            report.chunks_embedded = len(rows)
            self._snap.check(raise_on_error=True)
            return report

    def refresh(
        self,
        docs: Iterable[Document],
        *,
        sources: Iterable[str] | None = None,
        keep: Iterable[str] = (),
        progress: Progress | None = None,
    ) -> RefreshReport:
        """Bring the live generation in line with the full list `docs`: documents whose
        content hash changed are applied; documents of `sources` (all when None) that are not
        in `docs` are dropped, except the ids in `keep` (files that exist but cannot be read
        right now keep their last good version). Hashes every document: for occasional use
        (a start, a web app's load), not per search."""
        with self._lock:
            model = self._ensure_open().model
            docs = list(docs)
            wanted = {d.id for d in docs} | set(keep)
            scope = set(sources) if sources is not None else None
            changed, restamp = [], {}
            for d in docs:
                known = model.docs.get(d.id)
                if known is None or known.hash != d.content_hash:
                    changed.append(d)
                elif d.stamp != known.stamp:
                    restamp[d.id] = d.stamp
            gone = [
                doc_id
                for doc_id, info in model.docs.items()
                if doc_id not in wanted and (scope is None or info.source in scope)
            ]
            if restamp:
                self.set_stamps(restamp)
            return self.apply(changed, gone, progress)

    def set_stamps(self, stamps: dict[str, str | None], moved: dict | None = None) -> None:
        """New stamps of documents whose chunks did not change; `moved`: id -> {path, hash}."""
        with self._lock:
            snap = self._ensure_open()
            model = snap.model.clone()
            new = [
                replace(info, stamp=stamp, **(moved or {}).get(d, {}))
                for d, stamp in stamps.items()
                if (info := model.docs.get(d)) is not None
            ]
            snap.segment.relabel(doc_rows(new))
            model.relabel(new)
            self._snap = snap.with_model(model)

    # -- lookups (each from the snapshot live at the call) ---------------------------------
    def __len__(self) -> int:
        return len(self._ensure_open())

    def doc(self, doc_id: str) -> DocInfo | None:
        return self._ensure_open().doc(doc_id)

    def docs(self) -> Iterator[DocInfo]:
        """Every document of the live generation (a snapshot)."""
        return self._ensure_open().docs()

    def ids_with_prefix(self, prefix: str) -> list[str]:
        return self._ensure_open().ids_with_prefix(prefix)

    def entity_docs(self, entity: str) -> frozenset[str]:
        """The documents whose text names `entity` (lower-case, as `DocInfo.entities`)."""
        return self._ensure_open().entity_docs(entity)

    def entity_count(self, entity: str) -> int:
        """How many documents name `entity` (its document frequency)."""
        return self._ensure_open().entity_count(entity)

    def token_idf(self, token: str) -> float:
        """The lexical channel's IDF of a token as the tokenizer spells it (how rare it is)."""
        return self._ensure_open().token_idf(token)

    def preview(self, doc_id: str) -> str:
        """The text of a document's first chunk (empty if the document is not indexed)."""
        return self._ensure_open().preview(doc_id)

    def similar(
        self,
        doc: Document,
        limit: int = 5,
        flt: Filter | None = None,
        exclude: Iterable[str] = (),
    ) -> list[tuple[str, float]]:
        """The documents nearest to `doc` by the cosine of its first chunk's dense vector to
        each stored chunk (best chunk per document), filtered, best first. Takes no lock."""
        return self._ensure_open().similar(doc, limit, flt, exclude)
