"""The errors ragcore raises. Each carries a stable `code`, a message that says what went wrong
and, where there is one, a `fix`.

RagcoreError                      code (the base: invalid, a bad input file)
├── DocumentError                 document  a file could not be loaded (binary, too large, ...)
├── EmbedderError                 model     a model is missing, incomplete or unknown
│   ├── EndpointError             model     an embedding server did not answer, or not as asked
│   ├── WeightsUnavailable        model     MiniLM's weights are not here and could not be
│   │                                        fetched (offline, HF_HUB_OFFLINE, a refusal)
│   └── WeightsCorrupt            model     a file fetched or imported is not the pinned one
└── IndexError_                   index     the index is missing, or built with another embedder
    ├── IndexInconsistent         index     manifest and store disagree: rebuild
    └── ServerUnavailable         index     the Qdrant server did not answer, or refused
"""

from __future__ import annotations

__all__ = [
    "DocumentError",
    "EmbedderError",
    "EndpointError",
    "IndexError_",
    "IndexInconsistent",
    "RagcoreError",
    "ServerUnavailable",
    "WeightsCorrupt",
    "WeightsUnavailable",
]


class RagcoreError(Exception):
    """Base class of every error ragcore raises on purpose."""

    code = "invalid"  # raised as such only for bad input files (a bench folder)
    default_fix = ""

    def __init__(self, message: str = "", fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix if fix is not None else self.default_fix


class DocumentError(RagcoreError):
    """A document could not be loaded; the message names the file and the reason."""

    code = "document"


class EmbedderError(RagcoreError):
    """An embedding model is missing, incomplete or unknown; the message says how to get it."""

    code = "model"


class EndpointError(EmbedderError):
    """An embedding server (`ragcore.endpoint`) did not answer, or not as asked. `kind` says
    which: `unreachable` (no connection, a timeout, 429 or 5xx after the retries), `auth` (401,
    403), `not_found` (404: no such path or model), `refused` (another 4xx), `reply` (an answer
    that is not embeddings of the asked shape), `dimension` (the vectors' length changed).
    `transient`: it may pass by itself (the server is starting, busy or restarting). `url` is
    the endpoint asked (it never holds a credential: `ragcore.endpoint` refuses those)."""

    def __init__(self, message: str, fix: str, *, kind: str, url: str):
        super().__init__(message, fix)
        self.kind = kind
        self.url = url
        self.transient = kind == "unreachable"


class WeightsUnavailable(EmbedderError):
    """MiniLM's weights are not on this machine and could not be fetched: the hub unreachable
    (or `HF_HUB_OFFLINE` set), a refusal, a download that kept breaking off, a folder or
    archive without them. The message says which."""


class WeightsCorrupt(EmbedderError):
    """A file fetched for MiniLM is not the file of the pinned revision (its sha256 differs):
    deleted, never used."""


class IndexError_(RagcoreError):  # noqa: N801 - keep clear of the builtin IndexError
    """The index cannot serve: missing, built with another embedder, or damaged."""

    code = "index"


class IndexInconsistent(IndexError_):
    """The manifest and the vector store disagree. Never answer from such an index."""


class ServerUnavailable(IndexError_):
    """The Qdrant server of the scale-out path (`qdrant_url`) could not be reached, or refused
    (a wrong API key, an error status). The message names the server and what it said."""
