"""`memory-agent doctor`: every part a home depends on, checked, each one a line - ok, or what is
wrong and the command that fixes it.

    home      the folders and the KB's git repository exist
    disk      free space where the home is
    model     the embedder's weights (or endpoint) can be found, without loading them
    daemon    running or not (it starts on first use), its version, the last error it logged
    index     consistent with the files (the daemon is started for this)
    git       an identity for the KB's commits (memory-agent's own is used without one)
    remote    each KB's remote answers `git ls-remote` (with the person's own ssh and
              credentials, no prompt)
    layout    each KB flat with no folder past FANOUT_ABOVE entries, or fanned out (ADR 0031)
    agents    each agent found on this machine has this home's MCP server and hooks
    platform  how this machine locks files, watches them and reaches the daemon

Read-only: nothing is written, except that the daemon is started to ask the index. The checks
run in this process, so a daemon that cannot start is reported, not a reason to stop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from memory_agent import __version__
from memory_agent import config as config_mod
from memory_agent.errors import describe

__all__ = ["MIN_FREE_MB", "diagnose"]

MIN_FREE_MB = 500  # an index rebuild writes a new generation beside the live one
FANOUT_ABOVE = 50_000  # entries in one flat type folder past which doctor names `kb fanout`


def _line(name: str, ok: bool, message: str, fix: str | None = None) -> dict[str, Any]:
    return {"check": name, "ok": ok, "message": message, "fix": None if ok else fix}


def diagnose(home: Path, *, user_home: Path | None = None, start: bool = True) -> list[dict]:
    """Every check of the home at `home`, in order; `start`: start the daemon to ask the index."""
    cfg = config_mod.load({"home": str(home)})
    home = cfg.home_dir
    lines = [_home(home)]
    if not lines[0]["ok"]:
        return lines
    lines.append(_disk(home))
    lines.append(_model(cfg))
    lines += _daemon_and_index(home, start)
    lines.append(_git_identity(home / "kb"))
    lines += _remotes(home)
    lines += _layouts(home)
    lines += _agents(home, user_home)
    lines.append(_platform(cfg))
    return lines


def _home(home: Path) -> dict[str, Any]:
    if not (home / "kb" / ".git").exists():
        return _line("home", False, f"{home} holds no knowledge base", "run `memory-agent init`")
    return _line("home", True, f"{home} (knowledge base {home / 'kb'})")


def _disk(home: Path) -> dict[str, Any]:
    free = shutil.disk_usage(home).free // (1 << 20)
    if free < MIN_FREE_MB:
        return _line(
            "disk",
            False,
            f"{free:,} MB free where the home is (a rebuild needs room for a second index)",
            f"free at least {MIN_FREE_MB} MB on the disk of {home}",
        )
    return _line("disk", True, f"{free:,} MB free")


def _model(cfg: Any) -> dict[str, Any]:
    from memory_agent import config as config_mod
    from ragcore import make_embedder

    name = str(cfg.embedder)
    try:
        make_embedder(name, **config_mod.embedder_args(cfg))  # as the daemon makes it
    except Exception as exc:  # noqa: BLE001 - every failure to find the model, with its fix
        info = describe(exc)
        return _line("model", False, f"{name}: {info.message}", info.fix)
    if name == "minilm" and not cfg.model_path:
        from memory_agent.serve.model import minilm_weights

        weights = minilm_weights(cfg).status()  # found where they are, never fetched here
        if weights["source"] is None:
            return _line(
                "model",
                False,
                f"minilm: its weights are not on this machine yet ({weights['download_mb']} MB "
                f"from {weights['endpoint']} into {weights['cache_folder']})",
                "`memory-agent model fetch` downloads them (as `init` does); without the hub, "
                "`memory-agent model import PATH` takes them from a folder or an archive",
            )
    return _line("model", True, f"{name} (found; loaded by the daemon on first use)")


def _daemon_and_index(home: Path, start: bool) -> list[dict[str, Any]]:
    from memory_agent.client import DaemonClient

    client = DaemonClient(home)
    health = client.health()
    lines = []
    if health is None:
        error = client.last_error()
        lines.append(
            _line(
                "daemon",
                error is None,
                "not running (it starts on the first call)"
                + (f"; the last error it logged: {error}" if error else ""),
                f"see {client.run_dir / 'daemon.log'}, then `memory-agent status`",
            )
        )
    elif health.get("version") != __version__:
        lines.append(
            _line(
                "daemon",
                False,
                f"pid {health.get('pid')} runs version {health.get('version')}, this is "
                f"{__version__}",
                "run `memory-agent stop`; the next call starts this version",
            )
        )
    else:
        lines.append(_line("daemon", True, f"pid {health.get('pid')}, version {__version__}"))
    if not start and health is None:
        return lines
    try:
        status = client.call_tool("memory_index_status", {})
    except Exception as exc:  # noqa: BLE001 - the daemon could not start, or the index broke
        info = describe(exc)
        lines.append(_line("index", False, info.message, info.fix))
        return lines
    if status.get("consistent"):
        lines.append(
            _line(
                "index",
                True,
                f"{status.get('generation')}: {status.get('entries')} entries, consistent",
            )
        )
    else:
        lines.append(
            _line(
                "index",
                False,
                "inconsistent: " + "; ".join(status.get("problems") or []),
                "run `memory-agent rebuild`",
            )
        )
    return lines


def _git(repo: Path, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    from memory_agent.sync.transport import network_env

    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=network_env(repo),
        timeout=timeout,
    )


def _git_identity(kb: Path) -> dict[str, Any]:
    name = _git(kb, "config", "--get", "user.name").stdout.strip()
    email = _git(kb, "config", "--get", "user.email").stdout.strip()
    if name and email:
        return _line("git", True, f"commits as {name} <{email}>")
    return _line(
        "git",
        True,  # commits work: memory-agent's own identity is used
        "no git identity: the KB's commits are made as memory-agent <memory-agent@localhost> "
        f"(set yours with `git -C {kb} config user.name NAME` and user.email)",
    )


def _remotes(home: Path) -> list[dict[str, Any]]:
    from memory_agent.kb.kbs import Registry
    from memory_agent.sync.transport import REMOTE, shown

    places = [(p.name, p.dir) for p in Registry(home).all()]
    lines = []
    for name, folder in places:
        if not (folder / ".git").exists():
            lines.append(
                _line(
                    f"remote {name}",
                    False,
                    f"{folder} is gone",
                    f"run `memory-agent kb remove {name}`",
                )
            )
            continue
        url = _git(folder, "config", "--get", f"remote.{REMOTE}.url").stdout.strip()
        if not url:
            lines.append(_line(f"remote {name}", True, "none (this KB stays on this machine)"))
            continue
        try:
            proc = _git(folder, "ls-remote", "--heads", REMOTE, timeout=30)
            error = proc.stderr.strip() if proc.returncode else ""
        except subprocess.TimeoutExpired:
            error = "no answer within 30 s"
        if error:
            first = next((x for x in error.splitlines() if x.strip()), error)
            lines.append(
                _line(
                    f"remote {name}",
                    False,
                    f"{shown(url)} does not answer: {shown(first)[:300]}",
                    "check the URL (`memory-agent remote`), the network and git's credentials "
                    "(your ssh key or credential helper) with `git -C "
                    f"{folder} ls-remote {REMOTE}`",
                )
            )
        else:
            lines.append(_line(f"remote {name}", True, f"{shown(url)} answers"))
    return lines


def _layouts(home: Path) -> list[dict[str, Any]]:
    """Each KB's layout: a flat type folder past FANOUT_ABOVE entries names `kb fanout`."""
    from memory_agent.kb.entries import ENTRY_TYPES
    from memory_agent.kb.files import fanned_out
    from memory_agent.kb.kbs import Registry

    lines = []
    for place in Registry(home).all():
        if not place.dir.is_dir() or not place.writable:
            continue  # `remote NAME` names the fix; a KB added read-only is its owners' to move
        check = f"layout {place.name}"
        if fanned_out(place.dir):
            lines.append(_line(check, True, "fanned out (kb/<type>/<xx>/<id>.md)"))
            continue
        counts = {t: _md_files(place.dir / t) for t in ENTRY_TYPES}
        folder, most = max(counts.items(), key=lambda kv: kv[1])
        if most <= FANOUT_ABOVE:
            lines.append(_line(check, True, f"flat; the largest folder, {folder}/, has {most:,}"))
            continue
        name = "" if place.personal else f" {place.name}"
        lines.append(
            _line(
                check,
                False,
                f"{folder}/ holds {most:,} entries in one folder: git writes its whole listing "
                "at every commit (~1 s per add at a million)",
                f"run `memory-agent kb fanout{name}` to see the move, then with --confirm "
                "(one commit; upgrade every member of a shared KB first; ADR 0031)",
            )
        )
    return lines


def _md_files(folder: Path) -> int:
    try:
        with os.scandir(folder) as listing:
            return sum(1 for e in listing if e.name.endswith(".md"))
    except OSError:
        return 0


def _agents(home: Path, user_home: Path | None) -> list[dict[str, Any]]:
    from memory_agent.serve.connect import AGENTS, agent_present, connect

    lines = []
    user_home = Path(user_home or os.environ.get("HOME") or Path.home())
    for agent in AGENTS:
        if not agent_present(agent, user_home):
            continue
        try:
            plan = connect(agent, home, user_home=user_home)
        except Exception as exc:  # noqa: BLE001 - a malformed settings file, with its fix
            info = describe(exc)
            lines.append(_line(f"agent {agent}", False, info.message, info.fix))
            continue
        missing = [f["path"] for f in plan["files"] if f["action"] != "unchanged"]
        if missing:
            lines.append(
                _line(
                    f"agent {agent}",
                    False,
                    f"not connected to this home ({', '.join(missing)} would change)",
                    f"run `memory-agent connect {agent} --confirm`",
                )
            )
        else:
            lines.append(_line(f"agent {agent}", True, "MCP server and hooks of this home"))
    if not lines:
        lines.append(
            _line("agents", True, "no agent's settings found (see `memory-agent connect`)")
        )
    return lines


def _platform(cfg: Any) -> dict[str, Any]:
    from memory_agent.endpoint import transport_for
    from memory_agent.files import lock_backend
    from memory_agent.index.portable_watch import watchfiles_available
    from memory_agent.index.watch import inotify_available

    watcher = "rescan" if int(cfg.no_inotify) else str(cfg.watcher)
    if watcher == "auto":
        watcher = (
            "inotify"
            if inotify_available()
            else "watchfiles"
            if watchfiles_available()
            else "rescan"
        )
    return _line(
        "platform",
        True,
        f"{sys.platform}, Python {sys.version.split()[0]}: locks {lock_backend()}, watcher "
        f"{watcher}, transport {transport_for(str(cfg.transport))}",
    )
