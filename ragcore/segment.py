"""One generation on disk: a SQLite file holding every document and chunk of the index.

    meta(key, value)            embedder id and dimension, format, generation, created; `uid`
                                (random, this file's) and `seq` (the number of the last change)
    docs(doc_id, hash, chunks, source, stamp, info, seq)
                                the manifest: what each document was indexed from; `info` is
                                JSON {title, path, writable, links, meta, entities}; `seq` the
                                change that last wrote the row
    chunks(chunk_id, doc_id, n, heading, text, dense, terms, tfs, sparse_terms, sparse_weights)
                                each chunk with its vectors as little-endian numpy bytes
    gone(doc_id, seq)           the documents a change removed, and which change

Every change is one transaction, so the manifest and the chunks can never disagree after a
crash (WAL mode; `synchronous=NORMAL`: a power loss may lose the last transactions, never tear
one - the index is derived data, rebuilt from the Markdown when in doubt). A bulk build runs in
one transaction with `synchronous=OFF` and is checked before CURRENT names it. Each change
takes the next `seq`, so `changes_since(seq)` says what changed after a saved read model was
taken (`ragcore.modelload`). A segment of format 2 (no `seq`) gains it when first opened.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ChunkRow", "DocRow", "SegmentFile"]

FORMAT = 3
FILE = "segment.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    doc_id TEXT PRIMARY KEY, hash TEXT NOT NULL, chunks INTEGER NOT NULL,
    source TEXT NOT NULL, stamp TEXT, info TEXT NOT NULL, seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, n INTEGER NOT NULL,
    heading TEXT NOT NULL, text TEXT NOT NULL, dense BLOB NOT NULL,
    terms BLOB NOT NULL, tfs BLOB NOT NULL, sparse_terms BLOB, sparse_weights BLOB);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
"""
# Change tracking (format 3): also what a format-2 segment gains when first opened.
_CHANGES = """
CREATE TABLE IF NOT EXISTS gone (doc_id TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS docs_seq ON docs(seq);
"""
# A document whose file moved keeps its chunks (`relabel`): its hash before the move, so a
# read model that replays the change keeps its slots too. Made at every writable open.
_MOVED = """
CREATE TABLE IF NOT EXISTS moved (doc_id TEXT PRIMARY KEY, was TEXT NOT NULL, seq INTEGER);
CREATE INDEX IF NOT EXISTS moved_seq ON moved(seq)"""


@dataclass
class DocRow:
    doc_id: str
    hash: str
    chunks: int
    source: str
    stamp: str | None
    info: dict[str, Any]


@dataclass
class ChunkRow:
    chunk_id: str
    doc_id: str
    n: int
    heading: str
    text: str
    dense: np.ndarray
    terms: np.ndarray  # int64 term ids (the lexical channel)
    tfs: np.ndarray  # float32 term frequencies
    sparse: dict[int, float] | None = field(default=None)


_NO_VECTOR = np.zeros(0, dtype=np.float32)


def _blob(a: np.ndarray, dtype: str) -> bytes:
    return np.ascontiguousarray(a, dtype=dtype).tobytes()


class SegmentFile:
    """`read_only`: for a process that reads a segment another one owns (`ragcore.follow`):
    SQLite opens it `mode=ro`, so nothing is written - not the change tracking an older
    segment lacks, and not the checkpoint that the last connection to close otherwise runs
    (copying the owner's WAL into the file and deleting it)."""

    def __init__(self, path: Path, *, create: bool = False, read_only: bool = False):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise FileNotFoundError(self.path)
        self._lock = threading.RLock()
        if read_only:
            uri = self.path.resolve().as_uri() + "?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=60)
            return
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        if create:
            self._conn.executescript(_SCHEMA)
        self._track_changes()
        with self._lock, self._conn:
            for statement in _MOVED.strip().split(";"):
                self._conn.execute(statement)

    def _track_changes(self) -> None:
        """Give the segment its change tracking (`uid`, `seq`, `docs.seq`, `gone`) unless it
        has it: a new segment, or one of format 2."""
        with self._lock:
            columns = {r[1] for r in self._conn.execute("PRAGMA table_info(docs)")}
            if "seq" in columns and self._meta_value("uid") is not None:
                return
            with self._conn:
                if "seq" not in columns:
                    self._conn.execute("ALTER TABLE docs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
                for statement in _CHANGES.strip().split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("uid", json.dumps(uuid.uuid4().hex)), ("seq", "0"), ("format", str(FORMAT))],
                )

    def _meta_value(self, key: str) -> Any:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def _next_seq(self) -> int:
        """The number of the change under way (inside its transaction)."""
        seq = int(self._meta_value("seq") or 0) + 1
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('seq', ?)", (str(seq),))
        return seq

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[None]:
        """Every read of this connection inside sees the segment as one change left it (WAL:
        the writer, another process, goes on meanwhile). For a process that reads a segment
        another one writes (`ragcore.follow`): its `seq`, its changed documents and their
        chunks then agree with each other."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield
            finally:
                # Nothing to commit (reads); a connection the body closed has nothing to end.
                with contextlib.suppress(sqlite3.ProgrammingError):
                    self._conn.execute("COMMIT")

    # -- meta ---------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        with self._lock:
            rows = self._conn.execute("SELECT key, value FROM meta").fetchall()
        return {k: json.loads(v) for k, v in rows}

    def set_meta(self, values: dict[str, Any]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in values.items()],
            )

    def state(self) -> tuple[str, int]:
        """(this segment's uid, the number of its last change)."""
        with self._lock:
            return str(self._meta_value("uid")), int(self._meta_value("seq") or 0)

    # -- reads --------------------------------------------------------------------------------
    def changes_since(self, seq: int) -> tuple[list[DocRow], list[str]]:
        """The documents written by a change after `seq` (as they are now), and the ids
        removed after it."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT doc_id, hash, chunks, source, stamp, info FROM docs WHERE seq > ?", (seq,)
            ).fetchall()
            gone = self._conn.execute("SELECT doc_id FROM gone WHERE seq > ?", (seq,)).fetchall()
        docs = [DocRow(d, h, c, src, st, json.loads(info)) for d, h, c, src, st, info in rows]
        return docs, [g for (g,) in gone]

    def moved_since(self, seq: int) -> dict[str, str]:
        """The hash before the move of each document `relabel` moved after change `seq` (and
        not written since): its chunks are the ones it had."""
        with self._lock:
            try:
                rows = self._conn.execute("SELECT doc_id, was FROM moved WHERE seq > ?", (seq,))
                return dict(rows.fetchall())
            except sqlite3.OperationalError:  # a segment no writer of this version opened
                return {}

    def count_changes_since(self, seq: int) -> int:
        """How many documents were written or removed after change `seq`."""
        with self._lock:
            written = self._conn.execute("SELECT COUNT(*) FROM docs WHERE seq > ?", (seq,))
            removed = self._conn.execute("SELECT COUNT(*) FROM gone WHERE seq > ?", (seq,))
            return int(written.fetchone()[0]) + int(removed.fetchone()[0])

    def counts(self) -> tuple[int, int]:
        """(chunks listed by the manifest, chunk rows present)."""
        with self._lock:
            listed = self._conn.execute("SELECT COALESCE(SUM(chunks), 0) FROM docs").fetchone()[0]
            present = self._conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return int(listed), int(present)

    def docs(self) -> Iterator[DocRow]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT doc_id, hash, chunks, source, stamp, info FROM docs"
            ).fetchall()
        for doc_id, h, chunks, source, stamp, info in rows:
            yield DocRow(doc_id, h, chunks, source, stamp, json.loads(info))

    def chunk_vectors(self, with_dense: bool = True) -> Iterator[tuple]:
        """(chunk_id, doc_id, n, dense bytes|None, terms, tfs, sparse_terms, sparse_weights) of
        every chunk, raw (the caller turns bytes into arrays in bulk)."""
        dense = "dense" if with_dense else "NULL"
        with self._lock:
            cursor = self._conn.execute(
                f"SELECT chunk_id, doc_id, n, {dense}, terms, tfs, sparse_terms, sparse_weights "
                "FROM chunks"
            )
            while rows := cursor.fetchmany(4096):
                yield from rows

    def chunk_rows(self, doc_ids: Sequence[str], with_dense: bool = True) -> list[ChunkRow]:
        """The chunks of these documents with their vectors (heading and text left empty;
        without `with_dense`, the dense vectors too)."""
        out: list[ChunkRow] = []
        dense = "dense" if with_dense else "NULL"
        with self._lock:
            for start in range(0, len(doc_ids), 500):
                part = list(doc_ids[start : start + 500])
                marks = ",".join("?" * len(part))
                for cid, doc_id, n, d, t, f, st, sw in self._conn.execute(
                    f"SELECT chunk_id, doc_id, n, {dense}, terms, tfs, sparse_terms, "
                    f"sparse_weights FROM chunks WHERE doc_id IN ({marks}) ORDER BY rowid",
                    part,
                ):
                    sparse = None
                    if st is not None:
                        keys = np.frombuffer(st, dtype="<i8").tolist()
                        values = np.frombuffer(sw, dtype="<f4").tolist()
                        sparse = dict(zip(keys, values, strict=True))
                    out.append(
                        ChunkRow(
                            cid,
                            doc_id,
                            n,
                            "",
                            "",
                            np.frombuffer(d, dtype="<f4") if d is not None else _NO_VECTOR,
                            np.frombuffer(t, dtype="<i8"),
                            np.frombuffer(f, dtype="<f4"),
                            sparse,
                        )
                    )
        return out

    def texts(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """{chunk id: (heading, text)} for these chunks."""
        out: dict[str, tuple[str, str]] = {}
        with self._lock:
            for start in range(0, len(chunk_ids), 500):
                part = list(chunk_ids[start : start + 500])
                marks = ",".join("?" * len(part))
                for cid, heading, text in self._conn.execute(
                    f"SELECT chunk_id, heading, text FROM chunks WHERE chunk_id IN ({marks})", part
                ):
                    out[cid] = (heading, text)
        return out

    def dense(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(chunk_ids), 500):
                part = list(chunk_ids[start : start + 500])
                marks = ",".join("?" * len(part))
                for cid, blob in self._conn.execute(
                    f"SELECT chunk_id, dense FROM chunks WHERE chunk_id IN ({marks})", part
                ):
                    out[cid] = np.frombuffer(blob, dtype=np.float32).copy()
        return out

    # -- writes -------------------------------------------------------------------------------
    def write(
        self,
        docs: Iterable[DocRow],
        chunks: Iterable[ChunkRow],
        delete_docs: Iterable[str] = (),
        *,
        bulk: bool = False,
    ) -> None:
        """One transaction: remove the chunks of every document in `delete_docs` and of every
        document in `docs`, then insert `docs` and `chunks`."""
        docs = list(docs)
        removed = list(dict.fromkeys(delete_docs))
        gone = list(dict.fromkeys([*removed, *(d.doc_id for d in docs)]))
        with self._lock:
            if bulk:
                self._conn.execute("PRAGMA synchronous=OFF")
            try:
                with self._conn:
                    seq = self._next_seq()
                    self._conn.executemany(
                        "INSERT OR REPLACE INTO gone VALUES (?, ?)",
                        [(d, seq) for d in removed],
                    )
                    for start in range(0, len(gone), 500):
                        part = gone[start : start + 500]
                        marks = ",".join("?" * len(part))
                        self._conn.execute(f"DELETE FROM chunks WHERE doc_id IN ({marks})", part)
                        self._conn.execute(f"DELETE FROM moved WHERE doc_id IN ({marks})", part)
                        self._conn.execute(f"DELETE FROM docs WHERE doc_id IN ({marks})", part)
                    self._conn.executemany(
                        "INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [
                            (
                                d.doc_id,
                                d.hash,
                                d.chunks,
                                d.source,
                                d.stamp,
                                json.dumps(d.info, ensure_ascii=False, default=str),
                                seq,
                            )
                            for d in docs
                        ],
                    )
                    self._conn.executemany(
                        "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            (
                                c.chunk_id,
                                c.doc_id,
                                c.n,
                                c.heading,
                                c.text,
                                _blob(c.dense, "<f4"),
                                _blob(c.terms, "<i8"),
                                _blob(c.tfs, "<f4"),
                                _blob(np.fromiter(c.sparse, np.int64, len(c.sparse)), "<i8")
                                if c.sparse is not None
                                else None,
                                _blob(
                                    np.fromiter(c.sparse.values(), np.float32, len(c.sparse)), "<f4"
                                )
                                if c.sparse is not None
                                else None,
                            )
                            for c in chunks
                        ),
                    )
            finally:
                if bulk:
                    self._conn.execute("PRAGMA synchronous=NORMAL")
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def relabel(self, docs: Iterable[DocRow]) -> None:
        """New manifest rows of documents whose chunks did not change (a touched file's stamp, a
        moved file's path and hash: its hash before is kept, `moved_since`)."""
        docs = list(docs)
        with self._lock, self._conn:
            seq = self._next_seq()
            self._conn.executemany(
                "INSERT OR REPLACE INTO moved SELECT doc_id, hash, ? FROM docs "
                "WHERE doc_id = ? AND hash != ?",
                [(seq, d.doc_id, d.hash) for d in docs],
            )
            self._conn.executemany(
                "UPDATE docs SET hash = ?, stamp = ?, info = ?, seq = ? WHERE doc_id = ?",
                [
                    (
                        d.hash,
                        d.stamp,
                        json.dumps(d.info, ensure_ascii=False, default=str),
                        seq,
                        d.doc_id,
                    )
                    for d in docs
                ],
            )
