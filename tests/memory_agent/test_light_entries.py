"""The proxy and the hook command load the standard library and this package, nothing else: an
allow-list (`sys.stdlib_module_names`), checked on what the real processes import while they
work (`python -X importtime` names every module a process imports)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from memory_agent.serve.mcp_config import hook_command
from tests.memory_agent.mcp_helpers import daemon_pids, env_for

ALLOWED = set(sys.stdlib_module_names) | {"memory_agent", "__main__"}


def imported(stderr: str) -> set[str]:
    """Top-level names of the modules `-X importtime` reported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.add(name.split(".")[0])
    return names


def test_the_hook_command_imports_only_the_standard_library(tmp_path, shared_cache):
    from memory_agent import config
    from memory_agent.index.memory import Memory

    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    env = env_for(home, shared_cache)
    session = {"session_id": "s1", "cwd": str(tmp_path), "transcript_path": ""}
    payloads = {
        "session-start": {"source": "startup"},
        "prompt": {"prompt": "why is the build slow"},
        "tool": {
            "tool_name": "Bash",
            "tool_input": {"command": "make"},
            "tool_response": {"stdout": "ok", "exit_code": 0},
        },
        "tool-failure": {"tool_name": "Bash", "tool_input": {"command": "make"}, "error": "x"},
        "stop": {"last_assistant_message": "done"},
        "session-end": {"reason": "exit"},
    }
    seen: dict[str, set[str]] = {}
    try:
        for event, payload in payloads.items():
            cmd = hook_command(home, event)
            proc = subprocess.run(
                [cmd[0], "-X", "importtime", *cmd[1:]],
                input=json.dumps({**session, **payload}),
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
            seen[event] = imported(proc.stderr)
            assert "memory_agent" in seen[event], event  # the report is real
    finally:
        for pid in daemon_pids(home):  # the prompt hook starts the daemon in the background
            os.kill(pid, signal.SIGKILL)
    outside = {event: sorted(names - ALLOWED) for event, names in seen.items()}
    assert outside == {event: [] for event in payloads}


def test_the_proxy_imports_only_the_standard_library(tmp_path, shared_cache):
    home = tmp_path / "not-initialised"  # the proxy answers these itself: no daemon
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "x"}},
        },
    ]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memory_agent", "proxy", "--home", str(home)],
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        env=env_for(home, shared_cache),
        timeout=60,
    )
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    by_id = {r.get("id"): r for r in replies}  # JSON-RPC replies may come in any order
    assert sorted(by_id) == [1, 2, 3], proc.stderr[-2000:]
    assert "not_ready" in json.dumps(by_id[3])
    names = imported(proc.stderr)
    assert "memory_agent" in names
    # what any interpreter of this venv loads before the first line runs (site's .pth files)
    empty = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True
    )
    assert sorted(names - imported(empty.stderr) - ALLOWED) == []
