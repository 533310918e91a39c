"""`memory-agent doctor` as a person runs it (issue 28, item 5): a real home, a real daemon, a
real bare remote and an unreachable one, an agent's settings folder before and after
`connect`. Each line is ok or names its fix; the exit status says whether anything needs one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from memory_agent.client import DaemonClient


def doctor(home, env, *args):
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "doctor", "--home", str(home), "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout + proc.stderr
    reply = json.loads(lines[0])
    return proc.returncode, {c["check"]: c for c in reply["checks"]}


def cli(home, env, *args):
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )


def test_doctor_names_each_fix_and_is_all_good_once_they_are_made(tmp_path, shared_cache):
    home, user = tmp_path / "home", tmp_path / "user"
    (user / ".claude").mkdir(parents=True)  # Claude Code is installed, not yet connected
    env = dict(os.environ, HOME=str(user), MEMORY_AGENT_CACHE=str(shared_cache))
    env.pop("MEMORY_AGENT_HOME", None)
    env.pop("CLAUDE_CONFIG_DIR", None)
    env["GIT_CONFIG_GLOBAL"] = os.devnull  # no identity of the person's
    try:
        code, checks = doctor(home, env)
        assert code == 1 and checks["home"]["fix"] == "run `memory-agent init`"
        assert list(checks) == ["home"]  # nothing else can be checked without one

        cli(home, env, "init", "--embedder", "minilm", "--demo")
        gone = tmp_path / "nowhere.git"
        cli(home, env, "remote", "set", str(gone))
        code, checks = doctor(home, env)
        assert code == 1
        for ok in ("home", "disk", "model", "daemon", "index", "git", "platform"):
            assert checks[ok]["ok"], checks[ok]
        assert "79 entries, consistent" in checks["index"]["message"]
        assert "memory-agent <memory-agent@localhost>" in checks["git"]["message"]
        remote = checks["remote personal"]
        assert not remote["ok"] and str(gone) in remote["message"]
        assert "ls-remote" in remote["fix"]
        agent = checks["agent claude-code"]
        assert (
            not agent["ok"] and agent["fix"] == "run `memory-agent connect claude-code --confirm`"
        )
        assert "agent codex" not in checks  # not on this machine: not reported

        subprocess.run(["git", "init", "-q", "--bare", str(gone)], check=True)
        cli(home, env, "connect", "claude-code", "--confirm")
        code, checks = doctor(home, env)
        assert code == 0, checks
        assert all(c["ok"] for c in checks.values())
        assert checks["remote personal"]["message"].endswith("answers")
    finally:
        DaemonClient(home).stop(wait=True)


def test_doctor_reports_a_missing_model_with_its_fix_without_starting_anything(tmp_path):
    home = tmp_path / "home"
    env = dict(os.environ, HOME=str(tmp_path), MEMORY_AGENT_CACHE=str(tmp_path / "cache"))
    env.pop("MEMORY_AGENT_HOME", None)
    cli(home, env, "init", "--embedder", "minilm", "--no-index")
    env["MEMORY_AGENT_MODEL_PATH"] = str(tmp_path / "no-weights-here")
    code, checks = doctor(home, env, "--no-start")
    assert code == 1
    assert not checks["model"]["ok"] and checks["model"]["fix"]
    assert "no-weights-here" in checks["model"]["message"] + checks["model"]["fix"]
    assert "index" not in checks  # --no-start: nothing was started to ask it
    assert DaemonClient(home).health() is None
