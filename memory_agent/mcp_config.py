"""Ready-to-paste MCP settings for the agents we know, pointing at this installation's proxy."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

__all__ = ["client_configs", "proxy_command"]


def proxy_command(home: Path) -> list[str]:
    """The absolute command that starts the proxy for `home`."""
    script = Path(sys.executable).parent / "memory-agent"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "memory_agent"]
    return [*base, "proxy", "--home", str(home)]


def client_configs(home: Path) -> dict[str, str]:
    cmd = proxy_command(home)
    server = {"command": cmd[0], "args": cmd[1:]}
    codex_args = ", ".join(json.dumps(a) for a in cmd[1:])
    return {
        "Claude Code (shell)": f"claude mcp add --scope user memory -- {shlex.join(cmd)}",
        "opencode (opencode.json)": json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "mcp": {"memory": {"type": "local", "command": cmd, "enabled": True}},
            },
            indent=2,
        ),
        "Codex (~/.codex/config.toml)": (
            f"[mcp_servers.memory]\ncommand = {json.dumps(cmd[0])}\nargs = [{codex_args}]"
        ),
        "Cursor (~/.cursor/mcp.json)": json.dumps({"mcpServers": {"memory": server}}, indent=2),
    }
