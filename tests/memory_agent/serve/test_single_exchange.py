"""The daemon's single-exchange path for read-only tool calls (`serve.single_exchange`) answers
exactly as the MCP SDK's stateless transport does: the same status, headers and bytes for the same
request - results, refusals of ours, the schema's refusals, protocol errors - while writes and
everything the SDK refuses still go through the SDK."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import memory_agent
from memory_agent.client import CALLER_HEADER, PROTOCOL_VERSION, WHERE_HEADER
from memory_agent.serve.daemon import build_app
from memory_agent.serve.service import Service
from tests.memory_agent.helpers import make_memory

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL_VERSION,
}


@pytest.fixture(autouse=True)
def same_commits(monkeypatch):
    """git's dates pinned: the two homes' KB commits are the same objects, so the status's
    `indexed_commit` compares byte for byte too."""
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-11-30T09:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-11-30T09:00:00Z")


@pytest.fixture
def service(memory):
    service = Service(memory)
    yield service
    service.events.close()


@pytest.fixture
def twin_service(tmp_path, minilm_model):
    """A second home made the same way: a search's recalls change later rankings, so each
    path is asked the same calls in the same order on a memory of its own."""
    twin = make_memory(tmp_path / "twin", minilm_model)
    twin.init(demo=True, embedder="minilm")
    service = Service(twin)
    yield service
    service.events.close()
    twin.close()


@pytest.fixture
def paths(service, twin_service):
    """Two daemons' apps: with the single-exchange path, and the SDK's alone on the twin. The
    third item: what the SDK's replies are compared under (its home named as the first's)."""
    direct = build_app(service, {})
    sdk = build_app(twin_service, {}, single_exchange=False)
    assert len(str(service.memory.home)) == len(str(twin_service.memory.home))
    with (
        TestClient(direct, base_url="http://localhost") as direct_client,
        TestClient(sdk, base_url="http://localhost") as sdk_client,
    ):
        twin = functools.partial(
            post, home=(str(twin_service.memory.home).encode(), str(service.memory.home).encode())
        )
        yield direct, direct_client, functools.partial(twin, sdk_client)


def call(name: str, arguments, msg_id=1, **params) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, **params},
    }


def post(client: TestClient, message, headers=HEADERS, home: tuple[bytes, bytes] = (b"", b"")):
    """Status, headers and body of the reply; `home`: (this path's home, the name it is
    compared under) - the two homes' paths have the same length, so the bytes and the
    content-length compare. The time of each home's last index refresh (status: a wall-clock
    second, one per home) is compared as one fixed time of the same length."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    reply = client.post("/mcp", content=body, headers=headers)
    content = re.sub(
        rb'(last_refresh\\?": ?\\?")\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ',
        rb"\g<1>2000-01-01T00:00:00Z",
        reply.content,
    )
    return reply.status_code, reply.headers.raw, content.replace(*home)


def an_entry_id(post_to, *client) -> str:
    _, _, body = post_to(*client, call("memory_search", {"query": "tests", "limit": 1}))
    return json.loads(body)["result"]["structuredContent"]["hits"][0]["id"]


READS = [
    call("memory_search", {"query": "how do we run the tests", "limit": 3}),
    call("memory_search", {"query": "deploy", "explain": True, "types": ["decision"]}, "s-1"),
    call("memory_search", {"query": "deploy"}, 7, _meta={"progressToken": "p1"}),
    call("memory_search", {"query": "x", "limit": 0}),  # out of bounds
    call("memory_search", {"query": "x", "limit": True}),  # strict: not a number
    call("memory_search", {"query": "x", "limit": "8"}),
    call("memory_search", {"query": ""}),
    call("memory_search", {}),  # missing query
    call("memory_search", {"query": "x", "types": ["nonsense"]}),
    call("memory_search", {"query": "x", "as_of": "yesterday"}),
    call("memory_search", {"query": "x", "as_of": "9999-12-31"}),  # our own refusal
    call("memory_search", {"query": "x", "include_archived": "yes"}),
    call("memory_search", "not an object"),  # the spec's params check
    call("memory_search", {"query": "deploy", "scope": "all"}),  # a parameter added later
    call("memory_search", {"query": "deploy", "scope": "global"}),
    call("memory_search", {"query": "deploy", "scope": ""}),
    call("memory_get", {"id": "no-such-entry"}),  # not_found
    call("memory_get", {"id": 42}),
    call("memory_get", {"id": "a\u202eb"}),  # an invisible character in an id
    call("memory_history", {"id": "no-such-entry"}),
    call("memory_index_status", {}),
    call("memory_index_status", None),
    call("memory_proposals", {}),
]


def test_read_only_calls_get_the_sdks_reply_byte_for_byte(paths):
    direct, direct_client, sdk_post = paths
    entry = an_entry_id(post, direct_client)
    assert entry == an_entry_id(sdk_post)
    reads = [*READS, call("memory_get", {"id": entry}), call("memory_history", {"id": entry})]
    served = direct.served
    for message in reads:
        assert post(direct_client, message) == sdk_post(message), message
    assert direct.served - served == len(reads)  # every one was answered by the direct path


def test_the_where_header_gets_the_same_reply_on_both_paths(paths, tmp_path):
    direct, direct_client, sdk_post = paths
    headers = {**HEADERS, WHERE_HEADER: str(tmp_path)}
    message = call("memory_search", {"query": "deploy", "scope": "project"})
    served = direct.served
    assert post(direct_client, message, headers) == sdk_post(message, headers)
    assert direct.served == served + 1


def test_the_caller_header_reaches_the_usage_log_on_the_direct_path(paths, service, memory):
    direct, direct_client, _ = paths
    served = direct.served
    post(
        direct_client,
        call("memory_search", {"query": "unique caller probe"}),
        headers={**HEADERS, CALLER_HEADER: "probe-client/1.0"},
    )
    assert direct.served == served + 1
    service.events.close()
    logged = "".join(p.read_text() for p in (memory.home / "events").rglob("*.jsonl"))
    query = [json.loads(line) for line in logged.splitlines() if "unique caller probe" in line]
    assert query and query[0]["caller"] == "probe-client/1.0"


def test_a_write_and_the_handshake_go_through_the_sdk(paths):
    direct, direct_client, _ = paths
    served = direct.served
    status, _, body = post(
        direct_client, call("memory_add", {"title": "Direct path probe", "body": "A new note."})
    )
    assert status == 200
    assert json.loads(body)["result"]["structuredContent"]["status"] == "created"
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    assert json.loads(post(direct_client, init)[2])["result"]["serverInfo"]["name"]
    tools = post(direct_client, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})[2]
    listed = [t["name"] for t in json.loads(tools)["result"]["tools"]]
    snapshot = json.loads((Path(memory_agent.__file__).parent / "tools.json").read_text())
    assert listed == [t["name"] for t in snapshot]  # every tool, as the proxy's snapshot
    post(direct_client, call("memory_set_importance", {"id": "no-such-entry", "importance": 3}))
    assert direct.served == served  # none of them was answered by the direct path


SEARCH = call("memory_search", {"query": "tests"})
REFUSED = [  # (headers, body): what the SDK refuses, it refuses on both paths
    ({**HEADERS, "Host": "evil.example"}, SEARCH),
    ({**HEADERS, "Origin": "http://evil.example"}, SEARCH),
    ({**HEADERS, "Accept": "text/event-stream"}, SEARCH),
    ({**HEADERS, "Content-Type": "text/plain"}, SEARCH),
    ({**HEADERS, "MCP-Protocol-Version": "1999-01-01"}, SEARCH),
    (HEADERS, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '),
    (HEADERS, {"id": 1, "method": "tools/call", "params": {"name": "memory_search"}}),
    (HEADERS, [SEARCH, SEARCH]),
    (HEADERS, call("memory_nonsense", {})),
    (HEADERS, b"x" * (4 * 1024 * 1024 + 1)),
]


@pytest.mark.parametrize("headers,message", REFUSED)
def test_what_the_sdk_refuses_is_refused_alike_and_left_to_the_sdk(paths, headers, message):
    direct, direct_client, sdk_post = paths
    served = direct.served
    assert post(direct_client, message, headers) == sdk_post(message, headers)
    assert direct.served == served
