"""Fixtures for the memory_agent tests: real homes with real git repositories and indexes -
the ones every folder uses, and the ones tests in several folders share (each says which)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.write.gateway import Gateway
from ragcore import MiniLMEmbedder
from tests.memory_agent.demo_daemon import _cleanup
from tests.memory_agent.helpers import make_memory
from tests.memory_agent.mcp_helpers import ROOT, daemon_pids
from tests.memory_agent.person_git import PersonGit
from tests.memory_agent.two_homes import Home


@pytest.fixture(scope="session")
def minilm_model(tmp_path_factory) -> MiniLMEmbedder:
    # queries on the int8 graph, as the product's default `query_precision` runs them (ADR 0027)
    model = MiniLMEmbedder(onnx_dir=tmp_path_factory.mktemp("onnx"), query_precision="int8")
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


# A demo home, its daemon stopped after the test (issue 9's failure modes): for test_client.py,
# test_limits.py and serve/test_daemon_failures.py. A test module with a `home` fixture of its own
# overrides this one.
@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    yield home
    _cleanup(home)


# Demo homes with settings of their own, each served by its daemon: for
# capture/test_gate_safety.py and recall/test_injection.py.
@pytest.fixture
def make_home(tmp_path, shared_cache, monkeypatch):
    """A demo home with `settings` in its config.toml and its daemon running (model loaded)."""
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the daemon runs this checkout's code
    homes = []

    def make(settings: str = "", demo: bool = True) -> Path:
        home = tmp_path / f"home{len(homes)}"
        Memory(config.load({"home": str(home)})).init(demo=demo, embedder="minilm", sync=False)
        (home / "config.toml").write_text(f'embedder = "minilm"\n{settings}')
        homes.append(home)
        client = DaemonClient(home)
        client.ensure()
        client.admin("refresh")
        return home

    yield make
    for home in homes:
        DaemonClient(home).stop(wait=True)
        for pid in daemon_pids(home):
            os.kill(pid, signal.SIGKILL)


# A home for the hook command to journal into, no daemon: for intake/test_journal.py and
# serve/test_scrub.py.
@pytest.fixture
def capture_home(tmp_path):
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    return home


# Two homes (a laptop and a desktop) and an empty bare remote: for index/test_kb_commit.py and the
# sync tests.
@pytest.fixture
def pair(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = Home(tmp_path / "laptop", shared_cache, "laptop")
    b = Home(tmp_path / "desktop", shared_cache, "desktop")
    yield a, b, remote
    a.stop()
    b.stop()


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


# git as a person has it (signing on, signatures in every log, insteadOf aliases, an ssh command
# of their own): written once a session; the sync and kb tests run under it (their conftest).
@pytest.fixture(scope="session")
def person_git_config(tmp_path_factory):
    person = PersonGit.make(tmp_path_factory.mktemp("person-git"))
    yield person
    person.stop()


@pytest.fixture
def person_git(person_git_config, monkeypatch) -> PersonGit:
    return person_git_config.use(monkeypatch)
