"""ragcore: the reusable retrieval core of memory-agent.

Markdown documents -> chunks -> embeddings (dense, plus lexical BM25 and the model's sparse
weights) -> a generation-directory index -> hybrid search with fusion, MMR and explain ->
evaluation on benchmark folders. It imports nothing from memory_agent, legal_web, mcp or any
web library (a test enforces it). This module is the public surface: what is not listed in
`__all__` is private, and `memory_agent` and `legal_web` import only these names (a test
checks it).
"""

from ragcore.atomic import atomic_write, temp_files
from ragcore.bge_m3 import EXTRA_FIX as BGE_M3_EXTRA_FIX
from ragcore.docinfo import DocInfo
from ragcore.documents import (
    DEFAULT_EXCLUDES,
    Document,
    PathRule,
    chunk_document,
    load_markdown,
    normalize_text,
    scan_markdown,
    wikilinks,
)
from ragcore.embedding import (
    CachedEmbedder,
    Embedder,
    Embedding,
    EmbeddingCache,
    MiniLMEmbedder,
    make_embedder,
    query_graph,
)
from ragcore.entities import extract_entities
from ragcore.errors import (
    DocumentError,
    EmbedderError,
    EndpointError,
    IndexError_,
    IndexInconsistent,
    RagcoreError,
    WeightsCorrupt,
    WeightsUnavailable,
)
from ragcore.evaluate import EvalReport, evaluate, metrics, metrics_by
from ragcore.follow import Follower
from ragcore.front_matter import FrontMatterRefused, load_yaml, parse_front_matter
from ragcore.fusion import FusionConfig, query_language
from ragcore.index import BuildReport, Index, RefreshReport, live_generation
from ragcore.minilm_weights import MiniLMWeights, StreamProgress
from ragcore.search import Hit, SearchConfig, SearchResult, search, snippets_of
from ragcore.snapshot import Consistency
from ragcore.store import Filter
from ragcore.tokenizer import Tokenizer

__all__ = [
    "BGE_M3_EXTRA_FIX",
    "DEFAULT_EXCLUDES",
    "BuildReport",
    "CachedEmbedder",
    "Consistency",
    "DocInfo",
    "Document",
    "DocumentError",
    "Embedder",
    "EmbedderError",
    "Embedding",
    "EmbeddingCache",
    "EndpointError",
    "EvalReport",
    "Filter",
    "Follower",
    "FrontMatterRefused",
    "FusionConfig",
    "Hit",
    "Index",
    "IndexError_",
    "IndexInconsistent",
    "MiniLMEmbedder",
    "MiniLMWeights",
    "PathRule",
    "RagcoreError",
    "RefreshReport",
    "SearchConfig",
    "SearchResult",
    "StreamProgress",
    "Tokenizer",
    "WeightsCorrupt",
    "WeightsUnavailable",
    "chunk_document",
    "evaluate",
    "extract_entities",
    "load_markdown",
    "load_yaml",
    "make_embedder",
    "metrics",
    "metrics_by",
    "normalize_text",
    "parse_front_matter",
    "query_graph",
    "query_language",
    "scan_markdown",
    "search",
    "snippets_of",
    "atomic_write",
    "live_generation",
    "temp_files",
    "wikilinks",
]
