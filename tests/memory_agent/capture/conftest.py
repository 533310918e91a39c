"""Fixtures shared by the capture tests: a demo home whose daemon runs with the model loaded, so
hooks inject from the first prompt (`home`)."""

import os
import signal

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from tests.memory_agent.mcp_helpers import ROOT, daemon_pids


# For test_hooks.py and test_gate.py (test_agent_payloads.py has a `home` of its own, with no
# daemon).
@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the daemon runs this checkout's code
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")  # the model is loaded: hooks inject from the first prompt
    yield home
    client.stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)
