"""End to end: real proxies (subprocesses speaking JSON-RPC on stdio) and a real daemon - one daemon
however many proxies start it, a killed daemon restarted, a write in flight when the daemon dies,
SIGTERM, answers while the model loads, a daemon of another version."""

import http.client
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.endpoint import read_endpoint
from memory_agent.index.memory import Memory
from memory_agent.serve.tools import TOOL_NAMES
from tests.memory_agent.mcp_helpers import (
    ProxySession,
    daemon_pids,
    env_for,
    kill_daemon,
    structured,
)


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def wait_healthy(home, timeout=60.0) -> DaemonClient:
    """A client for `home` once a daemon started by hand answers its health route."""
    client = DaemonClient(home)
    deadline = time.monotonic() + timeout
    while client.health() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.health() is not None, "the daemon did not come up"
    return client


def test_a_whole_session_through_the_proxy(home, shared_cache):
    s = ProxySession(home, shared_cache)
    try:
        init = s.initialize()
        assert init["result"]["serverInfo"]["name"] == "memory-agent"
        tools = {t["name"]: t for t in s.send("tools/list")["result"]["tools"]}
        assert (
            set(tools)
            == set(TOOL_NAMES)
            >= {
                "memory_search",
                "memory_get",
                "memory_add",
                "memory_supersede",
                "memory_archive",
                "memory_index_status",
            }
        )
        assert tools["memory_add"]["description"].startswith("Remember something new")
        added = structured(
            s.call(
                "memory_add",
                title="Proxy sessions share one daemon",
                body="Ten agent sessions start ten proxies and one daemon.",
                type="fact",
                tags=["daemon"],
                request_id="e2e-1",
            )
        )
        assert added["status"] == "created" and added["commit"] and added["generation"]
        hits = structured(
            s.call("memory_search", query="how many daemons for ten sessions", limit=3)
        )["hits"]
        assert hits[0]["id"] == added["id"]  # read your write
        got = structured(s.call("memory_get", id=added["id"]))
        assert got["tags"] == ["daemon"] and got["writable"] is True
        preview = structured(
            s.call(
                "memory_supersede",
                old_id=added["id"],
                title="All proxies of a home share one daemon",
                body="N sessions: N proxies of a few MB, one daemon.",
            )
        )
        assert preview["status"] == "preview" and len(preview["preview"]) == 2
        done = structured(
            s.call(
                "memory_supersede",
                old_id=added["id"],
                title="All proxies of a home share one daemon",
                body="N sessions: N proxies of a few MB, one daemon.",
                confirm=True,
            )
        )
        assert done["status"] == "superseded"
        # legacy-jenkins-url is archived in the demo KB: a tool error the model can read
        error = s.call("memory_archive", id="legacy-jenkins-url", reason="x", confirm=True)
        assert error["isError"] and "already archived" in error["content"][0]["text"]
        archived = structured(
            s.call("memory_archive", id="branch-naming", reason="moved to the wiki", confirm=True)
        )
        assert archived["status"] == "archived"
        status = structured(s.call("memory_index_status"))
        assert status["consistent"] and status["pending"] == 0
        assert status["entries"] == 81  # 79 demo + added + its successor
        s.proc.stdin.write("{not json\n")  # a broken line still gets an answer, with id null
        s.proc.stdin.flush()
        broken = json.loads(s._replies.get(timeout=30))
        assert broken["id"] is None and broken["error"]["code"] == -32700
        unknown = s.call("memory_get", id="no-such-entry")
        assert unknown["isError"] and "memory_search" in unknown["content"][0]["text"]
    finally:
        s.close()
    # the usage log names the MCP client that asked (from its initialize clientInfo)
    callers = {
        json.loads(line).get("caller")
        for f in (home / "events").glob("*.jsonl")
        for line in f.read_text().splitlines()
        if '"kind": "query"' in line
    }
    assert callers == {"memory-agent-session/1"}
    # nothing but JSON-RPC ever reached the proxy's stdout
    assert s.lines and all(json.loads(line)["jsonrpc"] == "2.0" for line in s.lines)


def test_the_socket_is_owner_only_and_a_second_daemon_refuses(home, shared_cache):
    health = DaemonClient(home).ensure()
    endpoint = read_endpoint(home / "run")
    if endpoint.kind == "unix":
        sock = home / "run" / "daemon.sock"
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    else:  # the portable run (TCP): the token's file is owner-only, and a request needs it
        assert stat.S_IMODE((home / "run" / "daemon.json").stat().st_mode) == 0o600
        conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 401
        conn.close()
    assert stat.S_IMODE((home / "run").stat().st_mode) == 0o700
    second = subprocess.run(
        [sys.executable, "-m", "memory_agent", "daemon", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env_for(home, shared_cache),
        timeout=60,
    )
    assert second.returncode == 2
    assert f"already running for this home (pid {health['pid']})" in second.stderr
    assert second.stdout == ""


def test_ten_proxies_started_at_once_make_exactly_one_daemon(home, shared_cache):
    sessions = []
    barrier = threading.Barrier(10)

    def start():
        barrier.wait()
        sessions.append(ProxySession(home, shared_cache))

    threads = [threading.Thread(target=start) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        replies = [s.initialize() for s in sessions]
        assert all("result" in r for r in replies)
        assert len(daemon_pids(home)) == 1
        pids = {structured(s.call("memory_index_status"))["generation"] for s in sessions}
        assert len(pids) == 1
    finally:
        for s in sessions:
            s.close()
    assert len(daemon_pids(home)) == 1


def test_a_killed_daemon_is_restarted_by_the_next_call(home, shared_cache):
    s = ProxySession(home, shared_cache)
    try:
        s.initialize()
        DaemonClient(home).admin("refresh")  # wait for the model and the first index
        assert structured(s.call("memory_index_status"))["consistent"]
        [pid] = daemon_pids(home)
        kill_daemon(pid)
        status = structured(s.call("memory_index_status"))  # read-only: retried after restart
        assert status["entries"] == 79
        [new_pid] = daemon_pids(home)
        assert new_pid != pid
    finally:
        s.close()


def test_back_to_back_calls_check_the_daemons_health_once_not_per_call(home, shared_cache):
    """The proxy trusts a daemon it saw healthy for a moment (`HEALTH_TRUST_S`): a burst of
    calls costs one HTTP request each, not a health request and the call."""
    import io

    from memory_agent.proxy import HEALTH_TRUST_S, Proxy

    class Counting(DaemonClient):
        checks = 0

        def health(self, timeout: float = 2.0):
            Counting.checks += 1
            return super().health(timeout)

    out = io.StringIO()
    proxy = Proxy(Counting(home), out=out)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    proxy.handle(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    DaemonClient(home).admin("refresh")  # the model and the first index, before the burst
    Counting.checks = 0
    started = time.monotonic()
    for i in range(1, 21):
        call = {"name": "memory_search", "arguments": {"query": f"daemon restart {i}"}}
        proxy.handle(
            json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
        )
    elapsed = time.monotonic() - started
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in replies] == list(range(21))
    assert not any(r["result"].get("isError") for r in replies[1:])
    assert Counting.checks <= elapsed / HEALTH_TRUST_S + 1, (Counting.checks, elapsed)


def test_a_daemon_stopped_between_calls_gets_the_next_write_sent_again(home, shared_cache):
    """Within the trust window the proxy does not ask for health first: a daemon gone since
    the last call is found at connect, where nothing was sent, so even a write without a
    request_id is sent to a fresh daemon rather than reported as maybe written."""
    s = ProxySession(home, shared_cache)
    try:
        s.initialize()
        DaemonClient(home).admin("refresh")
        assert structured(s.call("memory_index_status"))["consistent"]
        [pid] = daemon_pids(home)
        DaemonClient(home).stop(wait=True)
        added = structured(
            s.call("memory_add", title="Sent again to a new daemon", body="No request id.")
        )
        assert added["status"] == "created"
        [new_pid] = daemon_pids(home)
        assert new_pid != pid
    finally:
        s.close()


def _faulty_daemon(home, cache):
    """A daemon that SIGKILLs itself in the middle of its next write (after the commit)."""
    for pid in daemon_pids(home):
        kill_daemon(pid)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "daemon", "--home", str(home)],
        env=env_for(home, cache, MEMORY_AGENT_FAULT="after-commit"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(home)
    return proc


def test_a_write_in_flight_when_the_daemon_dies_carries_over_only_with_its_request_id(
    home, shared_cache
):
    s = ProxySession(home, shared_cache)
    try:
        s.initialize()
        DaemonClient(home).admin("refresh")
        _faulty_daemon(home, shared_cache)
        reply = s.send(
            "tools/call",
            {
                "name": "memory_add",
                "arguments": {
                    "title": "Written as the daemon died",
                    "body": "No request id on this one.",
                },
            },
        )
        error = reply["result"]["structuredContent"]["error"]
        assert reply["result"]["isError"] and error["code"] == "daemon"
        assert "request_id" in error["fix"]
        # it was committed before the crash; the next daemon finishes it once its model is up
        assert DaemonClient(home).admin("refresh")["pending"] == 0
        hits = structured(s.call("memory_search", query="written as the daemon died"))["hits"]
        assert hits[0]["id"] == "written-as-the-daemon-died"
        _faulty_daemon(home, shared_cache)
        carried = structured(
            s.call(
                "memory_add",
                title="Carried over by its request id",
                body="The proxy retried this after the restart.",
                request_id="carry-1",
            )
        )
        assert carried["status"] == "created" and carried["id"] == "carried-over-by-its-request-id"
        assert carried["commit"]
        again = structured(
            s.call(
                "memory_add",
                title="Carried over by its request id",
                body="The proxy retried this after the restart.",
                request_id="carry-1",
            )
        )
        assert again == carried
        assert structured(s.call("memory_index_status"))["pending"] == 0
    finally:
        s.close()


def test_sigterm_releases_socket_and_lock_and_exits_zero(home, shared_cache):
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "daemon", "--home", str(home), "--foreground"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(home, shared_cache),
    )
    client = wait_healthy(home)
    assert client.admin("refresh")["consistent"]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert out == ""  # nothing on stdout, even in the foreground
    assert not (home / "run" / "daemon.sock").exists()
    assert not (home / "run" / "daemon.pid").exists()
    # the locks are free: a new daemon starts
    assert client.ensure()["pid"] != proc.pid


def test_search_answers_from_the_lexical_channel_while_the_model_loads(home, shared_cache):
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")  # index built (the model is loaded now)
    client.stop(wait=True)
    health = client.ensure()  # a fresh daemon: no model yet
    assert health["model_loaded"] is False
    reply = client.call_tool("memory_search", {"query": "jieba 词典加载 kctl 启动慢"})
    assert reply["degraded"].startswith("model loading")
    assert reply["hits"] and reply["hits"][0]["id"] == "jieba-dictionary-load-slows-cli"
    deadline = time.monotonic() + 120
    while not client.health()["model_loaded"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "degraded" not in client.call_tool("memory_search", {"query": "jieba"})


def test_a_daemon_of_another_version_is_replaced(home, shared_cache):
    old = (
        "import memory_agent; memory_agent.__version__ = '0.0.1-old'  # before any import of it\n"
        "from memory_agent.serve.daemon import run_daemon\n"
        f"run_daemon({str(home)!r})\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", old],
        env=env_for(home, shared_cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = wait_healthy(home)
    assert client.health()["version"] == "0.0.1-old"
    health = client.ensure()
    assert health["version"] != "0.0.1-old" and health["pid"] != proc.pid
    assert proc.wait(timeout=30) == 0
