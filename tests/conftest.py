"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The instant the suite takes as now (llm's user_dir() pattern: one autouse fixture gives every
# test the same input). `MEMORY_AGENT_CLOCK=2027-12-01T00:00:00Z pytest` runs the whole suite
# a year ahead instead; a test that assumes a date sets its own (monkeypatch.setenv or a Clock).
PINNED_CLOCK = "2026-12-01T09:00:00Z"
ROOT = str(Path(__file__).resolve().parents[1])
# The portable path (`scripts/check --portable`, run by CI): memory-agent's code cannot import
# fcntl, the daemon listens on 127.0.0.1 with a token, and files are watched with watchfiles,
# not inotify - what Windows and macOS get. Set here so every process a test starts has it too.
PORTABLE = os.environ.get("MEMORY_AGENT_PORTABLE") == "1"
if PORTABLE:
    BLOCK = Path(__file__).resolve().parent / "portable" / "block_fcntl.py"
    os.environ["MEMORY_AGENT_PORTABLE_BLOCK"] = str(BLOCK)  # every process: the venv's .pth
    os.environ.setdefault("MEMORY_AGENT_TRANSPORT", "tcp")
    os.environ.setdefault("MEMORY_AGENT_WATCHER", "watchfiles")
    exec(compile(BLOCK.read_text(encoding="utf-8"), str(BLOCK), "exec"), {"__name__": "block"})
    import site

    if not any(
        Path(d, "memory_agent_portable.pth").exists() for d in site.getsitepackages()
    ):  # without it, processes the tests start would not take the portable path
        raise SystemExit("the portable run needs memory_agent_portable.pth: run scripts/setup")


@pytest.fixture(scope="session", autouse=True)
def pinned_clock(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Every memory time - entry dates, usage events, recency, dormancy, gc - comes from the
    pinned clock, in this process and in every daemon, proxy and hook a test starts (they
    inherit the environment): no test reads the day it runs on."""
    value = os.environ.get("MEMORY_AGENT_CLOCK") or PINNED_CLOCK
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMORY_AGENT_CLOCK", value)
        # and every process a test starts (a daemon spawned with cwd=home) runs this checkout,
        # not whichever copy of the package the virtualenv has installed
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        # and from a folder outside any git repository: a CLI call or a proxy started from the
        # checkout would be in its project (memory_agent.intake.projects), not global
        mp.chdir(tmp_path_factory.mktemp("cwd"))
        yield value


@pytest.fixture(scope="session")
def tiny_bge_m3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BGE-M3-shaped model directory (built offline, once per session)."""
    for module in ("torch", "transformers", "FlagEmbedding"):
        pytest.importorskip(module, reason="BGE-M3 tests need the bge-m3 extra")
    from tests.fixtures.tiny_bge_m3 import build_tiny_bge_m3

    return build_tiny_bge_m3(tmp_path_factory.mktemp("tiny-bge-m3"))


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the session: the demo entries are embedded once."""
    return tmp_path_factory.mktemp("embedding-cache")
