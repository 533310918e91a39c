"""BGE-M3 on CPU through FlagEmbedding: a 1024-d dense vector plus sparse lexical weights.

`BGEM3Embedder` implements `ragcore.embedding.Embedder` with FlagEmbedding's `BGEM3FlagModel`
(fp32, `devices="cpu"`, dense vectors normalised to unit length, sparse weights as
{token id: weight} with zero weights dropped). It accepts a local model directory or a Hugging
Face name such as "BAAI/bge-m3"; a name is resolved with `huggingface_hub.snapshot_download`,
which downloads once and afterwards answers from the local cache.

Fail fast: before anything is loaded, the directory must hold config.json, the weights
(model.safetensors or pytorch_model.bin), a tokenizer, colbert_linear.pt and sparse_linear.pt.
FlagEmbedding does not complain when the two head files are missing: it logs at INFO level and
initialises both heads at random, so every sparse vector would be silently meaningless.

Nothing heavy happens at construction. A directory is checked at once (a few `stat` calls and
one read of config.json); a name is resolved when `model_id`, `dim` or the model is first needed.
torch and FlagEmbedding are imported by `load()` or the first embed call.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.embedding import Embedding, _set_query_threads
from ragcore.errors import EmbedderError

__all__ = ["BGEM3Embedder", "check_model_dir"]

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # transformers prefers safetensors
TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model")
HEAD_FILES = ("colbert_linear.pt", "sparse_linear.pt")
# What snapshot_download fetches: skips BAAI/bge-m3's onnx/ export and images (~2.3 GB).
_DOWNLOAD_PATTERNS = ["*.json", "*.model", "*.pt", *WEIGHT_FILES]
EXTRA_FIX = (
    "install the bge-m3 extra (torch 2.13.0's CPU build first) - in a clone of memory-agent: "
    "`scripts/setup --extras bge-m3`; installed with pipx: `pipx install --force '.[bge-m3]' "
    "--pip-args=--extra-index-url=https://download.pytorch.org/whl/cpu` in the clone - or use the "
    "offline minilm embedder"
)
_FIX = (
    "connect to the network once, or download the model and pass its local directory, or use "
    "the offline minilm embedder"
)


def check_model_dir(directory: Path) -> Path:
    """Raise `EmbedderError` naming every file BGE-M3 needs that `directory` lacks; return the
    weights file."""
    missing = [] if (directory / "config.json").is_file() else ["config.json"]
    weights = next((directory / n for n in WEIGHT_FILES if (directory / n).is_file()), None)
    if weights is None:
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if not any((directory / n).is_file() for n in TOKENIZER_FILES):
        missing.append("tokenizer (tokenizer.json or sentencepiece.bpe.model)")
    heads = [n for n in HEAD_FILES if not (directory / n).is_file()]
    if missing or heads or weights is None:
        why = " (without them FlagEmbedding would use random heads)" if heads else ""
        raise EmbedderError(
            f"incomplete BGE-M3 model at {directory}: missing {', '.join(missing + heads)}{why}. "
            "Download all files of BAAI/bge-m3 into that directory, or use the offline minilm embedder"
        )
    return weights


def _download(name: str) -> Path:
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise EmbedderError(f"could not get the weights of {name} ({exc})", EXTRA_FIX) from exc
    try:
        # local_files_only: huggingface_hub reads HF_HUB_OFFLINE only once, at import time
        path = snapshot_download(name, allow_patterns=_DOWNLOAD_PATTERNS, local_files_only=offline)
    except Exception as exc:
        why = (
            "not in the local cache, and HF_HUB_OFFLINE forbids a download"
            if offline
            else f"not in the local cache, and the download failed: {type(exc).__name__}"
        )
        raise EmbedderError(f"could not get the weights of {name} ({why})", _FIX) from exc
    return Path(path)


def _fingerprint(directory: Path, weights: Path) -> str:
    """sha256 of config.json plus name, size and mtime of the weight, head and tokenizer files:
    cheap, and equal in every process that reads the same directory."""
    digest = hashlib.sha256((directory / "config.json").read_bytes())
    for path in (weights, *(directory / n for n in (*HEAD_FILES, *TOKENIZER_FILES))):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


def _looks_like_path(name: str) -> bool:
    """Not a Hugging Face "org/name": absolute, relative to . or ~, or more than one level."""
    return Path(name).is_absolute() or name.startswith((".", "~")) or name.count("/") > 1


class BGEM3Embedder:
    """BGE-M3 dense + sparse embeddings on CPU; see the module docstring."""

    has_sparse = True

    def __init__(self, model: str | Path, *, max_length: int = 512, batch_size: int = 16):
        self.name = str(model)
        self.max_length = max_length
        self.batch_size = batch_size
        self._directory: Path | None = None
        self._model_id: str | None = None
        self._dim: int | None = None
        self._model: Any = None
        self._lock = threading.RLock()
        if Path(self.name).expanduser().is_dir() or _looks_like_path(self.name):
            self._resolve()

    def _resolve(self) -> Path:
        with self._lock:
            if self._directory is None:
                path = Path(self.name).expanduser()
                if path.is_dir():
                    directory, label = path.resolve(), path.resolve().name
                elif _looks_like_path(self.name) or path.exists():
                    raise EmbedderError(f"no BGE-M3 model directory at {path}: {_FIX}")
                else:
                    directory, label = _download(self.name), self.name
                weights = check_model_dir(directory)
                try:
                    config = json.loads((directory / "config.json").read_text())
                    self._dim = int(config["hidden_size"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise EmbedderError(f"unreadable config.json in {directory}: {exc!r}") from exc
                fingerprint = _fingerprint(directory, weights)
                self._model_id = f"bge-m3:{label}:{fingerprint}/max{self.max_length}"
                self._directory = directory
            return self._directory

    @property
    def model_id(self) -> str:
        if self._model_id is None:
            self._resolve()
        assert self._model_id is not None
        return self._model_id

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._resolve()
        assert self._dim is not None
        return self._dim

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        self._load()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if importlib.util.find_spec("FlagEmbedding") is None:  # before any weights
                    raise EmbedderError(
                        "BGE-M3 needs the bge-m3 extra (FlagEmbedding and torch), which is not "
                        "installed",
                        EXTRA_FIX,
                    )
                directory = self._resolve()  # the file check runs before FlagEmbedding is touched
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                try:
                    from FlagEmbedding import BGEM3FlagModel
                except ImportError as exc:
                    raise EmbedderError(
                        f"BGE-M3 needs FlagEmbedding and torch, which are not installed ({exc})",
                        EXTRA_FIX,
                    ) from exc
                try:
                    model = BGEM3FlagModel(
                        str(directory),
                        use_fp16=False,
                        devices="cpu",
                        normalize_embeddings=True,
                        batch_size=self.batch_size,
                        query_max_length=self.max_length,
                        passage_max_length=self.max_length,
                    )
                    # set the fast tokenizer's truncation state now, not under concurrent calls
                    model.tokenizer("warm up", truncation=True, max_length=self.max_length)
                    # FlagEmbedding pads pre-tokenized batches: silence transformers' advice on it
                    warned = getattr(model.tokenizer, "deprecation_warnings", {})
                    warned["Asking-to-pad-a-fast-tokenizer"] = True
                except Exception as exc:
                    raise EmbedderError(f"could not load BGE-M3 from {directory}: {exc}") from exc
                self._model = model
        return self._model

    def _encode(self, texts: list[str], *, query: bool) -> list[Embedding]:
        model = self._load()
        encode = model.encode_queries if query else model.encode_corpus
        out = encode(
            texts,
            batch_size=self.batch_size,
            max_length=self.max_length,
            return_dense=True,
            return_sparse=True,
            return_colbert_vecs=False,
        )
        dense = np.asarray(out["dense_vecs"], dtype=np.float32).reshape(len(texts), -1)
        return [
            Embedding(dense=vector, sparse={int(k): float(w) for k, w in weights.items() if w > 0})
            for vector, weights in zip(dense, out["lexical_weights"], strict=True)
        ]

    def embed_documents(self, texts: Sequence[str]) -> list[Embedding]:
        if not texts:
            return []
        return self._encode(list(texts), query=False)

    def embed_query(self, text: str) -> Embedding:
        _set_query_threads()
        return self._encode([text], query=True)[0]


def make(model_path: str | None = None, runtime: str = "auto", work_dir=None) -> BGEM3Embedder:
    """The `bge-m3` entry of ragcore's embedder registry (`runtime`, `work_dir`: unused)."""
    return BGEM3Embedder(model_path or "BAAI/bge-m3")
