"""Issue 11: memory that keeps itself - the real `memory-agent hook` command with Claude Code's
documented JSON against a real daemon, the journal and its redaction, injection without echo,
and a gate that promotes only recurring, verified lessons."""

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.intake.journal import append, compact, read_session, sessions
from memory_agent.serve.mcp_config import hook_command
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import ROOT, daemon_pids, env_for

SECRET = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


def hook(home, cache, event, payload, **env):
    """The hook exactly as `memory-agent init` prints it (python -S memory_agent/hookrun.py)."""
    proc = subprocess.run(
        hook_command(home, event),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env_for(home, cache, **env),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def context_of(stdout):
    if not stdout.strip():
        return ""
    out = json.loads(stdout)["hookSpecificOutput"]
    assert out["hookEventName"] in ("UserPromptSubmit", "SessionStart")
    return out["additionalContext"]


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the daemon runs this checkout's code
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")  # the model is loaded: hooks inject from the first prompt
    yield home
    client.stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def base(session, event, **fields):
    return {
        "session_id": session,
        "transcript_path": f"/home/u/.claude/projects/p/{session}.jsonl",
        "cwd": "/home/u/src/kestrel",
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


def test_every_claude_code_event_through_the_real_hook_command(home, shared_cache):
    a, b = "0d1f2e3c-aaaa-4bbb-8ccc-000000000001", "0d1f2e3c-aaaa-4bbb-8ccc-000000000002"
    start = hook(home, shared_cache, "session-start", base(a, "SessionStart", source="startup"))
    assert start == "" or context_of(start).startswith("Memory from earlier sessions")
    prompt = "Our nightly reconcile job ran at 10am instead of 2am. Why?"
    first = context_of(
        hook(home, shared_cache, "prompt", base(a, "UserPromptSubmit", prompt=prompt))
    )
    assert "[cron-schedule-is-utc]" in first and "verify against the current repository" in first
    long_output = "line of build output\n" * 400  # ~8,400 characters
    hook(
        home,
        shared_cache,
        "tool-failure",
        base(
            a,
            "PostToolUseFailure",
            tool_name="Bash",
            tool_input={"command": "kubectl get cronjob reconcile-daily -o yaml"},
            tool_use_id="toolu_01",
            error=f"Exit code 1\nerror: You must be logged in (token {SECRET})",
            is_interrupt=False,
            duration_ms=4187,
        ),
    )
    hook(
        home,
        shared_cache,
        "tool",
        base(
            a,
            "PostToolUse",
            tool_name="Bash",
            tool_input={"command": "kubectl get cronjob reconcile-daily -o yaml"},
            tool_response={"stdout": long_output, "stderr": "", "interrupted": False},
            tool_use_id="toolu_02",
            duration_ms=12,
        ),
    )
    stop = hook(
        home,
        shared_cache,
        "stop",
        base(
            a,
            "Stop",
            stop_hook_active=False,
            last_assistant_message="The CronJob had no timeZone; set Asia/Shanghai.",
        ),
    )
    assert stop == ""
    assert hook(home, shared_cache, "session-end", base(a, "SessionEnd", reason="other")) == ""
    # the journal: one line per event, redacted, tool output cut to 2,000 characters
    [paths] = sessions(home / "journal").values()
    records = list(read_session(paths))
    assert [r["event"] for r in records] == ["start", "prompt", "tool", "tool", "stop", "end"]
    raw = paths[-1].read_text()
    assert SECRET not in raw and "[REDACTED:github-token]" in raw
    assert len(records[3]["output"]["stdout"]) < 2_100 and "characters cut" in raw
    assert oct(paths[-1].stat().st_mode & 0o777) == "0o600"
    # another session is reminded of session a's episode; session a is never shown its own
    echo = context_of(
        hook(
            home,
            shared_cache,
            "prompt",
            base(
                a, "UserPromptSubmit", prompt="why did the reconcile cronjob run at the wrong time"
            ),
        )
    )
    assert f"episodes/{a}/" not in echo
    other = context_of(
        hook(
            home,
            shared_cache,
            "prompt",
            base(
                b, "UserPromptSubmit", prompt="why did the reconcile cronjob run at the wrong time"
            ),
        )
    )
    assert f"[episodes/{a}/1]" in other
    assert all(len(line) < 900 for line in other.splitlines())  # snippets of at most 640 chars
    for trivial in ("ok", "thanks!", "continue", "/clear"):
        assert hook(home, shared_cache, "prompt", base(b, "UserPromptSubmit", prompt=trivial)) == ""
    # the episode is a read-only source: searchable on request, readable, never writable
    client = DaemonClient(home)
    found = client.call_tool(
        "memory_search", {"query": "reconcile cronjob timeZone", "include_episodes": True}
    )
    assert any(h["id"] == f"episodes/{a}/1" and not h["writable"] for h in found["hits"])
    got = client.call_tool("memory_get", {"id": f"episodes/{a}/1"})
    assert (
        "kubectl get cronjob" in got["body"]
        and "failed: error: You must be logged in" in got["body"]
    )
    assert SECRET not in got["body"]
    refused = DaemonClient(home)
    with pytest.raises(Exception, match="read-only"):
        refused.call_tool(
            "memory_archive", {"id": f"episodes/{a}/1", "reason": "x", "confirm": True}
        )
    # every injection is a usage event
    events = [
        json.loads(line)
        for p in (home / "events").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    injects = [e for e in events if e["kind"] == "inject"]
    assert injects and any("cron-schedule-is-utc" in e["ids"] for e in injects)


def test_a_hook_never_breaks_the_agent(tmp_path, shared_cache):
    nowhere = tmp_path / "not-initialised"
    assert (
        hook(nowhere, shared_cache, "prompt", base("s", "UserPromptSubmit", prompt="hi there"))
        == ""
    )
    # the console script's `memory-agent hook` is the same command
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "hook", "prompt", "--home", str(nowhere)],
        input=json.dumps(base("s", "UserPromptSubmit", prompt="hi there")),
        capture_output=True,
        text=True,
        env=env_for(nowhere, shared_cache),
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    (home / "run" / "daemon.sock").mkdir()  # a daemon cannot start here
    try:
        started = time.monotonic()
        out = hook(
            home,
            shared_cache,
            "prompt",
            base("s", "UserPromptSubmit", prompt="why is the build slow"),
        )
        assert out == "" and time.monotonic() - started < 20
        assert "nothing injected" in (home / "run" / "hooks.log").read_text()
        assert "why is the build slow" in (home / "journal" / "s.jsonl").read_text()  # captured
        out = hook(
            home,
            shared_cache,
            "prompt",
            base("s", "UserPromptSubmit", prompt="x y z"),
            MEMORY_AGENT_HOOK_BUDGET_MS="1",
        )
        assert out == ""
        assert hook(home, shared_cache, "prompt", "not even an object") == ""
        log = (home / "run" / "hooks.log").read_text()
        assert "budget" in log or "not a JSON object" in log
        assert (
            hook(
                home,
                shared_cache,
                "prompt",
                base("s", "UserPromptSubmit", prompt="y"),
                MEMORY_AGENT_CAPTURE="off",
            )
            == ""
        )
        prompts = [
            json.loads(x)["prompt"] for x in (home / "journal" / "s.jsonl").read_text().splitlines()
        ]
        assert "y" not in prompts and "why is the build slow" in prompts  # capture off: nothing
    finally:
        for pid in daemon_pids(home):
            os.kill(pid, signal.SIGKILL)


# -- the gate ------------------------------------------------------------------------------------
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


# -- the journal keeps every line ------------------------------------------------------------------
def test_compaction_never_loses_a_line(tmp_path):
    folder = tmp_path / "journal"
    for i in range(50):
        append(folder, "s", {"ts": i, "event": "prompt", "prompt": f"p{i}"})
    assert compact(folder, idle_s=0) == ["s.jsonl"]
    for i in range(50, 60):  # the session resumes later: a new plain file
        append(folder, "s", {"ts": i, "event": "prompt", "prompt": f"p{i}"})
    (folder / "s.jsonl.compacting").write_text(
        json.dumps({"ts": 60, "event": "prompt", "prompt": "p60", "session": "s"}) + "\n"
    )  # a compaction that died after renaming the file aside
    prompts = [r["prompt"] for r in read_session(sessions(folder)["s"])]
    assert sorted(prompts, key=lambda p: int(p[1:])) == [f"p{i}" for i in range(61)]
    compact(folder, idle_s=0)
    again = [r["prompt"] for r in read_session(sessions(folder)["s"])]
    assert sorted(again, key=lambda p: int(p[1:])) == [f"p{i}" for i in range(61)]
    assert not list(folder.glob("*.jsonl")) and not list(folder.glob("*.compacting"))
