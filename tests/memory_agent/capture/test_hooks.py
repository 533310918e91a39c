"""The real `memory-agent hook` command with Claude Code's documented JSON against a real daemon:
every event journaled and redacted, tool output cut, injection without echo of a session's own
episodes, episodes as a read-only source; and a hook that never breaks the agent (no home, no
daemon, no budget, not JSON, capture off). (Issue 11.)

(`home`, a demo home with its daemon running, is capture/conftest.py's.)"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.intake.journal import read_session, sessions
from tests.memory_agent.capture.claude_code import base, hook
from tests.memory_agent.mcp_helpers import daemon_pids, env_for

SECRET = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


def context_of(stdout):
    if not stdout.strip():
        return ""
    out = json.loads(stdout)["hookSpecificOutput"]
    assert out["hookEventName"] in ("UserPromptSubmit", "SessionStart")
    return out["additionalContext"]


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
