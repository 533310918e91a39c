"""The README's Quickstart main command, run as a user runs it (needs scripts/setup's .venv)."""

import os
import re
import subprocess
import sys
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


def _section_block(heading: str) -> str:
    """The first ```bash block under `heading` in the README, as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0]


@pytest.mark.slow
@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "memory-agent").exists(),
    reason="no .venv: scripts/setup has not been run in this checkout",
)
def test_the_first_day_path_after_the_quickstart_runs_as_written(tmp_path, shared_cache):
    """'Your own memory', line by line as a person pastes it, from the clone, in a fresh $HOME:
    the home in ~/.memory-agent, Claude Code's settings written, the entry added and found.
    (MEMORY_AGENT_EMBEDDER=minilm: the default install's model - CI also installs the bge-m3
    extra, whose default would download BGE-M3.)"""
    block = _section_block("## Your own memory")
    assert "memory-agent init" in block and "memory-agent connect" in block
    home = tmp_path / "person"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORY_AGENT_", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG"))
    }
    env.update(
        HOME=str(home),
        MEMORY_AGENT_CACHE=str(shared_cache),
        MEMORY_AGENT_EMBEDDER="minilm",
        MEMORY_AGENT_IDLE_EXIT="120",
    )
    try:
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "run-the-tests-with-make-test" in proc.stdout.split("how do I run")[-1]
        kb = home / ".memory-agent" / "kb"
        assert (kb / "process" / "run-the-tests-with-make-test.md").is_file()
        log = subprocess.run(
            ["git", "-C", str(kb), "log", "--format=%s"], capture_output=True, text=True
        ).stdout
        assert "memory: add run-the-tests-with-make-test" in log
        settings = (home / ".claude" / "settings.json").read_text()
        assert "memory-agent" in settings and "mcp__memory__memory_search" in settings
    finally:
        DaemonClient(home / ".memory-agent").stop(wait=True)


def test_the_readme_gives_the_suites_test_count():
    """The README's count of tests is the suite's (collected, not typed by hand)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    counted = re.search(r"(\d+) tests? collected", proc.stdout)
    assert counted, proc.stdout[-2000:] + proc.stderr[-2000:]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = re.search(r"The suite is ([\d,]+) tests", readme)
    assert said, "the README no longer says how many tests the suite has"
    assert int(said.group(1).replace(",", "")) == int(counted.group(1)), (
        f"the README says {said.group(1)} tests, the suite collects {counted.group(1)}: "
        "update the README's Quickstart"
    )
