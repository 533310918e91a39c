"""The README's Quickstart main command, run as a user runs it (needs scripts/setup's .venv)."""

import os
import subprocess
from pathlib import Path

import pytest

from memory_agent.client import DaemonClient

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "memory-agent").exists(),
    reason="no .venv: scripts/setup has not been run in this checkout",
)
def test_scripts_demo_runs_the_whole_path(tmp_path, shared_cache):
    home = tmp_path / "demo-home"
    env = dict(
        os.environ,
        MEMORY_AGENT_HOME=str(home),
        MEMORY_AGENT_CACHE=str(shared_cache),
        MEMORY_AGENT_IDLE_EXIT="120",
    )
    try:
        for _ in range(2):  # safe to run again
            proc = subprocess.run(
                ["bash", str(ROOT / "scripts" / "demo")],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            out = proc.stdout
            assert "memory_search, memory_get, memory_add" in out
            assert "store-timestamps-as-utc" in out and "alembic-migration-conventions" in out
            assert '"status": "created"' in out  # the same request_id replays the first reply
            assert "lines, all JSON-RPC" in out
            assert "index gen-000001 (consistent): 80 entries" in out
    finally:
        DaemonClient(home).stop(wait=True)
