"""Documents into index rows: what a build and an incremental change both write.

For each document, its manifest entry (`DocInfo`: title, source, links, metadata as JSON
values, content hash, stamp, the entities it names); for each of its chunks, a `ChunkRow` with
the dense vector and learned sparse weights from the embedder (through its cache) and the term
frequencies from the tokenizer. Chunks are embedded in batches of about `batch_size`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ragcore.docinfo import DocInfo
from ragcore.documents import Chunk, Document, chunk_document
from ragcore.embedding import Embedder
from ragcore.entities import extract_entities
from ragcore.segment import ChunkRow, DocRow
from ragcore.tokenizer import Tokenizer, term_frequencies

__all__ = ["Progress", "RowBuilder", "doc_rows", "json_meta", "server_points"]

Progress = Callable[[str, int, int], None]
_SCALARS = (str, int, float, bool)


def _json_meta_values(value: Any) -> Any:
    if isinstance(value, _SCALARS) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _json_meta_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_meta_values(v) for v in value]
    return str(value)


def json_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The document's metadata as JSON values (dates become text)."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if value is None:
            continue
        if isinstance(value, _SCALARS):
            out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [v if isinstance(v, _SCALARS) else str(v) for v in value]
        elif isinstance(value, dict):  # e.g. typed links: {kind: [ids]}
            out[key] = _json_meta_values(value)
        else:
            out[key] = str(value)
    if isinstance(out.get("tags"), str):
        out["tags"] = [out["tags"]]
    out.setdefault("status", "active")
    out.setdefault("type", "note")
    return out


class RowBuilder:
    """Chunks, embeds and tokenizes documents. `writable` says whether a document may be
    changed through the pack (it is recorded in its manifest entry)."""

    def __init__(
        self,
        embedder: Embedder,
        tokenizer: Tokenizer,
        max_chars: int,
        batch_size: int,
        writable: Callable[[Document], bool],
    ):
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.max_chars = max_chars
        self.batch_size = batch_size
        self.writable = writable

    def info(self, doc: Document, chunks: int) -> DocInfo:
        return DocInfo(
            doc.id,
            doc.title,
            doc.source,
            doc.path,
            self.writable(doc),
            doc.links,
            json_meta(doc.meta),
            doc.content_hash,
            chunks,
            doc.stamp,
            tuple(extract_entities(f"{doc.title}\n{doc.body}")),
        )

    def rows(
        self, docs: Sequence[Document], progress: Progress | None = None
    ) -> Iterator[tuple[list[DocInfo], list[ChunkRow]]]:
        """(manifest entries, chunk rows) in batches of about `batch_size` chunks."""
        infos: list[DocInfo] = []
        pending: list[tuple[str, Chunk]] = []

        def flush() -> tuple[list[DocInfo], list[ChunkRow]]:
            embeddings = self.embedder.embed_documents([c.text for _, c in pending])
            rows = []
            for (doc_id, chunk), emb in zip(pending, embeddings, strict=True):
                tf = term_frequencies(self.tokenizer(chunk.text))
                rows.append(
                    ChunkRow(
                        chunk.id,
                        doc_id,
                        chunk.n,
                        chunk.heading,
                        chunk.body,
                        np.asarray(emb.dense, dtype=np.float32),
                        np.fromiter(tf.keys(), dtype=np.int64, count=len(tf)),
                        np.fromiter(tf.values(), dtype=np.float32, count=len(tf)),
                        emb.sparse,
                    )
                )
            out = (list(infos), rows)
            infos.clear()
            pending.clear()
            return out

        done = 0
        for doc in docs:
            chunks = chunk_document(doc, self.max_chars)
            infos.append(self.info(doc, len(chunks)))
            pending.extend((doc.id, c) for c in chunks)
            done += 1
            if len(pending) >= self.batch_size:
                yield flush()
                if progress:
                    progress("embed", done, len(docs))
        if infos:
            yield flush()
        if progress:
            progress("embed", done, len(docs))


def doc_rows(infos: Iterable[DocInfo]) -> list[DocRow]:
    """The segment's manifest rows of these documents."""
    return [DocRow(i.id, i.hash, i.chunks, i.source, i.stamp, i.as_info()) for i in infos]


def server_points(
    infos: Sequence[DocInfo], rows: Sequence[ChunkRow]
) -> list[tuple[str, np.ndarray, dict[str, Any]]]:
    """The Qdrant points of these chunks: the dense vector and the fields filters use."""
    by_id = {i.id: i for i in infos}
    return [
        (
            r.chunk_id,
            r.dense,
            {
                "doc_id": r.doc_id,
                "status": by_id[r.doc_id].status,
                "type": by_id[r.doc_id].type,
                "source": by_id[r.doc_id].source,
                "scope": by_id[r.doc_id].scope,
                "tags": by_id[r.doc_id].tags,
            },
        )
        for r in rows
    ]
