"""Where the daemon listens (`memory_agent.endpoint`): its Unix socket, born 0600 (a stale one
from a dead daemon replaced, anything else in the way refused), or 127.0.0.1 on a free port
with a token written to run/daemon.json and checked on every request (`TokenGate`)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from memory_agent.endpoint import SOCKET, TOKEN_HEADER, transport_for, write_endpoint
from memory_agent.errors import DaemonError

__all__ = ["TokenGate", "listen"]


def listen(
    run_dir: Path, transport: str, *, name: str = SOCKET, token: str | None = None
) -> tuple[socket.socket, str | None, str]:
    """The daemon's listening socket for its transport (`memory_agent.endpoint`): (the socket,
    the token clients must send - None for the Unix socket, whose permissions are the check -,
    where it listens, for the log). A reader process (ADR 0028) listens on the socket `name`,
    or over TCP with the daemon's `token`, and writes no daemon.json."""
    if transport_for(transport) == "unix":
        path = run_dir / name
        return _bind_socket(path), None, str(path)
    import secrets

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind(("127.0.0.1", 0))
    except OSError as exc:
        sock.close()
        raise DaemonError(
            f"cannot listen on 127.0.0.1: {exc.strerror}",
            "check that the loopback interface is up and a local port is free",
        ) from exc
    sock.listen(128)
    port = sock.getsockname()[1]
    if token is None:  # the daemon's: the file its clients read
        token = secrets.token_urlsafe(32)
        write_endpoint(run_dir, port, token)
    return sock, token, f"127.0.0.1:{port}"


class TokenGate:
    """Every request over TCP carries the token of run/daemon.json, or is refused (401)."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode()
        self.header = TOKEN_HEADER.lower().encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            import hmac

            given = next((v for k, v in scope["headers"] if k == self.header), b"")
            if not hmac.compare_digest(given, self.token):
                body = json.dumps(
                    {
                        "error": {
                            "code": "invalid",
                            "message": "this daemon answers only requests with its token",
                            "fix": "connect through memory-agent (it reads run/daemon.json)",
                        }
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _bind_socket(path: Path) -> socket.socket:
    try:
        if path.is_symlink() or path.is_socket():
            path.unlink()  # stale: we hold the daemon lock, so nobody else is serving on it
        elif path.exists():
            raise DaemonError(
                f"cannot serve on {path}: something that is not a socket is in the way",
                f"move {path} away (memory-agent only ever creates a socket there)",
            )
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born 0600: no window where others could connect
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
    except OSError as exc:
        raise DaemonError(
            f"cannot bind the socket {path}: {exc.strerror}",
            f"check that {path.parent} is a writable folder and the path is not too long",
        ) from exc
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock
