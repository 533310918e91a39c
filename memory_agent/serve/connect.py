"""`memory-agent connect AGENT`: merge the MCP server, the hooks and the permission rule into an
agent's own settings files, so nobody hand-merges printed JSON into an existing file.

    claude-code  ~/.claude/settings.json   hooks + permissions.allow (the read-only tools)
                 ~/.claude.json            mcpServers.memory (Claude Code rewrites this file
                                           while it runs: merged atomically, re-checked)
    codex        ~/.codex/config.toml      [mcp_servers.memory], a delimited block of ours
                 ~/.codex/hooks.json       hooks (untrusted until trusted once in /hooks)
    opencode     ~/.config/opencode/opencode.json   mcp.memory
                 ~/.config/opencode/plugins/memory-agent.ts   the capture plugin (a copy)
    cursor       ~/.cursor/mcp.json        mcpServers.memory

Without `confirm` nothing is written: the reply holds each file's diff. With it, each changed
file is first copied to `<file>.memory-agent-<time>.bak`, then replaced atomically (temp file
and rename, its mode kept). Running it twice changes nothing; `remove` takes out exactly what
it puts in (our hook commands, our permission rules, the `memory` server when it is ours),
keeping every other setting and, for a file written as JSON with a regular indent, its bytes.
A malformed file is refused with its path and the fix, and nothing is changed; so is a file
that cannot be replaced (immutable, a read-only mount), with nothing of ours left beside it.

This module plans which files each agent needs and what of ours goes in each; how one file is
changed so that only ours changes (the merge, the diff, the backed-up atomic write) is
`memory_agent.serve.agent_settings`.

$HOME (or `user_home`) locates the files; $CLAUDE_CONFIG_DIR and $CODEX_HOME are honoured as
the agents themselves honour them.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from memory_agent.errors import ConfigError, Conflict, Invalid
from memory_agent.serve.agent_settings import (
    Change,
    Moved,
    json_change,
    merge_allow,
    merge_hooks,
    merge_server,
    write_change,
)
from memory_agent.serve.mcp_config import (
    OPENCODE_PLUGIN,
    READ_TOOLS,
    claude_permissions,
    hook_command,
    hook_settings,
    proxy_command,
)

__all__ = ["AGENTS", "agent_present", "connect"]

AGENTS = ("claude-code", "codex", "opencode", "cursor")
BEGIN = "# BEGIN memory-agent (written by `memory-agent connect codex`; --remove takes it out)"
END = "# END memory-agent"
_OUR_TABLE = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(memory|"memory"|'memory')\s*[\].]""")


# -- the plan --------------------------------------------------------------------------------
def _claude_dir(user_home: Path) -> Path:
    return (
        Path(os.environ["CLAUDE_CONFIG_DIR"])
        if os.environ.get("CLAUDE_CONFIG_DIR")
        else (user_home / ".claude")
    )


def _claude_json(user_home: Path) -> Path:
    if os.environ.get("CLAUDE_CONFIG_DIR"):
        return Path(os.environ["CLAUDE_CONFIG_DIR"]) / ".claude.json"
    return user_home / ".claude.json"


def _codex_dir(user_home: Path) -> Path:
    return (
        Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else (user_home / ".codex")
    )


def _server(home: Path, style: str) -> dict:
    cmd = proxy_command(home)
    if style == "opencode":
        return {"type": "local", "command": cmd, "enabled": True}
    if style == "claude":
        return {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {}}
    return {"command": cmd[0], "args": cmd[1:]}


def _plan_claude(home: Path, user_home: Path, remove: bool) -> list[Change]:
    ours = hook_settings(home, "claude-code")
    settings = _claude_dir(user_home) / "settings.json"
    rules = [f"mcp__memory__{t}" for t in READ_TOOLS]
    assert rules == claude_permissions()["allow"]

    def edit_settings(data: dict) -> None:
        merge_hooks(data, None if remove else ours["hooks"], settings)
        merge_allow(data, rules, remove, settings)

    claude_json = _claude_json(user_home)

    def edit_claude_json(data: dict) -> None:
        merge_server(data, "mcpServers", None if remove else _server(home, "claude"), claude_json)

    return [
        json_change(settings, "Claude Code's settings", edit_settings),
        json_change(claude_json, "Claude Code's state and MCP servers", edit_claude_json),
    ]


def _toml_block(home: Path) -> str:
    cmd = proxy_command(home)
    args = ", ".join(json.dumps(a) for a in cmd[1:])
    return (
        f"{BEGIN}\n[mcp_servers.memory]\ncommand = {json.dumps(cmd[0])}\nargs = [{args}]\n{END}\n"
    )


def _codex_toml_change(path: Path, home: Path, remove: bool) -> Change:
    import tomllib

    old = None
    if path.exists():
        try:
            old = path.read_text(encoding="utf-8")
            tomllib.loads(old)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(
                f"{path} is not valid TOML ({exc}); nothing was changed",
                f"fix or move {path} (Codex's settings), then run `memory-agent connect` again",
            ) from exc
    text = old or ""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == END]
    if len(begins) > 1 or len(begins) != len(ends) or (begins and ends[0] < begins[0]):
        raise ConfigError(
            f"{path} has a broken memory-agent block (its BEGIN/END lines); nothing was changed",
            f"delete the lines from {BEGIN!r} to {END!r} in {path} and run it again",
        )
    outside = lines if not begins else lines[: begins[0]] + lines[ends[0] + 1 :]
    if any(_OUR_TABLE.match(line) for line in outside):
        raise Conflict(
            f"{path} already has an [mcp_servers.memory] table not written by memory-agent "
            "connect; nothing was changed",
            f"remove that table from {path} (or rename the server), then run it again",
        )
    if remove:
        new = "".join(outside) if begins else text
    elif begins:
        new = "".join(lines[: begins[0]]) + _toml_block(home) + "".join(lines[ends[0] + 1 :])
    else:
        sep = "" if not text or text.endswith("\n") else "\n"  # our BEGIN line sets it off
        new = text + sep + _toml_block(home)
    if new != text:
        parsed = tomllib.loads(new)  # a last check: ours reads back as written, the rest parses
        server = parsed.get("mcp_servers", {}).get("memory")
        assert (server is None) if remove else (server == _server(home, "codex"))
    if (old is None or remove) and not new.strip():  # nothing but ours was in it: no file
        new = None
    return Change(path, old, new)


def _plan_codex(home: Path, user_home: Path, remove: bool) -> list[Change]:
    folder = _codex_dir(user_home)
    hooks_json = folder / "hooks.json"
    ours = hook_settings(home, "codex")["hooks"]
    hooks = json_change(
        hooks_json,
        "Codex's hooks",
        lambda data: merge_hooks(data, None if remove else ours, hooks_json),
    )
    if remove and hooks.new is not None and hooks.new != hooks.old and not json.loads(hooks.new):
        hooks = Change(hooks_json, hooks.old, None)  # only ours was in it: no `{}` left behind
    return [_codex_toml_change(folder / "config.toml", home, remove), hooks]


def _plugin_text(home: Path) -> str:
    """The opencode plugin with this home and the fast hook command (`hookrun.py` under this
    Python without `site`, as `init` prints it for the other agents) filled in."""
    text = OPENCODE_PLUGIN.read_text(encoding="utf-8")
    command = json.dumps(hook_command(home, "EVENT", "opencode")[:3])
    hook_line = re.compile(r"^const HOOK: string\[\] = .*?$\n(?:^ .*$\n)*", re.M)
    if not hook_line.search(text):
        raise RuntimeError(f"{OPENCODE_PLUGIN} has no `const HOOK` line to fill in")
    text = hook_line.sub(lambda _: f"const HOOK: string[] = {command}\n", text, count=1)
    return text.replace(
        "process.env.MEMORY_AGENT_HOME ?? `${process.env.HOME}/.memory-agent`",
        f"process.env.MEMORY_AGENT_HOME ?? {json.dumps(str(home))}",
    )


def _plan_opencode(home: Path, user_home: Path, remove: bool) -> list[Change]:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or user_home / ".config") / "opencode"
    config = base / "opencode.json"
    if not config.exists() and (base / "opencode.jsonc").exists():
        raise ConfigError(
            f"{base / 'opencode.jsonc'} is JSON with comments, which connect does not edit",
            "add the `mcp.memory` entry `memory-agent init` prints to it by hand",
        )

    def edit(data: dict) -> None:
        merge_server(data, "mcp", None if remove else _server(home, "opencode"), config)

    plugin = base / "plugins" / "memory-agent.ts"
    old_plugin = plugin.read_text(encoding="utf-8") if plugin.exists() else None
    if (
        old_plugin is not None
        and "memory-agent hook" not in old_plugin
        and "hook ${event}" not in old_plugin
        and "// memory-agent for opencode" not in old_plugin
    ):
        raise Conflict(
            f"{plugin} exists and is not memory-agent's plugin; nothing was changed",
            f"rename or remove {plugin}, then run `memory-agent connect opencode` again",
        )
    new_plugin = None if remove else _plugin_text(home)
    return [
        json_change(config, "opencode's settings", edit),
        Change(plugin, old_plugin, new_plugin),
    ]


def _plan_cursor(home: Path, user_home: Path, remove: bool) -> list[Change]:
    path = user_home / ".cursor" / "mcp.json"
    return [
        json_change(
            path,
            "Cursor's MCP servers",
            lambda data: merge_server(
                data, "mcpServers", None if remove else _server(home, "cursor"), path
            ),
        )
    ]


PLANS = {
    "claude-code": _plan_claude,
    "codex": _plan_codex,
    "opencode": _plan_opencode,
    "cursor": _plan_cursor,
}
NOTES = {
    "claude-code": [
        "permissions.allow lets the read-only memory tools run without asking (in `claude -p` "
        'a tool nobody allowed is denied). To let the agent write too, add "mcp__memory" '
        "(every memory tool) to permissions.allow in the settings file.",
    ],
    "codex": [
        "Codex runs the hooks only once you trust them: start `codex`, type /hooks and trust "
        "the memory-agent hooks (after any change to hooks.json, again).",
        "Codex fires no hook for a failing MCP tool call: the Stop hook reads those from "
        "Codex's session file.",
    ],
    "opencode": [
        "the plugin runs the hooks (this Python's hookrun.py) with this home; restart opencode"
    ],
    "cursor": ["Cursor has no hooks memory-agent uses: the MCP tools only"],
}


def agent_present(agent: str, user_home: Path) -> bool:
    """Whether `agent` has a settings folder on this machine (it was installed or run)."""
    folders = {
        "claude-code": [_claude_dir(user_home), _claude_json(user_home)],
        "codex": [_codex_dir(user_home)],
        "opencode": [Path(os.environ.get("XDG_CONFIG_HOME") or user_home / ".config") / "opencode"],
        "cursor": [user_home / ".cursor"],
    }
    return any(p.exists() for p in folders[agent])


def connect(
    agent: str,
    home: Path,
    *,
    confirm: bool = False,
    remove: bool = False,
    user_home: Path | None = None,
) -> dict[str, Any]:
    """Plan (and with `confirm`, make) the change to `agent`'s settings files."""
    if agent not in PLANS:
        raise Invalid(f"unknown agent {agent!r}", f"use one of {', '.join(AGENTS)}")
    user_home = Path(user_home or os.environ.get("HOME") or Path.home())
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for attempt in range(5):
        changes = PLANS[agent](home, user_home, remove)
        written = []
        try:
            if confirm:
                for change in changes:
                    if change.action != "unchanged":
                        try:
                            backup = write_change(change, stamp, recheck=True)
                        except ConfigError as exc:
                            if written:  # the files before it were changed: say which
                                exc.message += "; already changed: " + ", ".join(
                                    f"{path} (backup {backup})" for path, backup in written
                                )
                            raise
                        written.append((change.path, backup))
            break
        except Moved:
            if attempt == 4:
                raise Conflict(
                    f"{changes[0].path.parent} keeps changing while memory-agent merges into "
                    "it; nothing more was changed",
                    "quit the agent and run `memory-agent connect` again",
                ) from None
    backups = dict(written)
    return {
        "agent": agent,
        "remove": remove,
        "written": bool(confirm and written),
        "files": [
            {
                "path": str(c.path),
                "action": c.action,
                "diff": c.diff(),
                "backup": backups.get(c.path),
            }
            for c in changes
        ],
        "notes": [] if remove else NOTES[agent],
    }
