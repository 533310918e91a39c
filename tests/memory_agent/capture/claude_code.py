"""Claude Code's hook events through the real hook command: one call exactly as `memory-agent init`
prints it (`hook`), and the payload Claude Code sends (`base`)."""

import json
import subprocess

from memory_agent.serve.mcp_config import hook_command
from tests.memory_agent.mcp_helpers import env_for


def hook(home, cache, event, payload, **env):
    """The hook exactly as `memory-agent init` prints it (python -S memory_agent/hookrun.py)."""
    proc = subprocess.run(
        hook_command(home, event),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env_for(home, cache, **env),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def base(session, event, **fields):
    return {
        "session_id": session,
        "transcript_path": f"/home/u/.claude/projects/p/{session}.jsonl",
        "cwd": "/home/u/src/kestrel",
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }
