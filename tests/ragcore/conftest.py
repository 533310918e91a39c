"""Fixtures for the ragcore tests: the real offline MiniLM model, loaded once."""

from __future__ import annotations

import pytest

from ragcore import CachedEmbedder, Document, EmbeddingCache, MiniLMEmbedder


@pytest.fixture(scope="session")
def minilm(tmp_path_factory) -> MiniLMEmbedder:
    """MiniLM as the default install runs it: ONNX Runtime, the graph built from the weights."""
    model = MiniLMEmbedder(onnx_dir=tmp_path_factory.mktemp("onnx"))
    model.load()
    return model


@pytest.fixture(scope="session")
def minilm_torch() -> MiniLMEmbedder:
    """MiniLM through sentence-transformers and torch (the bge-m3 extra installs them)."""
    pytest.importorskip("sentence_transformers", reason="the torch runtime needs the bge-m3 extra")
    model = MiniLMEmbedder(runtime="torch")
    model.load()
    return model


@pytest.fixture
def cached_minilm(minilm, tmp_path) -> CachedEmbedder:
    return CachedEmbedder(minilm, EmbeddingCache(tmp_path / "cache"))


NOTES = [
    (
        "pytest-fixtures",
        "Use tmp_path for test files",
        "Tests write real files under pytest's tmp_path fixture; never under the repository.",
    ),
    (
        "git-add-all",
        "Never commit with git add -A",
        "Commit only the touched paths. `git add -A` sweeps other sessions' dirty files into the commit.",
    ),
    (
        "qdrant-lock",
        "Qdrant local mode holds an exclusive lock",
        "One process per storage path: the client takes a file lock when it is constructed and "
        "releases it on close().",
    ),
    (
        "torch-threads",
        "One torch thread on the query path",
        "On a two-core machine two torch threads make queries about ten times slower under load.",
    ),
    (
        "jieba-names",
        "结巴分词对人名的切分不稳定",
        "同一个人名在问题和原文中可能被切成不同的词，所以中文检索同时使用字符二元组。",
    ),
    (
        "stdout-protocol",
        "stdout is the protocol channel of a stdio MCP server",
        "A single print() or a library logger writing to stdout corrupts JSON-RPC. Log to stderr.",
    ),
]


@pytest.fixture
def notes() -> list[Document]:
    return [
        Document(id=i, title=t, body=b, meta={"type": "pitfall", "tags": ["demo"]}, source="kb")
        for i, t, b in NOTES
    ]
