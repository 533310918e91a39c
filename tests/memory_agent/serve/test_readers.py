"""Reader processes (ADR 0028), end to end: a real daemon with `read_processes` set starts
real `memory-agent reader` processes; the sessions of real proxies share their searches and
gets between the daemon and its readers, and everything else goes to the daemon. What is held: a read answered by a reader sees
every write the daemon replied to; a reader killed mid-session costs the session nothing (the
daemon answers, then the restarted reader); the usage each process logs reaches the others'
ranking; the readers stop with the daemon, even one that dies."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient, get_json
from memory_agent.endpoint import Endpoint
from memory_agent.index.memory import Memory
from memory_agent.procs import pid_alive
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids, structured

HEALTH_TRUST_S = 2.0  # the proxy's (`proxy.HEALTH_TRUST_S`): a new reader is picked after it


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    (home / "config.toml").write_text('embedder = "minilm"\nread_processes = 1\n')
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def serving_reader(home: Path, other_than: int | None = None, timeout: float = 120.0) -> dict:
    """The daemon's reader once it serves (a process other than `other_than`)."""
    client = DaemonClient(home)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for r in (client.health() or {}).get("readers", []):
            if r.get("state") == "serving" and r.get("pid") != other_than:
                return r
        time.sleep(0.1)
    raise AssertionError(f"no reader served within {timeout:g} s: {client.log_tail(30)}")


def reader_endpoint(home: Path, reader: dict, token: bool = True) -> Endpoint:
    """Where a reader listens: its socket, or (the tcp transport: the portable run, Windows)
    its port, with the daemon's token unless `token` is False."""
    if "socket" in reader:
        return Endpoint(home / "run", socket=reader["socket"])
    key = json.loads((home / "run" / "daemon.json").read_text())["token"] if token else None
    return Endpoint(home / "run", int(reader["port"]), key)


def reader_health(home: Path, reader: dict) -> dict:
    found = get_json(reader_endpoint(home, reader), "/health")
    assert found is not None, "the reader does not answer its health route"
    return found


def searches(home: Path, reader: dict) -> tuple[int, int]:
    """(the daemon's searches, the reader's) answered so far."""
    return DaemonClient(home).health()["searches"], reader_health(home, reader)["searches"]


def session_on(home: Path, cache: Path, reader: bool) -> ProxySession:
    """A proxy session whose reads go to the reader (`reader`) or to the daemon: with one
    reader, the proxy's pick among [daemon, reader] is its pid modulo 2."""
    for _ in range(20):
        s = ProxySession(home, cache)
        if s.pid % 2 == int(reader):
            return s
        s.close()
    raise AssertionError("no proxy pid of the parity asked in 20 starts")


@contextlib.contextmanager
def reading(home: Path, cache: Path, reader: bool = True):
    """(A session whose reads go to the reader, or to the daemon; the reader) once the
    session's proxy knows the reader serves."""
    s = session_on(home, cache, reader)
    try:
        s.initialize()
        serving = serving_reader(home)
        time.sleep(HEALTH_TRUST_S + 0.1)  # the proxy's next health check lists it
        yield s, serving
    finally:
        s.close()


def test_the_sessions_share_the_reads_between_the_daemon_and_its_reader(home, shared_cache):
    with reading(home, shared_cache, reader=False) as (on_daemon, reader):
        before = searches(home, reader)
        assert structured(on_daemon.call("memory_search", query="release process"))["hits"]
        assert searches(home, reader) == (before[0] + 1, before[1])  # the daemon answered
        # `memory-agent status` names each reader, with what its own health says
        (listed,) = DaemonClient(home).call_tool("memory_index_status", {})["readers"]
        assert listed["state"] == "serving" and listed["pid"] == reader["pid"]
        assert listed["searches"] == before[1] and listed["seen"] >= 0
        shown = subprocess.run(
            [sys.executable, "-m", "memory_agent", "status", "--home", str(home)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"reader 0: serving (pid {reader['pid']}" in shown, shown


def test_a_sessions_reads_go_to_the_reader_and_see_every_write(home, shared_cache):
    with reading(home, shared_cache) as (s, reader):
        before = searches(home, reader)
        found = structured(s.call("memory_search", query="how do we run database migrations"))
        assert found["hits"], found
        assert searches(home, reader) == (before[0], before[1] + 1)  # the reader answered
        added = structured(
            s.call(
                "memory_add",
                title="Readers replay the daemon's changes before each search",
                body="A quokka-shaped marker: the reader follows the segment's seq.",
                type="fact",
            )
        )
        # the write went to the daemon; the very next search, in the reader, sees it
        hits = structured(s.call("memory_search", query="quokka-shaped marker reader seq"))["hits"]
        assert hits and hits[0]["id"] == added["id"], hits
        got = structured(s.call("memory_get", id=added["id"]))
        assert got["title"] == "Readers replay the daemon's changes before each search"
        assert searches(home, reader)[1] == before[1] + 2
        assert reader_health(home, reader)["seen"] >= 1  # the daemon's change it replayed
        # a write asked of the reader directly (not through the proxy) is refused, with the fix
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "memory_add", "arguments": {"title": "t", "body": "b"}},
        }
        code, data = DaemonClient(home).post_mcp(
            json.dumps(body).encode(), endpoint=reader_endpoint(home, reader)
        )
        refused = json.loads(data)["result"]
        assert code == 200 and refused["isError"], refused
        assert refused["structuredContent"]["error"]["code"] == "invalid"
        assert "memory-agent proxy" in refused["structuredContent"]["error"]["fix"]


def test_a_killed_reader_costs_the_session_nothing(home, shared_cache):
    with reading(home, shared_cache) as (s, reader):
        structured(s.call("memory_search", query="release process"))
        daemon_before = DaemonClient(home).health()["searches"]
        os.kill(reader["pid"], signal.SIGKILL)
        while pid_alive(reader["pid"]):
            time.sleep(0.02)
        # the session's next read: the reader is gone, the daemon answers it
        assert structured(s.call("memory_search", query="release process"))["hits"]
        assert DaemonClient(home).health()["searches"] == daemon_before + 1
        # started again at once (its first exit); the proxy takes it at its next health check
        again = serving_reader(home, other_than=reader["pid"])
        assert again["starts"] == 2
        time.sleep(HEALTH_TRUST_S + 0.1)
        assert structured(s.call("memory_search", query="release process"))["hits"]
        assert reader_health(home, again)["searches"] == 1


def test_usage_logged_by_a_reader_reaches_the_daemons_ranking(home, shared_cache):
    """A reader logs its recalls to its own events file; the daemon folds them before it
    ranks (at most a second later): the hit's recall count is the reader's doing."""
    with reading(home, shared_cache) as (s, _):
        query = "how do we run database migrations"
        top = structured(s.call("memory_search", query=query))["hits"][0]["id"]
        time.sleep(1.1)  # `serve.usage.CATCH_UP_S`
        client = DaemonClient(home)
        daemon = client.call_tool("memory_search", {"query": query, "explain": True})
        why = {h["id"]: h["why"] for h in daemon["hits"]}
        assert why[top]["recall_count"] == 1, why[top]  # the reader's recall, folded


def test_the_readers_stop_with_the_daemon_even_one_that_dies(home, shared_cache):
    client = DaemonClient(home)
    client.ensure()
    reader = serving_reader(home)
    client.stop(wait=True)
    deadline = time.monotonic() + 15
    while pid_alive(reader["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(reader["pid"])
    if "socket" in reader:
        assert not (home / "run" / reader["socket"]).exists()
    # a daemon killed outright: its readers see their stdin close and exit too
    client.ensure()
    reader = serving_reader(home)
    (daemon,) = daemon_pids(home)
    os.kill(daemon, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while pid_alive(reader["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(reader["pid"]), "a reader outlived its daemon"


def test_over_tcp_a_reader_serves_with_the_daemons_transport_and_token(home, shared_cache):
    """The `tcp` transport (Windows' only one): a reader listens on 127.0.0.1 and takes the
    daemon's token - one without it is refused - and never writes daemon.json. A reader
    started again after `transport` changed in config.toml serves as its daemon does."""
    (home / "config.toml").write_text(
        'embedder = "minilm"\nread_processes = 1\ntransport = "tcp"\n'
    )
    with reading(home, shared_cache) as (s, reader):
        assert "port" in reader and "socket" not in reader
        before = reader_health(home, reader)["searches"]
        assert structured(s.call("memory_search", query="release process"))["hits"]
        assert reader_health(home, reader)["searches"] == before + 1  # the reader answered
        daemon = DaemonClient(home).pid()
        assert json.loads((home / "run" / "daemon.json").read_text())["pid"] == daemon
        bare = reader_endpoint(home, reader, token=False)
        assert get_json(bare, "/health") is None  # refused (401) without the token
        (home / "config.toml").write_text('embedder = "minilm"\nread_processes = 1\n')
        os.kill(reader["pid"], signal.SIGKILL)
        again = serving_reader(home, other_than=reader["pid"])
        assert (
            reader_health(home, again)["searches"] == 0
        )  # the daemon's transport, not the config's
        assert json.loads((home / "run" / "daemon.json").read_text())["pid"] == daemon
