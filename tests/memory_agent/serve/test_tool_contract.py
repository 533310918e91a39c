"""One contract: errors with a code and a fix in one shape everywhere, tool schemas an agent can use
without the README (every parameter described and bounded, read-only tools annotated, replies and
errors matching the published output schema, accepted by the official Python client), the proxy's
snapshot of the tools, and a README that matches the wire. Against one demo home served by a real
daemon through a real proxy. (Issue 9.)"""

import ast
import asyncio
import json
import os
import re
import signal
import sys

import jsonschema
import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.proxy import TOOLS_SNAPSHOT
from memory_agent.serve.schemas import ERROR_CODES
from memory_agent.serve.tools import TOOL_NAMES, tool_list
from tests.memory_agent.mcp_helpers import ROOT, ProxySession, daemon_pids, env_for

README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_cache):
    home = tmp_path_factory.mktemp("contract") / "home"
    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def session(home, shared_cache):
    s = ProxySession(home, shared_cache)
    s.initialize()
    DaemonClient(home).admin("refresh")
    yield s
    s.close()


@pytest.fixture(scope="module")
def tools(session):
    return {t["name"]: t for t in session.send("tools/list")["result"]["tools"]}


def test_every_parameter_is_described_and_bounded(tools):
    assert set(tools) == set(TOOL_NAMES)
    for tool in tools.values():
        for name, prop in tool["inputSchema"]["properties"].items():
            assert prop.get("description"), (tool["name"], name)
    search = tools["memory_search"]["inputSchema"]["properties"]
    assert (search["limit"]["minimum"], search["limit"]["maximum"]) == (1, 50)
    assert search["query"]["maxLength"] == 2000
    assert search["types"]["anyOf"][0]["items"]["enum"][0] == "principle"
    assert search["as_of"]["format"] == "date"
    importance = tools["memory_set_importance"]["inputSchema"]["properties"]["importance"]
    assert (importance["minimum"], importance["maximum"]) == (1, 10)
    assert "enum" in tools["memory_add"]["inputSchema"]["properties"]["type"]


def test_tools_are_annotated_so_clients_can_auto_approve_reads(tools):
    reads = {n for n, t in tools.items() if t["annotations"].get("readOnlyHint")}
    assert reads == {
        "memory_search",
        "memory_get",
        "memory_history",
        "memory_index_status",
        "memory_proposals",
    }
    destructive = {n for n, t in tools.items() if t["annotations"].get("destructiveHint")}
    assert destructive == {"memory_supersede", "memory_archive", "memory_resolve_fork"}
    assert tools["memory_set_importance"]["annotations"]["idempotentHint"] is True


def test_replies_and_errors_both_match_the_published_output_schema(session, tools):
    calls = {
        "memory_search": {"query": "how do we lock dependencies", "explain": True},
        "memory_get": {"id": "use-uv-for-locking"},
        "memory_history": {"id": "use-uv-for-locking"},
        "memory_index_status": {},
        "memory_archive": {"id": "branch-naming", "reason": "moved to the wiki"},
    }
    for name, args in calls.items():
        result = session.call(name, **args)
        assert not result.get("isError"), result
        jsonschema.validate(result["structuredContent"], tools[name]["outputSchema"])
    for name, args in {
        "memory_get": {"id": "no-such-entry"},
        "memory_search": {"query": "x", "limit": 0},
        "memory_add": {"title": "x"},
    }.items():
        result = session.call(name, **args)
        error = result["structuredContent"]["error"]
        assert result["isError"] and error["code"] in ERROR_CODES and error["fix"]
        assert result["content"][0]["text"].startswith(f"{error['code']}: ")
        assert "Error executing tool" not in result["content"][0]["text"]
        assert "pydantic" not in result["content"][0]["text"]
        jsonschema.validate(result["structuredContent"], tools[name]["outputSchema"])


def test_the_official_python_client_accepts_replies_and_errors(home, shared_cache):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_agent", "proxy", "--home", str(home)],
        env=env_for(home, shared_cache),
    )

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await client.list_tools()  # the client then checks results against outputSchema
            ok = await client.call_tool("memory_search", {"query": "lock dependencies"})
            bad = await client.call_tool("memory_get", {"id": "no-such-entry"})
            return ok, bad

    ok, bad = asyncio.run(run())
    assert not ok.is_error and ok.structured_content["hits"]
    assert bad.is_error and bad.structured_content["error"]["code"] == "not_found"


def test_the_proxy_snapshot_is_the_daemons_tool_list(tools):
    snapshot = json.loads(TOOLS_SNAPSHOT.read_text(encoding="utf-8"))
    assert snapshot == tool_list() == list(tools.values()), (
        "regenerate it: python -m memory_agent.serve.tools > memory_agent/tools.json"
    )


def _readme_signatures() -> dict[str, dict[str, object]]:
    """{tool: {param: default or REQUIRED}} from the README's tool table."""
    out = {}
    for name, params in re.findall(r"^\| `(memory_\w+)\((.*?)\)` \|", README, re.M):
        args = {}
        for part in filter(None, (p.strip() for p in params.split(","))):
            key, _, default = part.partition("=")
            args[key] = ast.literal_eval(default) if default else "REQUIRED"
        out[name] = args
    return out


def test_the_readme_tool_table_matches_tools_list(tools):
    documented = _readme_signatures()
    assert set(documented) == set(tools)
    for name, tool in tools.items():
        schema = tool["inputSchema"]
        actual = {
            key: "REQUIRED" if key in schema.get("required", []) else prop.get("default")
            for key, prop in schema["properties"].items()
        }
        assert documented[name] == actual, name


def test_the_readme_error_example_is_what_the_wire_carries(session):
    block = README.split("<!-- error-example -->", 1)[1].split("```json", 1)[1].split("```")[0]
    documented = json.loads(block)
    result = session.call("memory_get", id="no-such-entry")
    assert documented == {k: result[k] for k in documented}
    table = README.split("<!-- error-codes -->", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", table, re.M)) == set(ERROR_CODES)


def test_the_cli_marks_archived_hits_and_names_its_own_commands(home, shared_cache):
    import subprocess

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
            capture_output=True,
            text=True,
            env=env_for(home, shared_cache),
            timeout=120,
        )

    found = run("search", "legacy jenkins url", "--include-archived", "--limit", "3")
    assert "legacy-jenkins-url" in found.stdout and "[archived]" in found.stdout
    missing = run("get", "no-such-entry")
    assert missing.returncode == 2 and "`memory-agent search`" in missing.stderr
    assert "memory_search" not in missing.stderr
