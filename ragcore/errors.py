"""The errors ragcore raises. Each message says what went wrong and how to fix it.

RagcoreError
├── DocumentError        a file could not be loaded (not UTF-8, binary, too large, bad frontmatter)
├── EmbedderError        a model is missing, incomplete or unknown
└── IndexError_          the index is missing, inconsistent, or built with another embedder
    └── IndexInconsistent   manifest and store disagree: run `memory-agent rebuild`
"""

from __future__ import annotations

__all__ = ["DocumentError", "EmbedderError", "IndexError_", "IndexInconsistent", "RagcoreError"]


class RagcoreError(Exception):
    """Base class of every error ragcore raises on purpose."""


class DocumentError(RagcoreError):
    """A document could not be loaded; the message names the file and the reason."""


class EmbedderError(RagcoreError):
    """An embedding model is missing, incomplete or unknown; the message says how to get it."""


class IndexError_(RagcoreError):  # noqa: N801 - keep clear of the builtin IndexError
    """The index cannot serve: missing, built with another embedder, or damaged."""


class IndexInconsistent(IndexError_):
    """The manifest and the vector store disagree. Never answer from such an index."""
