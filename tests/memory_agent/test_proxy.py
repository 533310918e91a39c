"""The stdio proxy an agent starts: it answers at once on a home without a knowledge base, and the
same session works once the home exists. (Issue 9.)"""

from memory_agent import config
from memory_agent.index.memory import Memory
from tests.memory_agent.demo_daemon import _cleanup
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids


def test_the_proxy_answers_at_once_on_a_home_without_a_knowledge_base(tmp_path, shared_cache):
    home = tmp_path / "typo-home"
    s = ProxySession(home, shared_cache)
    try:
        reply = s.send(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
            timeout=10,
        )
        assert reply["result"]["serverInfo"]["name"] == "memory-agent"
        names = {t["name"] for t in s.send("tools/list", timeout=10)["result"]["tools"]}
        assert "memory_search" in names
        result = s.send(
            "tools/call", {"name": "memory_search", "arguments": {"query": "x"}}, timeout=10
        )["result"]
        assert result["isError"] and result["structuredContent"]["error"]["code"] == "not_ready"
        assert "memory-agent init" in result["content"][0]["text"]
        assert daemon_pids(home) == [] and not (home / "run" / "daemon.log").exists()
        # once the home exists, the same session works without a restart
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
        found = s.call("memory_get", id="use-uv-for-locking")
        assert not found.get("isError") and found["structuredContent"]["writable"]
    finally:
        s.close()
        _cleanup(home)
