"""An agent's settings file, changed so that only ours changes: what `memory-agent connect`
does to each file it plans for (`memory_agent.serve.connect`).

- JSON (`json_change`): read (a malformed file, or a section of ours that is not an object, is
  refused with its path and the fix, nothing changed), edited by `merge_hooks`, `merge_allow`
  and `merge_server` - which take out exactly what is ours (our hook commands, our permission
  rules, the `memory` server when it is ours; another `memory` server is a Conflict) and put
  ours back where it was - and written in the old text's style (its indent, its final newline):
  a file whose edit changes nothing keeps its bytes.
- `Change`: one file's old and new text, its action and its unified diff (the preview).
- `write_change`: the file copied to `<file>.memory-agent-<time>.bak`, then replaced atomically
  (temp file and rename, its mode kept; a symlink's target is written). With `recheck`, the
  file is read before the backup and again just before the rename; if someone (Claude Code,
  another `connect`) changed it meanwhile, `Moved` is raised so the caller merges again, no
  backup made. A file that cannot be replaced (immutable, a read-only mount or folder) is a
  `ConfigError` naming it and the fix; the temp file and the backup are removed.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from memory_agent.errors import ConfigError, Conflict

__all__ = [
    "Change",
    "Moved",
    "json_change",
    "merge_allow",
    "merge_hooks",
    "merge_server",
    "write_change",
]


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


def merge_hooks(data: dict, ours: dict[str, list] | None, path: Path) -> None:
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


def merge_allow(data: dict, rules: list[str], remove: bool, path: Path) -> None:
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


def merge_server(data: dict, key: str, server: dict | None, path: Path) -> None:
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


# -- one file's change -------------------------------------------------------------------
class Change:
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


def json_change(path: Path, what: str, edit) -> Change:
    old, data = _read_json(path, what)
    before = copy.deepcopy(data)
    edit(data)
    if data == before:
        return Change(path, old, old)  # nothing of ours to change: keep the bytes
    return Change(path, old, _dump_like(data, old))


# -- writing -------------------------------------------------------------------------------------
def write_change(change: Change, stamp: str, recheck: bool) -> str | None:
    """Back the file up, then replace it atomically; its backup's path. With `recheck`, the
    file is read before the backup and again just before the rename: if someone (Claude Code,
    another `connect`) changed it meanwhile, `Moved` is raised so the caller merges again -
    with no backup made. A file that cannot be replaced (immutable, a read-only mount, a
    folder not writable) is a `ConfigError` naming it and the fix; either way nothing of ours
    (temp file, backup) is left beside it."""
    path = change.path
    if path.is_symlink():  # a dotfile manager's link (stow, home-manager): write its target
        path = path.resolve()
    made: list[Path] = []  # our files beside it, removed if the change does not happen
    try:
        return _replace(path, change, stamp, recheck, made)
    except Moved:
        _remove(made)
        raise
    except OSError as exc:
        _remove(made)
        raise ConfigError(
            f"cannot {'write' if change.old is None else 'replace'} {path}: "
            f"{exc.strerror or exc}; it was not changed",
            f"make {path} writable - it may be immutable (`lsattr {path}`, then `chattr -i`), "
            f"on a read-only mount, or in a folder you cannot write - then run `memory-agent "
            "connect` again; or make the change by hand (without --confirm, `memory-agent "
            "connect` prints it)",
        ) from exc


def _replace(path: Path, change: Change, stamp: str, recheck: bool, made: list[Path]) -> str | None:
    if recheck and _current(path) != change.old:
        raise Moved(path)  # (before any backup: a run that changes nothing leaves none)
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if change.old is not None:
        backup = _claim(path, stamp)
        made.append(backup)
        shutil.copy2(path, backup)
    if change.new is None:
        path.unlink()
        return str(backup) if backup else None
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    tmp = path.with_name(f".{path.name}.memory-agent-{os.getpid()}.tmp")
    made.append(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, change.new.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    if recheck and _current(path) != change.old:
        raise Moved(path)
    os.replace(tmp, path)
    return str(backup) if backup else None


def _claim(path: Path, stamp: str) -> Path:
    """A backup name no other run holds, made empty here: two runs in one second each get
    their own (`-1`, `-2`, ...). Made with O_EXCL, not looked at and then copied to - in that
    window another run could take the same name, and a run whose rename was then refused
    removed its "own" backup, which was the other run's."""
    for n in range(1000):
        name = f"{path.name}.memory-agent-{stamp}{f'-{n}' if n else ''}.bak"
        try:
            os.close(os.open(path.with_name(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return path.with_name(name)
    raise FileExistsError(f"{path.name}.memory-agent-{stamp}-*.bak: a thousand backups this second")


def _current(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return ""  # (not what was planned on: merge again, and be refused by the read)


def _remove(paths: list[Path]) -> None:
    for p in paths:
        try:
            p.unlink()
        except OSError:
            pass


class Moved(Exception):
    pass
