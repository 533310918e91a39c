"""Fixtures for the memory_agent tests: real homes with real git repositories and indexes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_agent.index.memory import Memory
from memory_agent.write.gateway import Gateway
from ragcore import MiniLMEmbedder
from tests.memory_agent.helpers import make_memory


@pytest.fixture(scope="session")
def minilm_model(tmp_path_factory) -> MiniLMEmbedder:
    model = MiniLMEmbedder(onnx_dir=tmp_path_factory.mktemp("onnx"))
    model.load()
    return model


@pytest.fixture
def env_home(tmp_path, shared_cache, monkeypatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_HOME", str(home))
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.delenv("MEMORY_AGENT_REPOS", raising=False)
    return home


@pytest.fixture
def memory(env_home, minilm_model) -> Memory:
    """A fresh home with the demo knowledge base."""
    m = make_memory(env_home, minilm_model)
    m.init(demo=True, embedder="minilm")
    yield m
    m.close()


@pytest.fixture
def gateway(memory) -> Gateway:
    return Gateway(memory)


@pytest.fixture(scope="session")
def minilm_server(minilm_model):
    """A stand-in OpenAI-compatible embeddings server on 127.0.0.1 with real MiniLM vectors
    (`benchmarks/embedding_server.py`, on a thread of this process): the `openai` embedder's
    tests run the real daemon and proxy against it. It answers to `all-minilm` and to
    `minilm-2` (the same vectors under another name)."""
    from benchmarks.embedding_server import EmbeddingServer

    server = EmbeddingServer(minilm_model, model="all-minilm", aliases=("minilm-2",))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def minilm_endpoint(minilm_server):
    """`minilm_server` as each test starts it: no key asked, no failures queued, no requests."""
    server = minilm_server
    server.key, server.fail_next, server.delay, server.requests = None, [], 0.0, []
    yield server
    server.key = None
