"""Ready-to-paste MCP settings for the agents we know, pointing at this installation's proxy."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

__all__ = [
    "OPENCODE_PLUGIN",
    "READ_TOOLS",
    "WRITE_TOOLS",
    "claude_permissions",
    "client_configs",
    "hook_command",
    "hook_configs",
    "hook_settings",
    "proxy_command",
]

OPENCODE_PLUGIN = Path(__file__).parents[1] / "integrations" / "opencode" / "memory-agent.ts"


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
    launcher = Path(__file__).parents[1] / "hookrun.py"
    return [sys.executable, "-S", str(launcher), event, "--home", str(home), "--client", client]


READ_TOOLS = (
    "memory_search",
    "memory_get",
    "memory_history",
    "memory_index_status",
    "memory_proposals",
)
WRITE_TOOLS = (
    "memory_add",
    "memory_supersede",
    "memory_archive",
    "memory_resolve_fork",
    "memory_set_importance",
    "memory_accept",
    "memory_reject",
)
ALLOW_WRITES = (
    'To let the agent write too, add "mcp__memory" (every memory tool) to permissions.allow, '
    "or only the writes you want: " + ", ".join(f"mcp__memory__{t}" for t in WRITE_TOOLS) + "."
)


def claude_permissions() -> dict:
    """Claude Code's rule that lets the read-only memory tools run without asking (in `-p`
    mode a tool nobody allowed is denied)."""
    return {"allow": [f"mcp__memory__{t}" for t in READ_TOOLS]}


def hook_settings(home: Path, client: str) -> dict:
    """The hooks of `client` (claude-code or codex) as its settings file holds them; for Claude
    Code also the permission rule. Every hook is synchronous: a headless run (`claude -p`,
    `codex exec`) ends by killing hooks still running in the background, and Claude Code skips
    SessionEnd while a background Stop hook runs. A capture hook costs ~40 ms."""

    def entry(event: str, matcher: str | None = None, timeout: int = 5) -> list[dict]:
        command = shlex.join(hook_command(home, event, client))
        block: dict = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        if matcher is not None:
            block["matcher"] = matcher
        return [block]

    hooks = {
        "SessionStart": entry("session-start", "startup|resume|clear|compact"),
        "UserPromptSubmit": entry("prompt"),
        "PostToolUse": entry("tool", "*", 10),
    }
    if client == "claude-code":
        hooks["PostToolUseFailure"] = entry("tool-failure", "*", 10)
        hooks["PermissionDenied"] = entry("denied", "*", 10)
    hooks["Stop"] = entry("stop", None, 5)
    hooks["SessionEnd"] = entry("session-end", None, 2)
    if client == "claude-code":
        return {"permissions": claude_permissions(), "hooks": hooks}
    return {"hooks": hooks}


def opencode_plugin_text(home: Path) -> str:
    return (
        f"cp {OPENCODE_PLUGIN} ~/.config/opencode/plugins/\n"
        f"# it runs: MEMORY_AGENT_BIN={shlex.quote(proxy_command(home)[0])} "
        f"MEMORY_AGENT_HOME={shlex.quote(str(home))} (set them in its environment)"
    )


def hook_configs(home: Path) -> dict[str, str]:
    """Hook settings: capture every turn and inject recall before each prompt; for Claude Code
    with the permission rule for the read-only memory tools beside the hooks."""
    return {
        "Claude Code hooks (~/.claude/settings.json)": json.dumps(
            hook_settings(home, "claude-code"), indent=2
        ),
        "Codex hooks (~/.codex/hooks.json; trust them once in /hooks)": json.dumps(
            hook_settings(home, "codex"), indent=2
        ),
        "opencode plugin": opencode_plugin_text(home),
    }
