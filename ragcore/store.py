"""Filters, and the dense store of the scale-out path: a Qdrant server.

`Filter` says which chunks a search may return. The default read path evaluates it on the
in-memory read model (`ragcore.readmodel`). With a Qdrant server (`qdrant_url`), dense search
runs on the server instead: each generation is a collection holding every chunk's dense vector
and the fields filters use (doc_id, status, type, source, tags - each with a keyword payload
index), and the filter is pushed down (`qdrant_filter`). Everything else (the manifest, the
lexical channel, the text) stays in the generation's local segment.

`QdrantStore(location=":memory:")` runs the same code against qdrant-client's in-process
engine: that is how the tests exercise the server path without a server.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import urllib.parse
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.atomic import atomic_write
from ragcore.endpoint import holds_credential, shown_url
from ragcore.errors import IndexError_, ServerUnavailable

__all__ = ["Filter", "QdrantStore", "collection_for", "qdrant_filter"]

COLLECTION = "chunks"
NAME_FILE = "qdrant-collection"  # in a generation's folder: its collection's name
_NAMESPACE = uuid.UUID("6f1c1c59-2b0a-4b7e-9a55-7d1f3c3e5a10")
FILTER_FIELDS = ("doc_id", "status", "type", "source", "scope", "tags")


@dataclass(frozen=True)
class Filter:
    """Which chunks a search may return. Every given field must match (AND); within a list,
    any value matches (OR). `statuses` None means any status."""

    types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    statuses: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    scopes: tuple[str, ...] | None = None  # `global` or a project; a document without: global
    doc_ids: tuple[str, ...] | None = None
    exclude_ids: frozenset[str] | None = None  # documents never returned (a few, by id)

    def matches(self, payload: dict[str, Any]) -> bool:
        if self.types is not None and payload.get("type") not in self.types:
            return False
        if self.statuses is not None and payload.get("status", "active") not in self.statuses:
            return False
        if self.sources is not None and payload.get("source") not in self.sources:
            return False
        if self.scopes is not None and (payload.get("scope") or "global") not in self.scopes:
            return False
        if self.tags is not None and not set(payload.get("tags") or ()) & set(self.tags):
            return False
        if self.doc_ids is not None and payload.get("doc_id") not in self.doc_ids:
            return False
        if self.exclude_ids and payload.get("doc_id") in self.exclude_ids:
            return False
        return True

    def is_empty(self) -> bool:
        return not self.exclude_ids and all(
            v is None
            for v in (self.types, self.tags, self.statuses, self.sources, self.scopes, self.doc_ids)
        )


def point_uuid(chunk_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, chunk_id))


class QdrantStore:
    """The dense vectors of one generation in a Qdrant collection, searched with the filter
    pushed down. `url` is a server; `location=":memory:"` (or a path) is qdrant-client's
    in-process engine, which speaks the same API (for tests)."""

    def __init__(
        self,
        *,
        url: str | None = None,
        location: str | None = None,
        collection: str = COLLECTION,
        api_key: str | None = None,
    ):
        if url is not None:
            parts = urllib.parse.urlsplit(url)
            if holds_credential(parts):  # it would be written wherever the URL is: errors, logs
                raise IndexError_(
                    f"the Qdrant URL {shown_url(parts)} holds a user, a password, a query or "
                    "a fragment",
                    "give qdrant_url as the bare server URL; its API key goes in "
                    "MEMORY_AGENT_QDRANT_API_KEY, never in the URL",
                )
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:
            raise IndexError_(
                "the Qdrant server path needs qdrant-client, which is not installed",
                "pip install 'memory-agent[qdrant]', or unset qdrant_url",
            ) from exc
        if (url is None) == (location is None):
            raise ValueError("QdrantStore needs exactly one of url or location")
        self.collection = collection
        self.url = url
        self._lock = threading.RLock()
        if url is not None:
            self._client = QdrantClient(url=url, api_key=api_key)
        elif location == ":memory:":
            self._client = QdrantClient(location=":memory:")
        else:
            self._client = QdrantClient(path=location)

    @contextmanager
    def _asking(self):
        """A call to the server: what a server that is down or refuses says becomes a
        `ServerUnavailable` naming it (qdrant-client's own errors otherwise reach the caller as
        a bare traceback). The local engine's errors pass as they are."""
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        try:
            yield
        except UnexpectedResponse as exc:
            if self.url is None:
                raise
            refused = exc.status_code in (401, 403)
            raise ServerUnavailable(
                f"the Qdrant server at {self.url} answered {exc.status_code}"
                + (": it refused the API key" if refused else f" ({exc.reason_phrase})"),
                "set MEMORY_AGENT_QDRANT_API_KEY to the server's key"
                if refused
                else f"check the server at {self.url} (its log says why)",
            ) from None
        except ResponseHandlingException as exc:
            if self.url is None:
                raise
            raise ServerUnavailable(
                f"the Qdrant server at {self.url} could not be reached ({exc.source or exc})",
                f"start the server at {self.url}, or check qdrant_url",
            ) from None

    # -- lifecycle ------------------------------------------------------------------------
    @staticmethod
    def schema(dim: int) -> dict[str, Any]:
        """The collection as created on a server - the same design as the in-process path
        (ragcore.ann): an HNSW graph (m 16, ef_construct 128; payload_m 16 so a filtered
        search stays connected) over int8 scalar-quantised vectors kept in RAM, the float32
        originals on disk for the exact rescoring of the candidates; a keyword payload index
        per filter field (`FILTER_FIELDS`)."""
        from qdrant_client import models

        return {
            "vectors_config": {
                "dense": models.VectorParams(
                    size=dim, distance=models.Distance.COSINE, on_disk=True
                )
            },
            "hnsw_config": models.HnswConfigDiff(m=16, ef_construct=128, payload_m=16),
            "quantization_config": models.ScalarQuantization(
                scalar=models.ScalarQuantizationConfig(
                    type=models.ScalarType.INT8, quantile=0.99, always_ram=True
                )
            ),
        }

    @staticmethod
    def search_params():
        """A server search: ef 128 on the int8 graph, twice the candidates rescored exactly."""
        from qdrant_client import models

        return models.SearchParams(
            hnsw_ef=128,
            quantization=models.QuantizationSearchParams(rescore=True, oversampling=2.0),
        )

    def create(self, dim: int) -> None:
        """The collection (`schema`) and a keyword index per filter field."""
        from qdrant_client import models

        with self._lock, self._asking():
            if self._client.collection_exists(self.collection):
                return
            self._client.create_collection(self.collection, **self.schema(dim))
            if self.url is None:
                return  # qdrant-client's local engine ignores payload indexes (it scans)
            for name in FILTER_FIELDS:
                self._client.create_payload_index(
                    self.collection, name, field_schema=models.PayloadSchemaType.KEYWORD
                )

    def payload_indexes(self) -> set[str]:
        with self._lock, self._asking():
            info = self._client.get_collection(self.collection)
        return set(info.payload_schema or {})

    def drop(self) -> None:
        with self._lock, self._asking():
            if self._client.collection_exists(self.collection):
                self._client.delete_collection(self.collection)

    def exists(self) -> bool:
        with self._lock, self._asking():
            return self._client.collection_exists(self.collection)

    def close(self) -> None:
        with self._lock, self._asking():
            self._client.close()

    # -- writes ---------------------------------------------------------------------------
    def upsert(self, points: Sequence[tuple[str, np.ndarray, dict[str, Any]]]) -> None:
        """(chunk id, dense vector, filter fields) of each point."""
        from qdrant_client import models

        structs = [
            models.PointStruct(
                id=point_uuid(chunk_id),
                vector={"dense": np.asarray(dense, dtype=np.float32).tolist()},
                payload={"chunk_id": chunk_id, **{k: fields.get(k) for k in FILTER_FIELDS}},
            )
            for chunk_id, dense, fields in points
        ]
        with self._lock, self._asking():
            for start in range(0, len(structs), 256):
                self._client.upsert(self.collection, structs[start : start + 256], wait=True)

    def delete(self, chunk_ids: Sequence[str]) -> None:
        from qdrant_client import models

        if not chunk_ids:
            return
        with self._lock, self._asking():
            self._client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=[point_uuid(c) for c in chunk_ids]),
                wait=True,
            )

    # -- reads ----------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock, self._asking():
            return self._client.count(self.collection, exact=True).count

    def search(
        self, vector: np.ndarray, limit: int, flt: Filter | None = None
    ) -> list[tuple[str, float]]:
        if flt is not None and flt.doc_ids is not None and not flt.doc_ids:
            return []  # an empty allow-list matches nothing
        with self._lock, self._asking():
            result = self._client.query_points(
                self.collection,
                query=np.asarray(vector, dtype=np.float32).tolist(),
                using="dense",
                limit=limit,
                query_filter=qdrant_filter(flt),
                with_payload=["chunk_id"],
                # the local engine scans exactly and warns that search params do nothing
                search_params=self.search_params() if self.url else None,
            )
        return [(p.payload["chunk_id"], float(p.score)) for p in result.points]


def collection_for(root: Path, generation: str, *, new: bool = False) -> str:
    """The name of the collection of `generation` of the index at `root`. A new generation's
    name has a random part and is kept in its folder (`NAME_FILE`): two machines whose index
    folders have the same path (the same user name and layout) share a server but never a
    collection. A generation made before that has no such file and keeps the name it was made
    with (the folder path's hash)."""
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:8]
    kept = root / generation / NAME_FILE
    if new:
        name = f"memory-agent-{tag}-{secrets.token_hex(4)}-{generation}"
        atomic_write(kept, name + "\n")  # before the collection exists: a dead build's is named
        return name
    try:
        return kept.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return f"memory-agent-{tag}-{generation}"


def qdrant_filter(flt: Filter | None):
    """A `Filter` as Qdrant's filter: one `must` condition per given field, `MatchAny` over its
    values (a tag matches when the chunk has any of them)."""
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
    if flt.scopes is not None:  # a point without a scope (written before scopes) is global
        scoped = models.FieldCondition(key="scope", match=models.MatchAny(any=list(flt.scopes)))
        unscoped = models.IsEmptyCondition(is_empty=models.PayloadField(key="scope"))
        must.append(
            models.Filter(should=[scoped, unscoped] if "global" in flt.scopes else [scoped])
        )
    must_not = []
    if flt.exclude_ids:
        must_not.append(
            models.FieldCondition(key="doc_id", match=models.MatchAny(any=sorted(flt.exclude_ids)))
        )
    return models.Filter(must=must or None, must_not=must_not or None)
