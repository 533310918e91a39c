"""Turns of an agent through the real hook command (as `memory-agent init` prints it) against a real
daemon: one hook call (`hook`), the context it injected (`context_of`), Claude Code's payload
(`base`), one turn with its tool calls (`turn`)."""

import json
import subprocess

from memory_agent.serve.mcp_config import hook_command
from tests.memory_agent.mcp_helpers import env_for


def hook(home, cache, event, payload, **env):
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


def context_of(stdout):
    if not stdout.strip():
        return ""
    return json.loads(stdout)["hookSpecificOutput"]["additionalContext"]


def base(session, event, **fields):
    return {"session_id": session, "cwd": "/home/u/src/kestrel", "hook_event_name": event, **fields}


def turn(home, cache, session, prompt, *, answer="", tools=()):
    """One turn through the real hooks: the prompt, each (tool, input, error or response), the
    Stop. Returns the context injected before the prompt."""
    out = context_of(hook(home, cache, "prompt", base(session, "UserPromptSubmit", prompt=prompt)))
    for tool, tool_input, error in tools:
        if error is not None:
            hook(
                home,
                cache,
                "tool-failure",
                base(
                    session,
                    "PostToolUseFailure",
                    tool_name=tool,
                    tool_input=tool_input,
                    error=error,
                ),
            )
        else:
            hook(
                home,
                cache,
                "tool",
                base(
                    session,
                    "PostToolUse",
                    tool_name=tool,
                    tool_input=tool_input,
                    tool_response={"stdout": "ok"},
                ),
            )
    hook(home, cache, "stop", base(session, "Stop", last_assistant_message=answer))
    return out
