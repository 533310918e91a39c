"""A real MCP client session over a real `memory-agent proxy` subprocess."""

from __future__ import annotations

import os
from pathlib import Path

from memory_agent.serve import session

ROOT = Path(__file__).resolve().parents[2]


def env_for(home: Path, cache: Path, **extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        MEMORY_AGENT_HOME=str(home),
        MEMORY_AGENT_CACHE=str(cache),
        MEMORY_AGENT_EMBEDDER="minilm",
        MEMORY_AGENT_IDLE_EXIT="120",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def serve_home(home: Path, cache: Path, monkeypatch, clock: str) -> None:
    """Start `home`'s daemon, the model loaded and the index built, with the environment the
    test's own CLI calls share (cache, embedder, the pinned clock) set in this process too."""
    from memory_agent.client import DaemonClient

    env = env_for(home, cache, MEMORY_AGENT_CLOCK=clock)
    for key in ("MEMORY_AGENT_CACHE", "MEMORY_AGENT_EMBEDDER", "MEMORY_AGENT_CLOCK"):
        monkeypatch.setenv(key, env[key])
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")


class ProxySession(session.ProxySession):
    """The package's stdio MCP client, with the test environment for `home`."""

    def __init__(self, home: Path, cache: Path, cwd: Path | None = None, **extra_env: str):
        super().__init__(home, env=env_for(home, cache, **extra_env), cwd=cwd)

    def send(
        self, method: str, params: dict | None = None, notify: bool = False, timeout: float = 120
    ):
        if notify:
            return self.notify(method, params)
        return super().send(method, params, timeout=timeout)


def structured(result: dict) -> dict:
    """A tool call's structured reply, asserting it is no error (the error shown if it is)."""
    assert not result.get("isError"), result
    return result["structuredContent"]


def daemon_pids(home: Path) -> list[int]:
    """Processes running `memory_agent daemon --home <home>`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [c.decode(errors="replace") for c in cmd if c]
        if "daemon" in args and str(home) in args and any("memory_agent" in a for a in args):
            pids.append(int(entry.name))
    return pids


def kill_daemon(pid: int, timeout: float = 30.0) -> None:
    """SIGKILL a daemon and return once it is dead (gone, or a zombie nobody reaped yet): its
    socket and locks are then free for the next one. A bounded wait on the process itself, not
    a guess at how long dying takes."""
    import signal
    import time

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return  # gone
        if state in ("Z", "X"):
            return
        time.sleep(0.01)
    raise AssertionError(f"daemon {pid} still alive {timeout} s after SIGKILL")
