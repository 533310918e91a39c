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
import http.client
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memory_agent import __version__
from memory_agent.endpoint import Endpoint, connect, read_endpoint
from memory_agent.errors import DaemonError, ErrorInfo, Invalid, ToolCallError, from_wire
from memory_agent.files import FileLock
from memory_agent.limits import MAX_MESSAGE_BYTES, lone_surrogate
from memory_agent.procs import pid_alive

__all__ = ["DaemonClient", "DaemonError", "NotConnected", "ToolCallError", "get_json"]

PROTOCOL_VERSION = "2025-06-18"
# Who is calling (the MCP client's name/version, or the CLI): recorded in query events.
CALLER_HEADER = "X-Memory-Agent-Caller"
# The directory the session works in (percent-encoded): the daemon finds its project there.
WHERE_HEADER = "X-Memory-Agent-Where"
# How long a connection whose reply was read is kept for the next MCP call, and how long the
# daemon keeps an idle one: longer, so the daemon never closes a connection a client may reuse.
KEEPALIVE_S = 2.0
DAEMON_KEEPALIVE_S = 5.0


class NotConnected(ConnectionError):
    """No daemon accepted the connection: the request was never sent (safe to send again)."""


class _DaemonConnection(http.client.HTTPConnection):
    """HTTP to the daemon over its endpoint (`memory_agent.endpoint`: the Unix socket, or
    127.0.0.1 with the token); the token goes with every request."""

    def __init__(self, endpoint: Endpoint, timeout: float):
        super().__init__("localhost", endpoint.port, timeout=timeout)
        self.endpoint = endpoint

    def connect(self) -> None:
        try:
            self.sock = connect(self.endpoint, self.timeout)
        except OSError as exc:
            raise NotConnected(exc.errno, f"no daemon at {self.endpoint.where}: {exc}") from exc

    def putrequest(self, method: str, url: str, *args: Any, **kwargs: Any) -> None:
        super().putrequest(method, url, *args, **kwargs)
        for name, value in self.endpoint.headers().items():
            self.putheader(name, value)


class _Idle:
    """Connections whose reply was read, kept for the next MCP call (newest first out). Shared
    by the proxy's worker threads; each connection serves one call at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: list[tuple[float, _DaemonConnection]] = []

    def take(self) -> _DaemonConnection | None:
        now = time.monotonic()
        with self._lock:
            while self._conns:
                since, conn = self._conns.pop()
                if now - since < KEEPALIVE_S:
                    return conn
                conn.close()
        return None

    def put(self, conn: _DaemonConnection) -> None:
        with self._lock:
            self._conns.append((time.monotonic(), conn))


def get_json(endpoint: Endpoint, path: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """GET `path` of a daemon's endpoint (or a reader's); its JSON object, None if nothing
    answers it with one."""
    conn = _DaemonConnection(endpoint, timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        data = json.loads(resp.read()) if resp.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    return data if isinstance(data, dict) else None


class DaemonClient:
    def __init__(self, home: Path, *, timeout: float = 600.0, start_timeout: float | None = None):
        """`start_timeout`: seconds to wait for a daemon this client starts; None reads the
        `start_timeout` setting when a start happens."""
        self.home = Path(home)
        self.start_timeout = start_timeout
        self.run_dir = self.home / "run"
        self.socket_path = self.run_dir / "daemon.sock"  # (the unix transport's)
        self.timeout = timeout
        # who calls, in the usage log: the CLI (an agent may run it too), or the browser (a
        # person's look, recorded apart from an agent's use: `recall.events` "look")
        self.caller = f"memory-agent-cli/{__version__}"
        self._ids = itertools.count(1)
        self._idle = _Idle()  # the daemon's connections
        self._idle_of: dict[str, _Idle] = {}  # a reader process's, by its `where`

    # -- raw HTTP ---------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = _DaemonConnection(read_endpoint(self.run_dir), timeout or self.timeout)
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
            return json.loads(data) if status == 200 else None
        except (OSError, http.client.HTTPException, ValueError):
            return None

    def pid(self) -> int | None:
        """The pid the daemon wrote at start, if that process is alive."""
        try:
            pid = int((self.run_dir / "daemon.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def log_tail(self, lines: int = 15) -> str:
        log = self.run_dir / "daemon.log"
        if not log.is_file():
            return ""
        with open(log, "rb") as fh:
            fh.seek(max(0, log.stat().st_size - 64_000))
            text = fh.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def last_error(self) -> str | None:
        """The last ERROR line of the daemon log, without its time stamp."""
        for line in reversed(self.log_tail(200).splitlines()):
            if " ERROR " in line:
                return line.split(" ERROR ", 1)[1].strip()
        return None

    # -- lifecycle --------------------------------------------------------------------------
    @contextlib.contextmanager
    def spawn_lock(self):
        """Held by whoever starts a daemon of this home (and by `scrub`, so none starts while
        it rewrites files): one starter at a time, across processes."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.run_dir / "spawn.lock"):
            yield

    def ensure(self) -> dict[str, Any]:
        """A healthy daemon of our version, started if needed. Returns its health."""
        health = self.health()
        if health is not None and health.get("version") == __version__:
            return health
        with self.spawn_lock():
            health = self.health()
            if health is not None and health.get("version") != __version__:
                self.stop(wait=True)  # another version: ask it to go, then start ours
                health = None
            if health is None:
                proc = self.spawn()
                health = self._wait_healthy(proc)
        return health

    def spawn(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "memory_agent", "daemon", "--home", str(self.home)]
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            cwd=str(self.home),
            **detached(),
        )

    def _wait_healthy(self, proc: subprocess.Popen | None = None) -> dict[str, Any]:
        """Poll the health route, backing off from 50 ms to 1 s; fail at once, with the
        daemon's own last error, if the process we started exits (unless it exited because
        another daemon, still starting, holds the home)."""
        limit = self.start_timeout
        if limit is None:
            from memory_agent import config  # read when used: the setting, env or config.toml

            limit = float(config.load({"home": str(self.home)}).start_timeout)
        deadline = time.monotonic() + limit
        delay = 0.05
        while time.monotonic() < deadline:
            health = self.health(timeout=1.0)
            if health is not None:
                return health
            if proc is not None and proc.poll() is not None:
                if self.pid() not in (None, proc.pid):
                    # ours lost the race to a daemon another client (a hook) started, one
                    # too busy starting to answer yet: wait for that one instead
                    proc = None
                    continue
                reason = self.last_error() or f"it exited with status {proc.returncode}"
                raise DaemonError(
                    f"the memory daemon could not start: {reason}",
                    f"see {self.run_dir / 'daemon.log'}",
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        raise DaemonError(
            f"the memory daemon did not answer within {limit:g} s "
            f"(last error: {self.last_error() or 'none logged'})",
            f"see {self.run_dir / 'daemon.log'}; `memory-agent stop` and retry",
        )

    def stop(self, wait: bool = True, timeout: float = 30.0) -> tuple[bool, int | None]:
        """Ask the daemon to finish its work and exit; with `wait`, until its process is gone
        (at most `timeout` s). Returns (whether one was running, its pid)."""
        pid = self.pid()
        try:
            _, _, data = self.request("POST", "/admin/stop", timeout=5.0)
            pid = json.loads(data).get("pid", pid)
        except (OSError, http.client.HTTPException, ValueError):
            if pid is None:
                return False, None
            # A process holds the pid file but does not answer: ask it with a signal.
            os.kill(pid, signal.SIGTERM)
        if wait and pid is not None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and pid_alive(pid):
                time.sleep(0.05)
            if pid_alive(pid):
                raise DaemonError(
                    f"the daemon (pid {pid}) did not exit within {timeout:.0f} s",
                    f"it may be finishing a long write; wait, or `kill {pid}`",
                )
        return True, pid

    # -- MCP over HTTP --------------------------------------------------------------------
    def post_mcp(
        self,
        payload: bytes,
        protocol_version: str | None = None,
        timeout: float | None = None,
        caller: str | None = None,
        where: str | None = None,
        endpoint: Endpoint | None = None,
    ) -> tuple[int, bytes]:
        """POST one MCP message to the daemon, or to `endpoint` (one of its reader processes,
        ADR 0028); (HTTP status, body). `NotConnected`: nothing accepted it, nothing was sent."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if protocol_version:
            headers["MCP-Protocol-Version"] = protocol_version
        if caller:
            headers[CALLER_HEADER] = caller
        if where:
            from urllib.parse import quote

            headers[WHERE_HEADER] = quote(where, safe="/")
        if endpoint is None:
            idle = self._idle
        else:
            idle = self._idle_of.get(endpoint.where)
            if idle is None:
                idle = self._idle_of.setdefault(endpoint.where, _Idle())
        conn = idle.take()
        if conn is not None:
            conn.timeout = timeout or self.timeout
            conn.sock.settimeout(conn.timeout)
            try:
                conn.request("POST", "/mcp", body=payload, headers=headers)
            except OSError:
                # The daemon closed it (stopped, or replaced) before the message went out: a
                # failed send delivered nothing, so it goes out again on a new connection.
                conn.close()
                conn = None
        if conn is None:
            target = endpoint or read_endpoint(self.run_dir)
            conn = _DaemonConnection(target, timeout or self.timeout)
            conn.request("POST", "/mcp", body=payload, headers=headers)
        try:
            resp = conn.getresponse()
            status, data = resp.status, resp.read()
        except BaseException:
            conn.close()
            raise
        if conn.sock is not None:  # not closed by a `Connection: close` reply
            idle.put(conn)
        return status, data

    def call_tool(
        self, name: str, arguments: dict[str, Any], where: str | None = None
    ) -> dict[str, Any]:
        """Call one tool (starting the daemon if needed); its structured result. Refusals
        raise `ToolCallError` with the daemon's code, message and fix. `where`: the directory
        whose project the call is made from (None: the current directory)."""
        surrogate = lone_surrogate(arguments)
        if surrogate is not None:  # the daemon could not even parse it: refuse it here
            raise Invalid(
                f"{surrogate[0]}: contains a lone surrogate (U+{ord(surrogate[1]):04X}), which "
                "is not a character",
                "pass valid Unicode text (UTF-8)",
            )
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        payload = json.dumps(message).encode()
        if len(payload) > MAX_MESSAGE_BYTES:
            raise too_large(len(payload))
        self.ensure()
        try:
            status, data = self.post_mcp(
                payload,
                PROTOCOL_VERSION,
                caller=self.caller,
                where=where or os.getcwd(),
            )
        except (OSError, http.client.HTTPException) as exc:
            raise DaemonError(
                f"the daemon stopped answering during {name} ({exc})",
                "check with `memory-agent status`; a write may or may not have happened "
                "(retry it with the same --request-id to be safe)",
            ) from exc
        if status == 413:
            raise too_large(len(payload))
        try:
            reply = json.loads(data)
        except ValueError:
            raise DaemonError(
                f"the daemon answered HTTP {status} without JSON: {data[:200]!r}",
                f"see {self.run_dir / 'daemon.log'}",
            ) from None
        if "error" in reply:
            raise DaemonError(f"protocol error from the daemon: {reply['error']}")
        result = reply["result"]
        if result.get("isError"):
            info = from_wire(result.get("structuredContent"))
            if info is None:
                text = " ".join(c.get("text", "") for c in result.get("content", []))
                info = ErrorInfo("internal", text)
            raise ToolCallError(info.code, info.message, info.fix)
        if result.get("structuredContent") is not None:
            return result["structuredContent"]
        return json.loads(result["content"][0]["text"])

    def admin(
        self, action: str, method: str = "POST", payload: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One admin route; `payload` is sent as its JSON body."""
        self.ensure()
        body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode()
        headers = None if payload is None else {"Content-Type": "application/json"}
        try:
            status, _, data = self.request(method, f"/admin/{action}", body, headers)
        except (OSError, http.client.HTTPException) as exc:
            raise DaemonError(
                f"the daemon stopped answering during {action.split('?')[0]} ({exc})",
                f"see {self.run_dir / 'daemon.log'}",
            ) from exc
        try:
            reply = json.loads(data)
        except ValueError:
            raise DaemonError(
                f"the daemon answered HTTP {status} without JSON: {data[:200]!r}",
                f"see {self.run_dir / 'daemon.log'}",
            ) from None
        if status != 200:
            info = from_wire(reply) or ErrorInfo("internal", f"HTTP {status}: {reply}")
            raise ToolCallError(info.code, info.message, info.fix)
        return reply


def detached() -> dict[str, Any]:
    """Popen's arguments for a process that outlives its starter and its terminal: a new
    session on POSIX (no SIGHUP, no job control), on Windows a detached process in its own
    group (no console, no Ctrl-C from the agent's)."""
    if sys.platform == "win32":
        flags = getattr(subprocess, "DETACHED_PROCESS", 0x8)
        flags |= getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)
        return {"creationflags": flags}
    return {"start_new_session": True}


def too_large(size: int) -> Invalid:
    return Invalid(
        f"the request is {size:,} bytes; the memory accepts at most {MAX_MESSAGE_BYTES:,} "
        "bytes per message",
        "shorten it: a body holds at most 100,000 characters, a query 2,000",
    )
