"""Where a home's daemon listens, and how a client connects to it, on every OS.

Two transports, one per daemon (the `transport` setting; `auto` picks `unix` where the OS has
Unix sockets, else `tcp` - Windows):

- `unix`: the socket `<home>/run/daemon.sock`, born 0600 in a 0700 folder: only its owner
  connects.
- `tcp`: 127.0.0.1 on a free port. The daemon writes `<home>/run/daemon.json`
  (`{"transport": "tcp", "port": N, "token": T, "pid": P}`, 0600) once it listens, and refuses
  every request that does not carry the token in the `X-Memory-Agent-Token` header (another
  local user can reach the port, not read the file). A file left by a daemon that died names a
  port nobody serves, or one that refuses the token: clients then see no daemon and start one,
  which writes the file anew.

A client reads `daemon.json` when it exists, else uses the socket. Standard library only, and
light: the hook command connects through here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

__all__ = [
    "DAEMON_JSON",
    "SOCKET",
    "TOKEN_HEADER",
    "Endpoint",
    "connect",
    "read_endpoint",
    "transport_for",
    "write_endpoint",
]

SOCKET = "daemon.sock"
DAEMON_JSON = "daemon.json"
TOKEN_HEADER = "X-Memory-Agent-Token"


def transport_for(setting: str) -> str:
    """`unix` or `tcp` for the `transport` setting (`auto`: unix where the OS has it)."""
    setting = (setting or "auto").strip().lower()
    if setting == "auto":
        return "unix" if hasattr(socket, "AF_UNIX") else "tcp"
    if setting not in ("unix", "tcp"):
        from memory_agent.errors import ConfigError

        raise ConfigError(
            f"transport: {setting!r} is not one of auto, unix, tcp",
            "set `transport` in config.toml (or MEMORY_AGENT_TRANSPORT) to one of those",
        )
    if setting == "unix" and not hasattr(socket, "AF_UNIX"):
        from memory_agent.errors import ConfigError

        raise ConfigError(
            "transport: this OS has no Unix sockets", 'set `transport = "tcp"` (or auto)'
        )
    return setting


class Endpoint:
    """How to reach one daemon (or one of its reader processes, ADR 0028): a socket in
    `run_dir` (`socket`: its name), or a port and its token."""

    def __init__(
        self,
        run_dir: Path,
        port: int | None = None,
        token: str | None = None,
        socket: str = SOCKET,
    ):
        self.run_dir = Path(run_dir)
        self.port = port
        self.token = token
        self.socket = socket

    @property
    def kind(self) -> str:
        return "tcp" if self.port is not None else "unix"

    @property
    def where(self) -> str:
        """For messages: the socket's path or 127.0.0.1:port."""
        return (
            f"127.0.0.1:{self.port}" if self.port is not None else str(self.run_dir / self.socket)
        )

    def headers(self) -> dict[str, str]:
        return {TOKEN_HEADER: self.token} if self.token else {}


def read_endpoint(run_dir: Path) -> Endpoint:
    """The daemon's endpoint as its `daemon.json` says (tcp), else the Unix socket."""
    run_dir = Path(run_dir)
    try:
        data = json.loads((run_dir / DAEMON_JSON).read_text(encoding="utf-8"))
        if data.get("transport") == "tcp":
            return Endpoint(run_dir, int(data["port"]), str(data["token"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return Endpoint(run_dir)


def write_endpoint(run_dir: Path, port: int, token: str) -> None:
    """The daemon, once it listens on `port`: the file clients read, owner-only, whole."""
    path = Path(run_dir) / DAEMON_JSON
    tmp = path.with_name(f"{DAEMON_JSON}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"transport": "tcp", "port": port, "token": token, "pid": os.getpid()}, fh)
    os.replace(tmp, path)


def connect(endpoint: Endpoint, timeout: float) -> socket.socket:
    """A connected socket to the daemon; OSError when nothing accepts."""
    if endpoint.port is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        address: object = ("127.0.0.1", endpoint.port)
    else:
        if not hasattr(socket, "AF_UNIX"):
            raise ConnectionRefusedError(f"no daemon.json in {endpoint.run_dir}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address = str(endpoint.run_dir / endpoint.socket)
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock.connect(address)
            return sock
        except BlockingIOError:
            # a Unix socket whose queue of connections is full answers EAGAIN at once (with a
            # timeout set): a busy daemon, not a missing one - wait for a place in the queue
            if time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            sock.close()
            raise
        except OSError:
            sock.close()
            raise
