"""The switch to Qdrant is one setting, end to end: the real daemon and proxy with `qdrant_url`
set to a local folder (qdrant-client's in-process engine, the same code a server gets) add,
find, supersede and rebuild, and `/health` says the dense vectors live there."""

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
