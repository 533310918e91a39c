"""The hook command as `memory-agent init` prints it, into a home's journal (`hook`), and what the
journal then holds for a session (`journal_of`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memory_agent.intake.journal import read_session, sessions
from memory_agent.serve.mcp_config import hook_command
from tests.memory_agent.mcp_helpers import env_for


def hook(home: Path, event: str, raw: bytes, **env: str) -> subprocess.CompletedProcess:
    """The hook exactly as `memory-agent init` prints it, with the default budget."""
    return subprocess.run(
        hook_command(home, event),
        input=raw,
        capture_output=True,
        env=env_for(home, home.parent / "cache", MEMORY_AGENT_INJECT="off", **env),
        timeout=60,
    )


def journal_of(home: Path, session: str) -> list[dict]:
    paths = sessions(home / "journal").get(session)
    assert paths, (
        (home / "run" / "hooks.log").read_text()
        if (home / "run" / "hooks.log").exists()
        else "no journal"
    )
    return list(read_session(paths))
