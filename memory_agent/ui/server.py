"""`memory-agent ui`: serve the memory browser on 127.0.0.1 and print its URL (with the token)."""

from __future__ import annotations

import secrets
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from memory_agent.errors import DaemonError

__all__ = ["serve"]


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise DaemonError(
            f"cannot listen on 127.0.0.1:{port} ({exc.strerror})",
            "choose another --port, or 0 for any free port",
        ) from None
    sock.listen(128)
    return sock


def serve(home: Path, port: int = 8780, *, ready: Callable[[str, int], None]) -> int:
    """Serve until Ctrl-C or SIGTERM; `ready(url, port)` once listening (the CLI prints it)."""
    import uvicorn

    from memory_agent.client import DaemonClient
    from memory_agent.kb.home import Home
    from memory_agent.ui.app import create_app

    Home(home).require()
    DaemonClient(home).ensure()  # the browser reads through the daemon
    sock = _bind(port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    app = create_app(home, token=token, port_of=lambda: bound)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:  # exit 0 on SIGTERM and Ctrl-C
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    server = Server(uvicorn.Config(app, log_config=None, access_log=False))
    ready(f"http://127.0.0.1:{bound}/?token={token}", bound)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
