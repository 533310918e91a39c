"""Talking to the daemon: find it, start it once, call it. Standard library only.

The proxy and every CLI command use this module, so it must stay light: no torch, numpy,
qdrant, mcp or pydantic here (a test checks the proxy's imports).

Starting the daemon: if it does not answer, take the spawn lock (`run/spawn.lock`), check
again (another process may have started it meanwhile), start `memory-agent daemon` detached
with no inherited stdio, wait for its health route, release the lock. Ten processes doing this
at the same instant make exactly one daemon.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memory_agent import __version__

__all__ = ["DaemonClient", "DaemonError", "ToolCallError"]

PROTOCOL_VERSION = "2025-06-18"
# Who is calling (the MCP client's name/version, or the CLI): recorded in query events.
CALLER_HEADER = "X-Memory-Agent-Caller"
START_TIMEOUT = float(os.environ.get("MEMORY_AGENT_START_TIMEOUT", "60"))


class DaemonError(RuntimeError):
    """The daemon could not be reached or started; the message says where to look."""


class ToolCallError(RuntimeError):
    """A tool answered with is_error: the message is for the user (or the model)."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DaemonClient:
    def __init__(self, home: Path, *, timeout: float = 600.0):
        self.home = Path(home)
        self.run_dir = self.home / "run"
        self.socket_path = self.run_dir / "daemon.sock"
        self.timeout = timeout
        self._ids = itertools.count(1)

    # -- raw HTTP ---------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = _UnixConnection(str(self.socket_path), timeout or self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def health(self, timeout: float = 2.0) -> dict[str, Any] | None:
        """The daemon's health, or None if nothing answers."""
        try:
            status, _, data = self.request("GET", "/health", timeout=timeout)
        except (OSError, http.client.HTTPException):
            return None
        return json.loads(data) if status == 200 else None

    # -- lifecycle --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _spawn_lock(self):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "spawn.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def ensure(self) -> dict[str, Any]:
        """A healthy daemon of our version, started if needed. Returns its health."""
        health = self.health()
        if health is not None and health.get("version") == __version__:
            return health
        with self._spawn_lock():
            health = self.health()
            if health is not None and health.get("version") != __version__:
                self.stop(wait=True)  # another version: ask it to go, then start ours
                health = None
            if health is None:
                self._spawn()
                health = self._wait_healthy()
        return health

    def _spawn(self) -> None:
        cmd = [sys.executable, "-m", "memory_agent", "daemon", "--home", str(self.home)]
        subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            cwd=str(self.home),
        )

    def _wait_healthy(self) -> dict[str, Any]:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            health = self.health(timeout=1.0)
            if health is not None:
                return health
            time.sleep(0.05)
        tail = ""
        log = self.run_dir / "daemon.log"
        if log.is_file():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise DaemonError(
            f"the memory daemon did not start within {START_TIMEOUT:.0f} s; see {log}:\n{tail}"
        )

    def stop(self, wait: bool = True, timeout: float = 30.0) -> bool:
        """Ask the daemon to finish its work and exit. True if one was running."""
        try:
            self.request("POST", "/admin/stop", timeout=5.0)
        except (OSError, http.client.HTTPException):
            return False
        if wait:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.health(timeout=0.5) is not None:
                time.sleep(0.05)
            pid_file = self.run_dir / "daemon.pid"
            while time.monotonic() < deadline and pid_file.exists():
                time.sleep(0.05)
        return True

    # -- MCP over HTTP --------------------------------------------------------------------
    def post_mcp(
        self,
        payload: bytes,
        protocol_version: str | None = None,
        timeout: float | None = None,
        caller: str | None = None,
    ) -> tuple[int, bytes]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if protocol_version:
            headers["MCP-Protocol-Version"] = protocol_version
        if caller:
            headers[CALLER_HEADER] = caller
        status, _, data = self.request("POST", "/mcp", payload, headers, timeout)
        return status, data

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool (starting the daemon if needed); its structured result."""
        self.ensure()
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        status, data = self.post_mcp(
            json.dumps(message).encode(), PROTOCOL_VERSION, caller=f"memory-agent-cli/{__version__}"
        )
        if status != 200:
            raise DaemonError(f"the daemon answered HTTP {status}: {data[:500]!r}")
        reply = json.loads(data)
        if "error" in reply:
            raise DaemonError(f"protocol error from the daemon: {reply['error']}")
        result = reply["result"]
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content", []))
            raise ToolCallError(re.sub(r"^Error executing tool \w+: ", "", text))
        if result.get("structuredContent") is not None:
            return result["structuredContent"]
        return json.loads(result["content"][0]["text"])

    def admin(self, action: str) -> dict[str, Any]:
        self.ensure()
        status, _, data = self.request("POST", f"/admin/{action}")
        try:
            reply = json.loads(data)
        except ValueError:
            reply = {
                "error": f"the daemon answered HTTP {status}: {data[:300]!r}; see "
                f"{self.run_dir / 'daemon.log'}"
            }
        if status != 200:
            code = reply.get("code")
            message = reply.get("error", f"HTTP {status}")
            raise ToolCallError(f"{code}: {message}" if code else message)
        return reply
