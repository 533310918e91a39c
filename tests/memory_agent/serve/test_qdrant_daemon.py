"""The switch to Qdrant is one setting, end to end: the real daemon and proxy with `qdrant_url`
set to a local folder (qdrant-client's in-process engine, the same code a server gets) add,
find, supersede and rebuild, and `/health` says the dense vectors live there."""

import time

import pytest

from memory_agent.client import DaemonClient
from tests.memory_agent.mcp_helpers import ProxySession, structured

pytest.importorskip("qdrant_client", reason="the server path needs the qdrant extra")


def test_the_daemon_serves_from_a_qdrant_collection(home, shared_cache, tmp_path, monkeypatch):
    where = tmp_path / "qdrant"
    monkeypatch.setenv("MEMORY_AGENT_QDRANT_URL", str(where))
    s = ProxySession(home, shared_cache, MEMORY_AGENT_QDRANT_URL=str(where))
    try:
        s.initialize()
        added = structured(
            s.call(
                "memory_add",
                title="Qdrant holds the vectors of this home",
                body="The kettle descaler is citric acid, two spoons per litre.",
                type="fact",
            )
        )
        assert added["status"] == "created"
        hits = structured(s.call("memory_search", query="how do I descale the kettle"))["hits"]
        assert hits[0]["id"] == added["id"]
        assert DaemonClient(home).health()["dense"] == "server"
        assert any(where.rglob("*")), "nothing was written to the local Qdrant folder"
        new = structured(
            s.call(
                "memory_supersede",
                old_id=added["id"],
                title="Qdrant holds the vectors of this home",
                body="The kettle descaler is citric acid, one spoon per litre.",
                confirm=True,
            )
        )
        hits = structured(s.call("memory_search", query="how do I descale the kettle"))["hits"]
        assert new["status"] == "superseded" and hits[0]["id"] == new["id"]
        assert added["id"] not in [h["id"] for h in hits]  # superseded: not an active entry
        DaemonClient(home).admin("rebuild")
        hits = structured(s.call("memory_search", query="how do I descale the kettle"))["hits"]
        assert hits[0]["id"] == new["id"]
    finally:
        s.close()
        DaemonClient(home).stop(wait=True)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_qdrant_server_that_is_down_is_an_index_error_through_the_daemon(
    home, shared_cache, monkeypatch
):
    """No server at the URL: the first build cannot store its vectors. A search says so, with
    the server and the fix (not `internal`, and not "still loading" once the build has
    failed); status names it; an add is refused with the same error and writes nothing."""
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("MEMORY_AGENT_QDRANT_URL", url)
    s = ProxySession(home, shared_cache, MEMORY_AGENT_QDRANT_URL=url)
    kb = home / "kb"
    before = sorted(p.relative_to(kb) for p in kb.rglob("*.md"))
    try:
        s.initialize()
        deadline = time.monotonic() + 120
        while True:  # the first build runs after the model loads: not ready until it fails
            error = s.call("memory_search", query="how do I descale the kettle")
            error = error["structuredContent"]["error"]
            if error["code"] != "not_ready" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert error["code"] == "index", error
        assert f"the Qdrant server at {url} could not be reached" in error["message"]
        assert "qdrant_url" in error["fix"]
        problems = structured(s.call("memory_index_status"))["problems"]
        # what failed is the first build, with the server's fix (there were no pending writes)
        assert any(
            p.startswith("the first index could not be built: the Qdrant server at")
            and "fix: this home's dense vectors live on the Qdrant server" in p
            for p in problems
        ), problems
        assert not any("pending writes" in p for p in problems), problems
        added = s.call("memory_add", title="Written while the server is down", body="Citric.")
        assert added["isError"] and added["structuredContent"]["error"]["code"] == "index"
        assert sorted(p.relative_to(kb) for p in kb.rglob("*.md")) == before
    finally:
        s.close()
        DaemonClient(home).stop(wait=True)
