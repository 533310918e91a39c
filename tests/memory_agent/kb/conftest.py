"""Fixtures shared by the kb tests: a demo home on a pinned clock whose daemon runs this tree's
code, stopped after the test (`home`); every kb test runs under git as a person has it
configured - commits signed, signatures in every `git log`, insteadOf aliases, an ssh command
of their own (`tests/memory_agent/person_git.py`)."""

from __future__ import annotations

import pytest

from memory_agent import config
from memory_agent.index.memory import Memory
from tests.memory_agent.kb.git_by_hand import CLOCK, _stop
from tests.memory_agent.mcp_helpers import ROOT


@pytest.fixture(autouse=True)
def _person_git(person_git):
    return person_git


# For test_git_state.py, test_git_locks.py and test_hand_written_files.py (test_scopes.py makes
# homes of its own, `world`).
@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", CLOCK)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the daemon runs this tree's code
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    yield home
    _stop(home)
