"""`DaemonClient`: its MCP calls keep their connection for the next call and never send a message
twice (a stand-in daemon, HTTP/1.1 on a Unix socket as uvicorn serves it, counts what arrives); a
client that loses the start race waits for the winner; Ctrl-C while it waits for the spawn lock
exits 130; a daemon that dies mid-call is said so. (Failure modes from issue 9.)

(The demo home `home` is the memory_agent conftest's.)"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from memory_agent.client import DaemonClient
from memory_agent.endpoint import connect, read_endpoint
from memory_agent.files import lock_backend
from tests.memory_agent.mcp_helpers import daemon_pids, env_for


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


def test_a_full_queue_of_connections_is_waited_for_not_taken_for_no_daemon(tmp_path):
    """A Unix socket whose queue of pending connections is full answers EAGAIN at once; many
    sessions calling together (the suite under load) got 'no daemon ... Resource temporarily
    unavailable'. The client waits for a place while its timeout lasts."""
    (tmp_path / "run").mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "run" / "daemon.sock"))
    listener.listen(0)
    queued = []
    try:
        while True:  # fill the queue: nothing accepts yet
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(0.5)
            queued.append(s)
            try:
                s.connect(str(tmp_path / "run" / "daemon.sock"))
            except BlockingIOError:
                break
        accepted = []
        listener.settimeout(5)

        def accept_later() -> None:
            time.sleep(0.3)
            while len(accepted) < len(queued):  # those queued, and the client's
                accepted.append(listener.accept()[0])

        acceptor = threading.Thread(target=accept_later, daemon=True)
        acceptor.start()
        sock = connect(read_endpoint(tmp_path / "run"), timeout=10)
        sock.close()
        acceptor.join(10)
        for s in accepted:
            s.close()
    finally:
        for s in queued:
            s.close()
        listener.close()


def wait_for(condition, what, timeout=60.0):
    """Poll `condition` until it is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.02)


def blocked_on_flock(pid):
    """Whether process `pid` waits for a flock (a `->` line of /proc/locks names it)."""
    for line in open("/proc/locks").read().splitlines():
        fields = line.split()
        if "->" in fields and fields[fields.index("->") + 4] == str(pid):
            return True
    return False


@pytest.mark.skipif(
    lock_backend() != "flock",
    reason="holds the lock with a raw flock, as an older version did; the portable run locks "
    "with lockf, which Linux keeps apart from flock",
)
def test_ctrl_c_while_waiting_exits_130_without_a_traceback(home, shared_cache):
    (home / "run").mkdir(exist_ok=True)
    with open(home / "run" / "spawn.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the CLI waits here to start the daemon
        proc = subprocess.Popen(
            [sys.executable, "-m", "memory_agent", "status", "--home", str(home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(home, shared_cache),
            # Ctrl-C as a terminal sends it: run from a shell's background job, the suite
            # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        wait_for(lambda: blocked_on_flock(proc.pid), "the CLI waits for the spawn lock")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err


def test_the_cli_says_so_when_the_daemon_dies_mid_call(home, shared_cache):
    env = env_for(home, shared_cache, MEMORY_AGENT_FAULT="pause-rebuild")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "rebuild", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    marker = home / "run" / "fault-pause-rebuild"
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Traceback" not in err
    assert "daemon: the daemon stopped answering during rebuild" in err


@pytest.mark.skipif(
    lock_backend() != "flock",
    reason="holds the lock with a raw flock, as an older version did; the portable run locks "
    "with lockf, which Linux keeps apart from flock",
)
def test_a_client_that_loses_the_start_race_waits_for_the_winner(home, shared_cache, monkeypatch):
    """Regression: a hook starts the daemon, which holds the home but does not answer yet;
    a client's own spawn then exits at once ("already running") - the client must wait for
    the daemon that won, not fail with "could not start"."""
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    run = home / "run"
    run.mkdir(exist_ok=True)
    winner = open(run / "daemon.lock", "a+")  # the winner: holds the lock, not answering yet
    fcntl.flock(winner, fcntl.LOCK_EX)
    (run / "daemon.pid").write_text(str(os.getpid()))
    outcome: dict = {}

    class Client(DaemonClient):  # the real client; it only lets the test see its steps
        spawned: list = []
        polls = 0

        def spawn(self):
            self.spawned.append(super().spawn())
            return self.spawned[-1]

        def health(self, timeout=2.0):
            Client.polls += 1
            return super().health(timeout=timeout)

    def ensure():
        try:
            outcome["health"] = Client(home).ensure()
        except Exception as exc:  # noqa: BLE001
            outcome["error"] = exc

    waiting = threading.Thread(target=ensure)
    waiting.start()
    # the client's spawn exits with "already running"; then the client looks again, twice
    wait_for(lambda: Client.spawned and Client.spawned[0].poll() is not None, "the spawn exits")
    seen = Client.polls
    wait_for(lambda: Client.polls >= seen + 2 or "error" in outcome, "the client polls again")
    assert "error" not in outcome, outcome.get("error")
    # the winner gets going: the lock passes to a real daemon, which answers
    (run / "daemon.pid").unlink()
    fcntl.flock(winner, fcntl.LOCK_UN)
    winner.close()
    DaemonClient(home).spawn()
    waiting.join(timeout=120)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["health"]["version"]
