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
A malformed file is refused with its path and the fix, and nothing is changed.

$HOME (or `user_home`) locates the files; $CLAUDE_CONFIG_DIR and $CODEX_HOME are honoured as
the agents themselves honour them.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from memory_agent.errors import ConfigError, Conflict, Invalid
from memory_agent.serve.mcp_config import (
    OPENCODE_PLUGIN,
    READ_TOOLS,
    claude_permissions,
    hook_command,
    hook_settings,
    proxy_command,
)

__all__ = ["AGENTS", "connect"]

AGENTS = ("claude-code", "codex", "opencode", "cursor")
BEGIN = "# BEGIN memory-agent (written by `memory-agent connect codex`; --remove takes it out)"
END = "# END memory-agent"
_OUR_TABLE = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(memory|"memory"|'memory')\s*[\].]""")


# -- what is ours --------------------------------------------------------------------------------
def _is_our_handler(handler: Any) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    if not isinstance(command, str):
        return False
    return "memory_agent/hookrun.py" in command or bool(
        re.search(r"memory[-_]agent\S*\s+(?:.*\s)?hook(\s|$)", command)
    )


def _is_our_server(server: Any) -> bool:
    if not isinstance(server, dict):
        return False
    command = server.get("command")
    parts = command if isinstance(command, list) else [command, *(server.get("args") or [])]
    text = " ".join(str(p) for p in parts)
    return "proxy" in parts and ("memory-agent" in text or "memory_agent" in text)


# -- JSON files ----------------------------------------------------------------------------------
def _read_json(path: Path, what: str) -> tuple[str | None, dict]:
    if not path.exists():
        return None, {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", f"make {path} a readable file") from exc
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); nothing was changed",
            f"fix or move {path} (it holds {what}), then run `memory-agent connect` again",
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed",
            f"fix or move {path} (it holds {what}), then run `memory-agent connect` again",
        )
    return text, data


def _dump_like(data: dict, old: str | None) -> str:
    """JSON in the old text's style: its indent (2 by default) and its final newline."""
    indent: int | str = 2
    if old:
        m = re.search(r"\n([ \t]+)\S", old)
        if m:
            indent = len(m.group(1)) if set(m.group(1)) == {" "} else m.group(1)
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + ("\n" if old is None or old.endswith("\n") else "")


def _section(data: dict, key: str, path: Path) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(
            f'"{key}" in {path} is a {type(value).__name__}, not an object; nothing was changed',
            f'make "{key}" an object in {path}, then run `memory-agent connect` again',
        )
    return value


def _merge_hooks(data: dict, ours: dict[str, list] | None, path: Path) -> None:
    """Take our handlers out of every event; put ours (if any) back where they were."""
    hooks = _section(data, "hooks", path)
    for event in list(hooks):
        blocks = hooks[event]
        if not isinstance(blocks, list):
            continue
        kept, at = [], None
        for block in blocks:
            handlers = block.get("hooks") if isinstance(block, dict) else None
            if not isinstance(handlers, list) or not any(map(_is_our_handler, handlers)):
                kept.append(block)
                continue
            rest = [h for h in handlers if not _is_our_handler(h)]
            if rest:
                kept.append({**block, "hooks": rest})
            elif at is None:
                at = len(kept)
        if ours and event in ours:
            pos = at if at is not None else len(kept)
            kept[pos:pos] = ours[event]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    for event, blocks in (ours or {}).items():
        if event not in hooks:
            hooks[event] = blocks
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)


def _merge_allow(data: dict, rules: list[str], remove: bool, path: Path) -> None:
    permissions = _section(data, "permissions", path)
    allow = permissions.get("allow", [])
    if not isinstance(allow, list):
        raise ConfigError(
            f'"permissions.allow" in {path} is not a list; nothing was changed',
            f'make "permissions.allow" a list in {path}, then run `memory-agent connect` again',
        )
    if remove:
        allow = [r for r in allow if r not in rules]
    else:
        allow = allow + [r for r in rules if r not in allow]
    if allow:
        permissions["allow"] = allow
    else:
        permissions.pop("allow", None)
    if permissions:
        data["permissions"] = permissions
    else:
        data.pop("permissions", None)


def _merge_server(data: dict, key: str, server: dict | None, path: Path) -> None:
    servers = _section(data, key, path)
    current = servers.get("memory")
    if current is not None and not _is_our_server(current):
        raise Conflict(
            f'{path} already has an MCP server named "memory" that is not memory-agent\'s '
            f"({json.dumps(current)[:200]}); nothing was changed",
            f"rename or remove that server in {path}, then run `memory-agent connect` again",
        )
    if server is None:
        servers.pop("memory", None)
    elif current != server:
        servers["memory"] = server
    if servers:
        data[key] = servers
    else:
        data.pop(key, None)


# -- the plan --------------------------------------------------------------------------------
class _Change:
    def __init__(self, path: Path, old: str | None, new: str | None, note: str = ""):
        self.path, self.old, self.new, self.note = path, old, new, note

    @property
    def action(self) -> str:
        if self.old == self.new:
            return "unchanged"
        if self.new is None:
            return "delete"
        return "create" if self.old is None else "update"

    def diff(self) -> str:
        if self.old == self.new:
            return ""
        lines = difflib.unified_diff(
            (self.old or "").splitlines(keepends=True),
            (self.new or "").splitlines(keepends=True),
            fromfile=str(self.path) if self.old is not None else "/dev/null",
            tofile=str(self.path) if self.new is not None else "/dev/null",
            n=2,
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _json_change(path: Path, what: str, edit) -> _Change:
    old, data = _read_json(path, what)
    before = copy.deepcopy(data)
    edit(data)
    if data == before:
        return _Change(path, old, old)  # nothing of ours to change: keep the bytes
    return _Change(path, old, _dump_like(data, old))


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


def _plan_claude(home: Path, user_home: Path, remove: bool) -> list[_Change]:
    ours = hook_settings(home, "claude-code")
    settings = _claude_dir(user_home) / "settings.json"
    rules = [f"mcp__memory__{t}" for t in READ_TOOLS]
    assert rules == claude_permissions()["allow"]

    def edit_settings(data: dict) -> None:
        _merge_hooks(data, None if remove else ours["hooks"], settings)
        _merge_allow(data, rules, remove, settings)

    claude_json = _claude_json(user_home)

    def edit_claude_json(data: dict) -> None:
        _merge_server(data, "mcpServers", None if remove else _server(home, "claude"), claude_json)

    return [
        _json_change(settings, "Claude Code's settings", edit_settings),
        _json_change(claude_json, "Claude Code's state and MCP servers", edit_claude_json),
    ]


def _toml_block(home: Path) -> str:
    cmd = proxy_command(home)
    args = ", ".join(json.dumps(a) for a in cmd[1:])
    return (
        f"{BEGIN}\n[mcp_servers.memory]\ncommand = {json.dumps(cmd[0])}\nargs = [{args}]\n{END}\n"
    )


def _codex_toml_change(path: Path, home: Path, remove: bool) -> _Change:
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
    if old is None and not new:
        new = None
    return _Change(path, old, new)


def _plan_codex(home: Path, user_home: Path, remove: bool) -> list[_Change]:
    folder = _codex_dir(user_home)
    hooks_json = folder / "hooks.json"
    ours = hook_settings(home, "codex")["hooks"]
    return [
        _codex_toml_change(folder / "config.toml", home, remove),
        _json_change(
            hooks_json,
            "Codex's hooks",
            lambda data: _merge_hooks(data, None if remove else ours, hooks_json),
        ),
    ]


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


def _plan_opencode(home: Path, user_home: Path, remove: bool) -> list[_Change]:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or user_home / ".config") / "opencode"
    config = base / "opencode.json"
    if not config.exists() and (base / "opencode.jsonc").exists():
        raise ConfigError(
            f"{base / 'opencode.jsonc'} is JSON with comments, which connect does not edit",
            "add the `mcp.memory` entry `memory-agent init` prints to it by hand",
        )

    def edit(data: dict) -> None:
        _merge_server(data, "mcp", None if remove else _server(home, "opencode"), config)

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
        _json_change(config, "opencode's settings", edit),
        _Change(plugin, old_plugin, new_plugin),
    ]


def _plan_cursor(home: Path, user_home: Path, remove: bool) -> list[_Change]:
    path = user_home / ".cursor" / "mcp.json"
    return [
        _json_change(
            path,
            "Cursor's MCP servers",
            lambda data: _merge_server(
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


# -- writing -------------------------------------------------------------------------------------
def _write(change: _Change, stamp: str, recheck: bool) -> str | None:
    """Back the file up, then replace it atomically; its backup's path. With `recheck`, the
    file is read again just before the rename: if someone (Claude Code) changed it meanwhile,
    raise so the caller merges again."""
    path = change.path
    if path.is_symlink():  # a dotfile manager's link (stow, home-manager): write its target
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if change.old is not None:
        backup = path.with_name(f"{path.name}.memory-agent-{stamp}.bak")
        n = 1
        while backup.exists():  # two runs in one second: keep both backups
            backup, n = path.with_name(f"{path.name}.memory-agent-{stamp}-{n}.bak"), n + 1
        shutil.copy2(path, backup)
    if change.new is None:
        path.unlink()
        return str(backup) if backup else None
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    tmp = path.with_name(f".{path.name}.memory-agent-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, change.new.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    now = path.read_text(encoding="utf-8") if path.exists() else None
    if recheck and now != change.old:
        tmp.unlink()
        raise _Moved(path)
    os.replace(tmp, path)
    return str(backup) if backup else None


class _Moved(Exception):
    pass


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
                        backup = _write(change, stamp, recheck=True)
                        written.append((change.path, backup))
            break
        except _Moved:
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
