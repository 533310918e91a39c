"""Issue 17, the opencode plugin: `connect opencode` fills in the fast hook command, and a
capture hook over its budget says it journaled nothing. (The plugin's behaviour with the real
opencode 1.18.33 - the injection in the agent's requests, a failing command's exit code, the
answer, the end - is tested end to end in tests/e2e/test_agents.py.)"""

from __future__ import annotations

import json
import subprocess

from memory_agent.serve import mcp_config
from tests.memory_agent.mcp_helpers import env_for


def test_a_capture_hook_over_its_budget_says_not_journaled(tmp_path, shared_cache):
    home = tmp_path / "home"
    for d in ("run", "kb/.git", "journal"):  # enough of a home for the hook to journal into
        (home / d).mkdir(parents=True)
    (home / "config.toml").write_text("hook_budget_ms = 1\n")
    env = env_for(home, shared_cache)
    env.pop("MEMORY_AGENT_HOOK_BUDGET_MS", None)
    payload = {
        "session_id": "s",
        "tool_name": "bash",
        "tool_input": {"command": "ls"},
        "tool_response": {"output": "ab1 " * 2_000_000, "exit_code": 0},
    }
    cmd = mcp_config.hook_command(home, "tool", "opencode")
    proc = subprocess.run(
        cmd, input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    log = (home / "run" / "hooks.log").read_text()
    assert "tool: over the 1 ms budget; not journaled" in log, log
    assert "nothing injected" not in log
    assert not list((home / "journal").iterdir())  # indeed not journaled: an 8 MB tool output
