"""One published state of the live generation: everything a read needs, never changed.

A `Snapshot` holds a read model (`ragcore.readmodel`), the generation's segment (for chunk
text) and, on the scale-out path, its Qdrant collection; `Snapshot.open` reads a generation
into one and checks it. The index (`ragcore.index`) publishes a new one after every change by
one reference assignment; a reader takes one and answers from
it without a lock, so it sees every write whole or not at all (ADR 0011). One limit: chunk
text is read from the segment at answer time, so a snippet may already show the text of a
write that landed after the search took its snapshot.

The reads: the lookups the pack uses (`doc`, `docs`, `similar`, ...; `Index` has the same
ones), the consistency `check`, and for `ragcore.search` a small channel interface:
`channels(filter)` (the dense, lexical and sparse hits allowed by a filter), `doc_of`,
`chunk_payloads` and `dense_vectors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragcore.docinfo import DocInfo
from ragcore.documents import Document, chunk_document
from ragcore.embedding import Embedder
from ragcore.errors import IndexError_, IndexInconsistent
from ragcore.modelload import FILE as MODEL_FILE
from ragcore.modelload import load_model
from ragcore.readmodel import ReadModel
from ragcore.segment import FILE as SEGMENT_FILE
from ragcore.segment import SegmentFile
from ragcore.store import Filter, QdrantStore
from ragcore.tokenizer import Tokenizer

__all__ = ["REBUILD_HINT", "Channels", "Consistency", "Owner", "Snapshot"]

REBUILD_HINT = "rebuild the index: a fresh generation from the documents"


@dataclass
class Consistency:
    consistent: bool
    generation: str | None
    manifest_points: int
    points: int
    embedder: str | None
    problems: list[str] = field(default_factory=list)


class Owner(Protocol):
    """What a snapshot asks of the index that published it."""

    root: Path
    embedder: Embedder
    tokenizer: Tokenizer
    max_chars: int

    def current(self) -> str | None:
        """The generation CURRENT names now."""
        ...

    def serving(self) -> tuple[str | None, ...]:
        """The generations CURRENT may name while the index serves: the live one, and the one
        a switch is moving it to (None where there is none)."""
        ...


def _check_embedder(embedder: Embedder, meta: dict[str, Any], name: str) -> None:
    if meta.get("embedder") != embedder.model_id or meta.get("dim") != embedder.dim:
        raise IndexError_(
            f"generation {name} was built with embedder {meta.get('embedder')} "
            f"(dim {meta.get('dim')}), but the configured embedder is "
            f"{embedder.model_id} (dim {embedder.dim})",
            f"{REBUILD_HINT}, or switch the embedder back",
        )


class Channels:
    """The channels of one snapshot under one filter (its mask is computed once): what a search
    asks for. Each returns (chunk id, score) pairs, best first - from the read model as a
    `ragcore.hits.SlotHits` (arrays), from a Qdrant server as a list."""

    def __init__(self, snap: Snapshot, flt: Filter | None):
        self._model = snap.model
        self._server = snap.server
        self._flt = flt
        self._mask = snap.model.mask(flt)

    @property
    def has_sparse(self) -> bool:
        """The generation holds the model's learned sparse weights."""
        return self._model.has_sparse

    def dense(
        self, vector: np.ndarray, limit: int, also: Sequence = ()
    ) -> Sequence[tuple[str, float]]:
        """Cosine nearest chunks (on the Qdrant server, the filter pushed down, when there is
        one). `also`: chunks (ids, or another channel's hits) a graph search scores exactly
        beside its own candidates."""
        if self._server is not None:
            return self._server.search(vector, limit, self._flt)
        return self._model.dense_search(vector, limit, self._mask, also)

    def lexical(self, query_tf: dict[int, float], limit: int) -> Sequence[tuple[str, float]]:
        """BM25 over the query's term frequencies (`ragcore.tokenizer.term_frequencies`)."""
        return self._model.lexical_search(query_tf, limit, self._mask)

    def sparse(self, weights: dict[int, float], limit: int) -> list[tuple[str, float]]:
        """Dot product with the query's learned sparse weights."""
        return self._model.sparse_search(weights, limit, self._mask)


class Snapshot:
    """One published state of the live generation. It has the read interface of `Index`
    (ragcore.search takes either)."""

    def __init__(
        self,
        owner: Owner,
        model: ReadModel,
        segment: SegmentFile,
        server: QdrantStore | None,
        generation: str,
        embedder_id: str | None,
    ):
        self.owner = owner
        self.model = model
        self.segment = segment
        self.server = server
        self.generation = generation
        self.embedder_id = embedder_id
        self.embedder = owner.embedder
        self.tokenizer = owner.tokenizer
        self.max_chars = owner.max_chars
        self.origin = ""  # where `open` read the read model from (a log line)

    @classmethod
    def open(
        cls,
        owner: Owner,
        name: str,
        server: QdrantStore | None,
        *,
        with_dense: bool,
        save: bool = True,
        segment: SegmentFile | None = None,
    ) -> Snapshot:
        """Read generation `name` under `owner.root` (and `server`, its Qdrant collection on the
        scale-out path, which it then owns): its segment, then its read model (`save=False`:
        the saved arrays are read only, as a follower must - `ragcore.modelload`; `segment`:
        the generation's segment already open, which it then owns). Raises
        `IndexInconsistent` if the segment is unreadable or disagrees with itself or the server,
        `IndexError_` if it was built with another embedder."""
        try:
            segment = segment or SegmentFile(owner.root / name / SEGMENT_FILE)
            meta = segment.meta()
        except Exception as exc:  # missing, not SQLite, unreadable
            if server is not None:
                server.close()
            raise IndexInconsistent(
                f"generation {name} has no readable segment ({type(exc).__name__}: {exc})",
                REBUILD_HINT,
            ) from exc
        try:
            _check_embedder(owner.embedder, meta, name)
            listed, present = segment.counts()
            if listed != present:  # before the read model is loaded (or saved) for nothing
                raise IndexInconsistent(
                    f"index generation {name} is inconsistent: the segment holds {present} "
                    f"chunks but the manifest lists {listed}",
                    REBUILD_HINT,
                )
            model, origin = load_model(
                segment,
                owner.root / name / MODEL_FILE,
                int(meta["dim"]),
                with_dense,
                listed,
                save=save,
            )
            if server is not None and server.count() != model.chunks:
                raise IndexInconsistent(
                    f"index generation {name} is inconsistent: the Qdrant collection holds "
                    f"{server.count()} points but the manifest lists {model.chunks}",
                    REBUILD_HINT,
                )
        except BaseException:
            segment.close()
            if server is not None:
                server.close()
            raise
        snap = cls(owner, model, segment, server, name, meta.get("embedder"))
        snap.origin = origin
        return snap

    def with_model(self, model: ReadModel) -> Snapshot:
        snap = Snapshot(
            self.owner, model, self.segment, self.server, self.generation, self.embedder_id
        )
        snap.origin = self.origin
        return snap

    def snapshot(self) -> Snapshot:
        return self

    @property
    def revision(self) -> int:
        return self.model.revision

    def close(self) -> None:
        """Close the segment and the server connection (a snapshot no one will read again)."""
        self.segment.close()
        if self.server is not None:
            self.server.close()

    def check(self, raise_on_error: bool = False) -> Consistency:
        """CURRENT names this generation (or the one the index has moved to since), and the
        manifest lists exactly the chunks held. Cheap (in memory): it runs before every
        search."""
        model, problems = self.model, []
        current = self.owner.current()
        if current not in (self.generation, *self.owner.serving()):
            problems.append(
                f"CURRENT names {current or 'no generation'} but {self.generation} is open"
                + ("" if current and (self.owner.root / current).is_dir() else " (it is missing)")
            )
        listed = model.listed_chunks()
        if listed != model.chunks:
            problems.append(f"the manifest lists {listed} chunks but {model.chunks} are held")
        result = Consistency(
            not problems, self.generation, listed, model.chunks, self.embedder_id, problems
        )
        if raise_on_error and not result.consistent:
            raise IndexInconsistent(
                f"index generation {result.generation} is inconsistent: "
                f"{'; '.join(result.problems)}",
                REBUILD_HINT,
            )
        return result

    # -- lookups --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.model.docs)

    def doc(self, doc_id: str) -> DocInfo | None:
        return self.model.docs.get(doc_id)

    def docs(self) -> Iterator[DocInfo]:
        return self.model.iter_docs()

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """The ids that start with `prefix` (a scan of the id keys: no document is built)."""
        return [d for d in self.model.docs if d.startswith(prefix)]

    def entity_docs(self, entity: str) -> frozenset[str]:
        return frozenset(self.model.entity_docs(entity))

    def entity_count(self, entity: str) -> int:
        return self.model.entity_count(entity)

    def token_idf(self, token: str) -> float:
        return self.model.bm25.token_idf(token)

    def preview(self, doc_id: str) -> str:
        chunk_id = f"{doc_id}#0"
        if self.model.doc_of(chunk_id) is None:
            return ""
        return self.segment.texts([chunk_id]).get(chunk_id, ("", ""))[1]

    def similar(
        self,
        doc: Document,
        limit: int = 5,
        flt: Filter | None = None,
        exclude: Iterable[str] = (),
    ) -> list[tuple[str, float]]:
        chunk = chunk_document(doc, self.max_chars)[0]
        vector = self.embedder.embed_documents([chunk.text])[0].dense
        skip = set(exclude)
        out: dict[str, float] = {}
        for chunk_id, score in self.channels(flt).dense(vector, limit * 4 + len(skip)):
            doc_id = self.model.doc_of(chunk_id)
            if doc_id and doc_id not in skip and doc_id not in out:
                out[doc_id] = score
            if len(out) >= limit:
                break
        return list(out.items())

    # -- what ragcore.search reads --------------------------------------------------------
    def channels(self, flt: Filter | None) -> Channels:
        """The channels restricted to what `flt` allows."""
        return Channels(self, flt)

    def doc_of(self, chunk_id: str) -> str | None:
        """The document a chunk belongs to (None: not in this snapshot)."""
        return self.model.doc_of(chunk_id)

    def chunk_payloads(
        self, chunk_ids: Sequence[str], *, texts: bool = True
    ) -> dict[str, dict[str, Any]]:
        """The payload of each chunk: its document's payload plus n, heading and text
        (`texts=False`: heading and text empty, and the segment is not read)."""
        model = self.model
        texts = self.segment.texts(list(chunk_ids)) if texts else {}
        out = {}
        for cid in chunk_ids:
            doc_id = model.doc_of(cid)
            if doc_id is None:
                continue
            heading, text = texts.get(cid, ("", ""))
            n = int(cid.rsplit("#", 1)[1]) if "#" in cid else 0
            out[cid] = {**model.docs[doc_id].payload(), "n": n, "heading": heading, "text": text}
        return out

    def dense_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        if self.model.with_dense:
            return self.model.vectors(chunk_ids)
        return self.segment.dense(chunk_ids)
