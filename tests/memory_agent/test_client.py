"""`DaemonClient`'s MCP calls keep their connection for the next call, and never send a message
twice: a kept connection the daemon closed meanwhile gets the message sent again on a new one.
A stand-in daemon (HTTP/1.1 on a Unix socket, as uvicorn serves it) counts what arrives."""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from memory_agent.client import DaemonClient


class StandIn(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, close_after_reply: bool):
        self.connections = 0
        self.messages: list[dict] = []
        self.close_after_reply = close_after_reply
        self.closed = threading.Event()
        super().__init__(str(path), Handler)

    def shutdown_request(self, request) -> None:
        super().shutdown_request(request)  # the socket is closed now
        self.closed.set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like uvicorn
    server: StandIn

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.messages.append(message)
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        # a daemon that stops after this reply: the connection ends without `Connection: close`
        self.close_connection = self.server.close_after_reply

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(close_after_reply: bool = False) -> tuple[StandIn, DaemonClient]:
        (tmp_path / "run").mkdir(exist_ok=True)
        server = StandIn(tmp_path / "run" / "daemon.sock", close_after_reply)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, DaemonClient(tmp_path, timeout=10)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def message(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode()


def test_back_to_back_calls_share_one_connection(serve):
    server, client = serve()
    for n in range(5):
        assert client.post_mcp(message(n))[0] == 200
    assert server.connections == 1
    assert [m["id"] for m in server.messages] == [0, 1, 2, 3, 4]


def test_a_kept_connection_the_daemon_closed_gets_the_message_sent_once_on_a_new_one(serve):
    server, client = serve(close_after_reply=True)
    assert client.post_mcp(message(1))[0] == 200
    assert server.closed.wait(5)  # the stand-in has closed its end of the kept connection
    status, data = client.post_mcp(message(2))
    assert status == 200 and json.loads(data)["id"] == 2
    assert server.connections == 2
    assert [m["id"] for m in server.messages] == [1, 2]  # each message arrived exactly once


def test_concurrent_calls_each_get_their_own_reply(serve):
    server, client = serve()
    replies: dict[int, int] = {}

    def call(n: int) -> None:
        replies[n] = json.loads(client.post_mcp(message(n))[1])["id"]

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert replies == {n: n for n in range(8)}
    assert sorted(m["id"] for m in server.messages) == list(range(8))
