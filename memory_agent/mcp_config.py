"""Ready-to-paste MCP settings for the agents we know, pointing at this installation's proxy."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

__all__ = ["OPENCODE_PLUGIN", "client_configs", "hook_command", "hook_configs", "proxy_command"]

OPENCODE_PLUGIN = Path(__file__).parent / "integrations" / "opencode" / "memory-agent.ts"


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


def hook_command(home: Path, event: str, client: str = "claude-code") -> list[str]:
    """The absolute command of one hook: this Python without `site` (memory_agent.hookrun:
    it starts ~18 ms sooner than the `memory-agent hook` console script, which does the same)."""
    launcher = Path(__file__).with_name("hookrun.py")
    return [sys.executable, "-S", str(launcher), event, "--home", str(home), "--client", client]


def hook_configs(home: Path) -> dict[str, str]:
    """Hook settings: capture every turn and inject recall before each prompt."""

    def command(event: str, client: str) -> str:
        return shlex.join(hook_command(home, event, client))

    def hooks(client: str, capture_async: bool) -> dict:
        def entry(event: str, matcher: str | None = None, timeout: int = 5, is_async=False):
            handler = {"type": "command", "command": command(event, client), "timeout": timeout}
            if is_async:
                handler["async"] = True
            block: dict = {"hooks": [handler]}
            if matcher is not None:
                block["matcher"] = matcher
            return [block]

        out = {
            "SessionStart": entry("session-start", "startup|resume|clear|compact"),
            "UserPromptSubmit": entry("prompt"),
            "PostToolUse": entry("tool", "*", 10, capture_async),
            "Stop": entry("stop", None, 5, capture_async),
        }
        if client == "claude-code":
            out["PostToolUseFailure"] = entry("tool-failure", "*", 10, capture_async)
            out["SessionEnd"] = entry("session-end", None, 2)
        return {"hooks": out}

    return {
        "Claude Code hooks (~/.claude/settings.json)": json.dumps(
            hooks("claude-code", True), indent=2
        ),
        "Codex hooks (~/.codex/hooks.json; trust them once in /hooks)": json.dumps(
            hooks("codex", False), indent=2
        ),
        "opencode plugin": (
            f"cp {OPENCODE_PLUGIN} ~/.config/opencode/plugins/\n"
            f"# it runs: MEMORY_AGENT_BIN={shlex.quote(proxy_command(home)[0])} "
            f"MEMORY_AGENT_HOME={shlex.quote(str(home))} (set them in its environment)"
        ),
    }
