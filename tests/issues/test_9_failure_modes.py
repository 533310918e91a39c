"""Issue 9, failure modes a user meets: the daemon, the proxy and the CLI as real processes.
Each test failed on main before the fix (e8baefb)."""

import fcntl
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
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids, env_for


def cli(home, cache, *args, stdin=None, env=None, timeout=120):
    env = env or env_for(home, cache)
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def wait_for(condition, what, timeout=60.0):
    """Poll `condition` until it is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.02)


def blocked_on_flock(pid):
    """Whether process `pid` waits for a flock (a `->` line of /proc/locks names it)."""
    for line in open("/proc/locks").read().splitlines():
        fields = line.split()
        if "->" in fields and fields[fields.index("->") + 4] == str(pid):
            return True
    return False


def _cleanup(home):
    try:
        DaemonClient(home).stop(wait=True, timeout=10)
    except Exception:
        pass
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    yield home
    _cleanup(home)


# 9, 10, 12 -----------------------------------------------------------------------------------
def test_a_missing_model_fails_fast_in_one_line_and_the_advice_works(tmp_path, shared_cache):
    # bge-m3 is the default only where its extra is installed (else minilm: nothing fails)
    pytest.importorskip("FlagEmbedding", reason="bge-m3 is the default only with its extra")
    home = tmp_path / "home"
    env = env_for(home, shared_cache, HF_HUB_OFFLINE="1")
    env.pop("MEMORY_AGENT_EMBEDDER")  # the default: bge-m3, whose weights are not here
    try:
        started = time.monotonic()
        failed = cli(home, shared_cache, "init", env=env)
        took = time.monotonic() - started
        assert failed.returncode == 2, failed.stderr
        assert "Traceback" not in failed.stderr and failed.stdout == ""
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("memory-agent init: not_ready:")
        assert "bge-m3" in lines[0] and "--embedder minilm" in lines[1]
        assert took < 30, took  # not the old 63 s of silence (generous for a loaded machine)
        client = DaemonClient(home)
        health = client.health()  # the daemon is up and says what is wrong
        assert health["model"] == "failed" and health["model_error"]
        log = (home / "run" / "daemon.log").read_text()
        assert "Traceback" not in log and len(log) < 20_000
        # the error's own advice works, although the bge-m3 daemon is still running
        fixed = cli(home, shared_cache, "init", "--embedder", "minilm", "--json", env=env)
        assert fixed.returncode == 0, fixed.stderr
        reply = json.loads(fixed.stdout)
        assert reply["restarted_daemon"] == health["pid"] and reply["embedder"] == "minilm"
        assert reply["index"]["consistent"] and client.health()["embedder"] == "minilm"
        # stop waits for the exit and reports the real pid
        pid = client.health()["pid"]
        stopped = json.loads(cli(home, shared_cache, "stop", "--json", env=env).stdout)
        assert stopped == {"stopped": True, "pid": pid}
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read()
    finally:
        _cleanup(home)


# 11 -----------------------------------------------------------------------------------------
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


# 13 -----------------------------------------------------------------------------------------
def test_argument_errors_answer_in_json_with_one_exit_status(tmp_path, shared_cache):
    home = tmp_path / "nowhere"
    bad = cli(home, shared_cache, "search", "x", "--limit", "many", "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "invalid"
    no_body = cli(home, shared_cache, "add", "--title", "T", "--json", stdin="")
    refused = cli(home, shared_cache, "status", "--json")
    assert {no_body.returncode, refused.returncode} == {2}


def test_ctrl_c_while_waiting_exits_130_without_a_traceback(home, shared_cache):
    (home / "run").mkdir(exist_ok=True)
    with open(home / "run" / "spawn.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the CLI waits here to start the daemon
        proc = subprocess.Popen(
            [sys.executable, "-m", "memory_agent", "status", "--home", str(home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(home, shared_cache),
            # Ctrl-C as a terminal sends it: run from a shell's background job, the suite
            # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        wait_for(lambda: blocked_on_flock(proc.pid), "the CLI waits for the spawn lock")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err


# 16 -----------------------------------------------------------------------------------------
def test_searches_answer_from_the_live_generation_while_a_rebuild_runs(home, shared_cache):
    env = env_for(home, shared_cache, MEMORY_AGENT_FAULT="pause-rebuild")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "daemon", "--home", str(home), "--preload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = DaemonClient(home)
        deadline = time.monotonic() + 60
        while client.health() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        client.admin("refresh")
        done = {}
        rebuild = threading.Thread(target=lambda: done.update(client.admin("rebuild")))
        rebuild.start()
        marker = home / "run" / "fault-pause-rebuild"
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists() and rebuild.is_alive()
        # the rebuild is in progress (held between its scan and its switch): a search answers
        hits = DaemonClient(home, timeout=20).call_tool("memory_search", {"query": "lock deps"})
        assert hits["generation"] == "gen-000001" and hits["hits"] and rebuild.is_alive()
        assert client.health()["rebuilding"] is True
        (home / "run" / "fault-continue").touch()
        rebuild.join(timeout=120)
        assert done["generation"] == "gen-000002"
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


# 17 -----------------------------------------------------------------------------------------
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


# 18 -----------------------------------------------------------------------------------------
def test_a_daemon_that_cannot_bind_says_why(home, shared_cache):
    (home / "run").mkdir(exist_ok=True)
    (home / "run" / "daemon.sock").mkdir()  # something that is not a socket is in the way
    failed = cli(home, shared_cache, "status")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "not a socket" in failed.stderr
    assert "not a socket" in (home / "run" / "daemon.log").read_text()


def test_the_cli_says_so_when_the_daemon_dies_mid_call(home, shared_cache):
    env = env_for(home, shared_cache, MEMORY_AGENT_FAULT="pause-rebuild")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "rebuild", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    marker = home / "run" / "fault-pause-rebuild"
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Traceback" not in err
    assert "daemon: the daemon stopped answering during rebuild" in err


def test_legal_web_refuses_foreign_hosts_and_cross_origin_writes(engine):
    from starlette.testclient import TestClient

    from legal_web.app import create_app

    client = TestClient(create_app(engine), base_url="http://127.0.0.1:8765")
    ask = {"kb": "company-policies", "question": "How many days of leave?"}
    assert client.post("/api/ask", json=ask).status_code == 200
    assert client.get("/api/kbs", headers={"Host": "evil.example:8765"}).status_code == 421
    cross = client.post(
        "/api/ask",
        content=json.dumps(ask),
        headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
    )
    assert cross.status_code == 403
    plain = client.post("/api/ask", content=json.dumps(ask), headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415


def test_a_client_that_loses_the_start_race_waits_for_the_winner(home, shared_cache, monkeypatch):
    """Regression: a hook starts the daemon, which holds the home but does not answer yet;
    a client's own spawn then exits at once ("already running") - the client must wait for
    the daemon that won, not fail with "could not start"."""
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    run = home / "run"
    run.mkdir(exist_ok=True)
    winner = open(run / "daemon.lock", "a+")  # the winner: holds the lock, not answering yet
    fcntl.flock(winner, fcntl.LOCK_EX)
    (run / "daemon.pid").write_text(str(os.getpid()))
    outcome: dict = {}

    class Client(DaemonClient):  # the real client; it only lets the test see its steps
        spawned: list = []
        polls = 0

        def spawn(self):
            self.spawned.append(super().spawn())
            return self.spawned[-1]

        def health(self, timeout=2.0):
            Client.polls += 1
            return super().health(timeout=timeout)

    def ensure():
        try:
            outcome["health"] = Client(home).ensure()
        except Exception as exc:  # noqa: BLE001
            outcome["error"] = exc

    waiting = threading.Thread(target=ensure)
    waiting.start()
    # the client's spawn exits with "already running"; then the client looks again, twice
    wait_for(lambda: Client.spawned and Client.spawned[0].poll() is not None, "the spawn exits")
    seen = Client.polls
    wait_for(lambda: Client.polls >= seen + 2 or "error" in outcome, "the client polls again")
    assert "error" not in outcome, outcome.get("error")
    # the winner gets going: the lock passes to a real daemon, which answers
    (run / "daemon.pid").unlink()
    fcntl.flock(winner, fcntl.LOCK_UN)
    winner.close()
    DaemonClient(home).spawn()
    waiting.join(timeout=120)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["health"]["version"]
