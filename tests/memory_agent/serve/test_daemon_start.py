"""A daemon opens its index on a thread while it imports the MCP SDK and builds its app, so the
first answer comes sooner. Meanwhile it answers health and the MCP handshake; a search sent
meanwhile waits for that open (and is answered from it); an open that fails is logged and met again,
with its fix, by status and the search. (Issue 19.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids

QUERY, EXPECTED = "jieba 词典加载 kctl 启动慢", "jieba-dictionary-load-slows-cli"


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    """A demo home whose index is built, no daemon running."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")
    client.stop(wait=True)
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def _until(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_daemon_answers_health_and_the_handshake_while_its_index_opens_and_a_search_waits(
    home, shared_cache
):
    s = ProxySession(home, shared_cache, MEMORY_AGENT_FAULT="pause-open")
    try:
        assert s.initialize()["result"]["serverInfo"]  # the daemon answers the handshake ...
        marker = home / "run" / "fault-pause-open"
        _until(marker.exists, "the daemon's open of the index to be held")
        health = DaemonClient(home).health()  # ... and health, while its index is opening
        assert health["status"] == "ok" and health["generation"] == "gen-000001"
        assert s.send("tools/list")["result"]["tools"]
        replies: dict[str, dict] = {}

        def call(name: str, arguments: dict) -> None:  # each on its own connection
            replies[name] = DaemonClient(home, timeout=120).call_tool(name, arguments)

        calls = [
            threading.Thread(target=call, args=("memory_search", {"query": QUERY})),
            threading.Thread(target=call, args=("memory_index_status", {})),
        ]
        for thread in calls:
            thread.start()
        assert marker.exists() and not replies  # sent while the open is held: not answered
        (home / "run" / "fault-continue").touch()
        for thread in calls:
            thread.join(timeout=120)
        hits = replies["memory_search"]["hits"]
        assert hits and hits[0]["id"] == EXPECTED  # answered from the index opened at start
        status = replies["memory_index_status"]
        assert status["consistent"] and status["entries"] > 0
        log = (home / "run" / "daemon.log").read_text()
        assert log.count("opened at start") == 1  # once, on the thread, not again by the calls
    finally:
        s.close()


def test_an_open_that_fails_at_start_is_logged_shown_by_health_and_said_by_the_search(
    home, shared_cache
):
    segment = home / "index" / (home / "index" / "CURRENT").read_text().strip()
    with sqlite3.connect(segment / "segment.sqlite") as db:  # as if built by another model
        db.execute("UPDATE meta SET value = ? WHERE key = 'embedder'", (json.dumps("bge-m3:x"),))
    s = ProxySession(home, shared_cache)
    try:
        s.initialize()
        client = DaemonClient(home)
        error = _until(client.last_error, "the daemon to log the failed open")
        assert error.startswith("the index could not be opened at start")
        assert "built with embedder bge-m3:x" in error
        assert error.endswith(
            "fix: run `memory-agent rebuild` (rebuild the index: a fresh "
            "generation from the documents, or switch the embedder back)"
        )
        assert client.health()["status"] == "ok"
        status = s.call("memory_index_status")["structuredContent"]
        assert not status["consistent"]
        assert any("built with embedder bge-m3:x" in p for p in status["problems"])
        reply = s.call("memory_search", query=QUERY)
        assert reply["isError"]
        said = reply["structuredContent"]["error"]
        assert "built with embedder bge-m3:x" in said["message"] and "rebuild" in said["fix"]
    finally:
        s.close()
