"""The ingest gate through the real hook command and a real daemon: a recurring, verified failure ->
fix promoted once; propose mode and a rejection that sticks; an optional summarising model that
rewrites the text but does not decide. (Issue 11.)

(`home`, a demo home with its daemon running, is capture/conftest.py's.)"""

import http.server
import json
import threading
from pathlib import Path

from memory_agent.client import DaemonClient
from tests.memory_agent.capture.claude_code import base, hook
from tests.memory_agent.helpers import git


def failure_then_fix(home, cache, session, n):
    hook(home, cache, "prompt", base(session, "UserPromptSubmit", prompt=f"run the tests ({n})"))
    hook(
        home,
        cache,
        "tool-failure",
        base(
            session,
            "PostToolUseFailure",
            tool_name="Bash",
            tool_input={"command": "pytest -x tests/test_api.py"},
            error=f"Exit code 1\nModuleNotFoundError: No module named 'respx' (/w/{session}/conftest.py:{n})",
        ),
    )
    hook(
        home,
        cache,
        "tool",
        base(
            session,
            "PostToolUse",
            tool_name="Edit",
            tool_input={"file_path": f"/w/{session}/pyproject.toml"},
            tool_response={"success": True},
        ),
    )
    hook(
        home,
        cache,
        "tool",
        base(
            session,
            "PostToolUse",
            tool_name="Bash",
            tool_input={"command": "pytest -x tests/test_api.py"},
            tool_response={"stdout": "3 passed"},
        ),
    )
    hook(
        home,
        cache,
        "stop",
        base(session, "Stop", last_assistant_message="Added respx to the dev deps."),
    )


def test_the_gate_promotes_a_recurring_verified_fix_once(home, shared_cache):
    (home / "config.toml").write_text('embedder = "minilm"\ngate = "auto"\n')  # opted in
    DaemonClient(home).stop(wait=True)  # the daemon reads config at start
    client = DaemonClient(home)
    client.ensure()
    head = git(home / "kb", "rev-parse", "HEAD").strip()
    failure_then_fix(home, shared_cache, "gate-a", 1)
    assert client.admin("gate")["promoted"] == []  # one episode: an observation, no lesson
    failure_then_fix(home, shared_cache, "gate-a", 2)
    assert client.admin("gate")["promoted"] == []  # two episodes, one session: not yet
    failure_then_fix(home, shared_cache, "gate-b", 3)
    [entry] = client.admin("gate")["promoted"]  # three episodes of two sessions
    assert client.admin("gate")["promoted"] == []  # once
    log = git(home / "kb", "log", "--format=%s", f"{head}..HEAD").splitlines()
    assert log == [f"memory: add {entry}"]
    got = client.call_tool("memory_get", {"id": entry})
    text = Path(got["path"]).read_text()
    assert "source: auto" in text and "episodes/gate-a/1" in text and "episodes/gate-b/1" in text
    assert got["type"] == "pitfall" and "No module named 'respx'" in got["title"]
    assert "/w/gate" not in got["title"]  # no machine paths in the lesson's title
    failure_then_fix(home, shared_cache, "gate-c", 4)  # seen again: reinforced, not re-added
    assert client.admin("gate")["promoted"] == []
    assert len(git(home / "kb", "log", "--format=%s", f"{head}..HEAD").splitlines()) == 1


def test_propose_mode_and_a_rejection_that_sticks(home, shared_cache):
    (home / "config.toml").write_text('embedder = "minilm"\ngate = "propose"\n')
    DaemonClient(home).stop(wait=True)  # the daemon reads config at start
    client = DaemonClient(home)
    head = git(home / "kb", "rev-parse", "HEAD").strip()
    for session, n in (("p-a", 1), ("p-a", 2), ("p-b", 3)):
        failure_then_fix(home, shared_cache, session, n)
    client.ensure()
    assert client.admin("gate")["proposed"]
    [proposal] = client.call_tool("memory_proposals", {})["proposals"]
    assert proposal["episodes"] == ["episodes/p-a/1", "episodes/p-a/2", "episodes/p-b/1"]
    assert git(home / "kb", "rev-parse", "HEAD").strip() == head  # nothing written
    rejected = client.call_tool("memory_reject", {"id": proposal["id"], "reason": "flaky CI"})
    assert rejected["status"] == "rejected"
    failure_then_fix(home, shared_cache, "p-c", 4)  # more evidence: still not proposed again
    assert client.admin("gate")["proposed"] == []
    assert client.call_tool("memory_proposals", {})["proposals"] == []
    assert git(home / "kb", "rev-parse", "HEAD").strip() == head


class _FakeChat(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint (the real interface: POST /v1/chat/completions)."""

    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.seen.append((self.path, body))
        reply = {
            "choices": [
                {"message": {"role": "assistant", "content": "Install respx as a dev dependency."}}
            ]
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_an_optional_summarising_model_rewrites_the_text_but_does_not_decide(home, shared_cache):
    server = http.server.HTTPServer(("127.0.0.1", 0), _FakeChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        (home / "config.toml").write_text(
            f'embedder = "minilm"\ngate = "auto"\nsummarizer_url = "{url}"\n'
            'summarizer_model = "llama3"\n'
        )
        DaemonClient(home).stop(wait=True)
        client = DaemonClient(home)
        failure_then_fix(home, shared_cache, "m-a", 1)
        client.ensure()
        assert client.admin("gate")["promoted"] == [] and _FakeChat.seen == []  # no evidence yet
        failure_then_fix(home, shared_cache, "m-a", 2)
        failure_then_fix(home, shared_cache, "m-b", 3)
        [entry] = client.admin("gate")["promoted"]
        path, body = _FakeChat.seen[-1]
        assert path == "/v1/chat/completions" and body["model"] == "llama3"
        body = client.call_tool("memory_get", {"id": entry})["body"]
        assert body.startswith("Install respx as a dev dependency.\n\n**Observed output.**")
    finally:
        server.shutdown()
