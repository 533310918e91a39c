"""The bound of every input: oversized input refused naming its bound (before anything past it
reaches the usage log), a logged query cut to its bound. Through a real proxy and daemon. (Issue 9.)

(The demo home `home` is the memory_agent conftest's.)"""

import json

from memory_agent.client import DaemonClient
from tests.memory_agent.demo_daemon import cli
from tests.memory_agent.mcp_helpers import ProxySession


def test_oversized_input_is_refused_with_its_bound(home, shared_cache):
    s = ProxySession(home, shared_cache)
    try:
        s.initialize()
        DaemonClient(home).admin("refresh")  # the index is built: no refusal is a `not_ready`
        huge = s.call("memory_search", query="deploy " * 500_000)  # 3.5 MB
        assert huge["isError"]
        error = huge["structuredContent"]["error"]
        assert error["code"] == "invalid" and "1,000,000 bytes" in error["message"]
        long = s.call("memory_search", query="deploy " * 400)  # 2,800 characters
        assert long["isError"] and "at most 2000" in long["content"][0]["text"]
        bell = s.call("memory_add", title="ding\x07dong", body="A title with a bell in it.")
        assert bell["isError"] and "control characters" in bell["content"][0]["text"]
    finally:
        s.close()
    logged = "".join(p.read_text() for p in (home / "events").glob("*.jsonl"))
    assert "deploy deploy" not in logged  # nothing past the bound reached the usage log


def test_a_logged_query_is_cut_to_its_bound(home, shared_cache):
    DaemonClient(home).admin("refresh")  # the first index, so the search is a full one
    reply = cli(home, shared_cache, "search", "deploy " * 280, "--json")  # 1,960 characters
    assert reply.returncode == 0, reply.stderr
    events = [
        json.loads(line)
        for p in (home / "events").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert max(len(e["text"]) for e in events if e["kind"] == "query") == 500
