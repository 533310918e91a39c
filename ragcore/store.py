"""The vector store: where an index generation keeps its points.

`Store` is the interface; `QdrantStore` implements it on qdrant-client, in local mode (embedded,
files in the generation directory; the default) or against a Qdrant server URL (the scale-out
path). Local mode is not thread-safe, so every call takes one lock; it holds an exclusive file
lock per path, so one process owns a generation at a time.

A point carries a chunk's dense vector, its sparse vectors (`bm25` term frequencies, and
`sparse` lexical weights when the model has them) and its payload. Point ids are UUIDs derived
from the chunk id, so the chunk id alone addresses a point.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["Filter", "Point", "QdrantStore", "Store"]

COLLECTION = "chunks"
_NAMESPACE = uuid.UUID("6f1c1c59-2b0a-4b7e-9a55-7d1f3c3e5a10")


@dataclass
class Point:
    chunk_id: str
    dense: np.ndarray
    sparse: dict[str, dict[int, float]] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Filter:
    """Which chunks a search may return. Every given field must match (AND); within a list,
    any value matches (OR). `statuses` None means any status."""

    types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    statuses: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    doc_ids: tuple[str, ...] | None = None

    def matches(self, payload: dict[str, Any]) -> bool:
        if self.types is not None and payload.get("type") not in self.types:
            return False
        if self.statuses is not None and payload.get("status", "active") not in self.statuses:
            return False
        if self.sources is not None and payload.get("source") not in self.sources:
            return False
        if self.tags is not None and not set(payload.get("tags") or ()) & set(self.tags):
            return False
        if self.doc_ids is not None and payload.get("doc_id") not in self.doc_ids:
            return False
        return True

    def is_empty(self) -> bool:
        return all(
            v is None for v in (self.types, self.tags, self.statuses, self.sources, self.doc_ids)
        )


def point_uuid(chunk_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, chunk_id))


class Store(Protocol):
    """Persistence and dense search for one generation's points."""

    def create(self, dim: int, sparse_names: Sequence[str]) -> None: ...

    def upsert(self, points: Sequence[Point]) -> None: ...

    def delete(self, chunk_ids: Sequence[str]) -> None: ...

    def count(self) -> int: ...

    def scroll(self, with_dense: bool = False) -> Iterator[Point]: ...

    def search_dense(
        self, vector: np.ndarray, limit: int, flt: Filter | None = None
    ) -> list[tuple[str, float]]: ...

    def dense_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def bulk(self) -> Any: ...

    def close(self) -> None: ...


class QdrantStore:
    """qdrant-client in local mode (a directory) or against a server (`url`).

    With a server, `collection` must be unique per generation; in local mode each generation
    has its own directory and the collection is always `chunks`.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        url: str | None = None,
        collection: str = COLLECTION,
        api_key: str | None = None,
    ):
        from qdrant_client import QdrantClient

        if (path is None) == (url is None):
            raise ValueError("QdrantStore needs exactly one of path or url")
        self.path = Path(path) if path is not None else None
        self.collection = collection
        self._lock = threading.RLock()
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._client = QdrantClient(path=str(self.path))
        else:
            self._client = QdrantClient(url=url, api_key=api_key)

    # -- lifecycle ------------------------------------------------------------------------
    def create(self, dim: int, sparse_names: Sequence[str]) -> None:
        from qdrant_client import models

        with self._lock:
            if self._client.collection_exists(self.collection):
                return
            self._client.create_collection(
                self.collection,
                vectors_config={
                    "dense": models.VectorParams(size=dim, distance=models.Distance.COSINE)
                },
                sparse_vectors_config={name: models.SparseVectorParams() for name in sparse_names},
            )

    def drop(self) -> None:
        """Delete the collection (server mode cleans up old generations this way; in local
        mode the generation directory is removed instead)."""
        with self._lock:
            if self._client.collection_exists(self.collection):
                self._client.delete_collection(self.collection)

    def exists(self) -> bool:
        with self._lock:
            return self._client.collection_exists(self.collection)

    def close(self) -> None:
        with self._lock:
            self._client.close()

    class _Bulk:
        """Inside `with store.bulk():` local-mode writes skip the per-point fsync; the file is
        synced once on leaving the block. (qdrant-client local mode commits one SQLite
        transaction per point; with synchronous=FULL each one pays an fsync.) Why this is safe:
        docs/adr/0002-bulk-build-without-per-point-fsync.md."""

        def __init__(self, store: QdrantStore):
            self.store = store
            self.conn = None

        def __enter__(self):
            self.conn = self.store._sqlite()
            if self.conn is not None:
                self.conn.execute("PRAGMA synchronous=OFF")
            return self

        def __exit__(self, *exc):
            if self.conn is not None:
                self.conn.execute("PRAGMA synchronous=FULL")
                path = self.store.path / "collection" / self.store.collection / "storage.sqlite"
                if path.exists():
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            return False

    def bulk(self) -> QdrantStore._Bulk:
        return QdrantStore._Bulk(self)

    def _sqlite(self):
        """The SQLite connection behind a local-mode collection, or None (server mode)."""
        if self.path is None:
            return None
        local = getattr(self._client, "_client", None)
        collection = getattr(local, "collections", {}).get(self.collection)
        storage = getattr(collection, "storage", None)
        return getattr(storage, "storage", None)

    # -- writes ---------------------------------------------------------------------------
    def upsert(self, points: Sequence[Point]) -> None:
        from qdrant_client import models

        structs = []
        for p in points:
            vector: dict[str, Any] = {"dense": np.asarray(p.dense, dtype=np.float32).tolist()}
            for name, sparse in p.sparse.items():
                items = sorted(sparse.items())
                vector[name] = models.SparseVector(
                    indices=[k for k, _ in items], values=[float(v) for _, v in items]
                )
            payload = dict(p.payload, chunk_id=p.chunk_id)
            structs.append(
                models.PointStruct(id=point_uuid(p.chunk_id), vector=vector, payload=payload)
            )
        with self._lock:
            for start in range(0, len(structs), 256):
                self._client.upsert(self.collection, structs[start : start + 256], wait=True)

    def delete(self, chunk_ids: Sequence[str]) -> None:
        from qdrant_client import models

        if not chunk_ids:
            return
        with self._lock:
            self._client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=[point_uuid(c) for c in chunk_ids]),
                wait=True,
            )

    # -- reads ----------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            return self._client.count(self.collection, exact=True).count

    def scroll(self, with_dense: bool = False) -> Iterator[Point]:
        """Every point with its payload and sparse vectors (and dense, if asked)."""
        offset = None
        while True:
            with self._lock:
                records, offset = self._client.scroll(
                    self.collection, limit=512, offset=offset, with_payload=True, with_vectors=True
                )
            for r in records:
                vectors = r.vector if isinstance(r.vector, dict) else {}
                sparse = {
                    name: dict(zip(v.indices, v.values, strict=True))
                    for name, v in vectors.items()
                    if name != "dense" and hasattr(v, "indices")
                }
                dense = (
                    np.asarray(vectors.get("dense", ()), dtype=np.float32)
                    if with_dense
                    else np.empty(0)
                )
                payload = dict(r.payload or {})
                yield Point(payload.pop("chunk_id"), dense, sparse, payload)
            if offset is None:
                return

    def dense_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not chunk_ids:
            return {}
        with self._lock:
            records = self._client.retrieve(
                self.collection,
                [point_uuid(c) for c in chunk_ids],
                with_payload=["chunk_id"],
                with_vectors=["dense"],
            )
        out = {}
        for r in records:
            vec = r.vector["dense"] if isinstance(r.vector, dict) else r.vector
            out[r.payload["chunk_id"]] = np.asarray(vec, dtype=np.float32)
        return out

    def search_dense(
        self, vector: np.ndarray, limit: int, flt: Filter | None = None
    ) -> list[tuple[str, float]]:
        if flt is not None and flt.doc_ids is not None and not flt.doc_ids:
            return []  # an empty allow-list matches nothing
        with self._lock:
            result = self._client.query_points(
                self.collection,
                query=np.asarray(vector, dtype=np.float32).tolist(),
                using="dense",
                limit=limit,
                query_filter=_to_qdrant(flt),
                with_payload=["chunk_id"],
            )
        return [(p.payload["chunk_id"], float(p.score)) for p in result.points]


def _to_qdrant(flt: Filter | None):
    if flt is None or flt.is_empty():
        return None
    from qdrant_client import models

    must = []
    for key, values in (
        ("type", flt.types),
        ("status", flt.statuses),
        ("source", flt.sources),
        ("tags", flt.tags),
        ("doc_id", flt.doc_ids),
    ):
        if values is not None:
            must.append(models.FieldCondition(key=key, match=models.MatchAny(any=list(values))))
    return models.Filter(must=must)
