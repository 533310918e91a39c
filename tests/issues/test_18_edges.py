"""Issue 18, input and output edges (items 7, 8, 9, 11, 12, 13, 14): each through the surface a
user meets - MCP tools through the real proxy and daemon, the CLI as a process piped into
`head`, the proxy fed a raw line, `init` on a folder that already exists, a config.toml with a
typo. Every test here failed on main before the fix (38218b1)."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.clock import Clock
from memory_agent.errors import DaemonError
from memory_agent.index.memory import Memory
from memory_agent.write.gateway import Gateway
from tests.issues.test_12_ui import UI, request
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids, env_for

CLOCK = "2026-11-30T09:00:00Z"


def _stop(home: Path) -> None:
    try:
        DaemonClient(home).stop(wait=True, timeout=10)
    except Exception:
        pass
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def _new_home(home: Path, shared_cache: Path) -> Path:
    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    Memory(config.load({"home": str(home), "clock": CLOCK})).init(
        demo=True, embedder="minilm", sync=False
    )
    return home


def cli(home, cache, *args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env or env_for(home, cache, MEMORY_AGENT_CLOCK=CLOCK),
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_cache):
    home = _new_home(tmp_path_factory.mktemp("edges") / "home", shared_cache)
    yield home
    _stop(home)


@pytest.fixture(scope="module")
def session(home, shared_cache):
    s = ProxySession(home, shared_cache, MEMORY_AGENT_CLOCK=CLOCK)
    s.initialize()
    DaemonClient(home).admin("refresh")
    yield s
    s.close()


def _error(result: dict) -> dict:
    assert result.get("isError"), result
    return result["structuredContent"]["error"]


def _commits(home: Path) -> int:
    return int(git(home / "kb", "rev-list", "--count", "HEAD").strip())


def _daemon_log(home: Path) -> str:
    return (home / "run" / "daemon.log").read_text(encoding="utf-8", errors="replace")


# 7 -------------------------------------------------------------------------------------------
def test_as_of_past_the_last_date_is_invalid_naming_the_bound(session):
    error = _error(session.call("memory_search", query="lock dependencies", as_of="9999-12-31"))
    assert error["code"] == "invalid", error
    assert "as_of" in error["message"] and "9999-12-30" in error["message"]
    ok = session.call("memory_search", query="lock dependencies", as_of="9999-12-30")
    assert not ok.get("isError"), ok


def test_as_of_past_the_last_date_in_the_browser_names_the_bound(home, shared_cache, session):
    ui = UI(home, shared_cache)
    try:
        cookie = {"Cookie": f"memory_agent_ui={ui.token}"}
        status, _, html = request(ui.base + "/search?q=uv&as_of=9999-12-31", headers=cookie)
    finally:
        ui.stop()
    assert status == 400
    assert "invalid" in html and "9999-12-30" in html and "internal" not in html


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("\u2066", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("\x85", "U+0085 NEXT LINE (NEL)"),
        ("\x9b", "U+009B"),
        ("\u200b", "U+200B ZERO WIDTH SPACE"),
        ("\u2028", "U+2028 LINE SEPARATOR"),
        ("\u2029", "U+2029 PARAGRAPH SEPARATOR"),
        ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ],
)
def test_invisible_and_control_characters_are_refused_in_a_title_naming_them(
    session, home, char, name
):
    before = _commits(home)
    error = _error(session.call("memory_add", title=f"Deploy{char} checklist", body="Run it."))
    assert error["code"] == "invalid" and error["message"].startswith("title:"), error
    assert name in error["message"]
    assert _commits(home) == before


def test_every_one_line_field_refuses_them(session, home):
    before = _commits(home)
    tags = _error(session.call("memory_add", title="Deploy", body="b", tags=["ci\u202e"]))
    assert tags["code"] == "invalid" and "tags" in tags["message"] and "U+202E" in tags["message"]
    rid = _error(session.call("memory_add", title="Deploy", body="b", request_id="r\u200b1"))
    assert "request_id" in rid["message"] and "U+200B" in rid["message"]
    reason = _error(session.call("memory_archive", id="use-uv-for-locking", reason="gone\u202e"))
    assert "reason" in reason["message"] and "U+202E" in reason["message"]
    assert _commits(home) == before
    plain = session.call("memory_add", title="Deploy 部署 – the checklist ✓", body="Run it.")
    assert not plain.get("isError"), plain  # non-ASCII text that is visible is fine


def test_arguments_have_strict_types(session, home):
    limit = _error(session.call("memory_search", query="lock dependencies", limit=True))
    assert limit["code"] == "invalid" and "limit" in limit["message"]
    before = _commits(home)
    confirm = _error(
        session.call("memory_archive", id="use-uv-for-locking", reason="moved", confirm="yes")
    )
    assert confirm["code"] == "invalid" and "confirm" in confirm["message"]
    importance = _error(
        session.call("memory_set_importance", id="use-uv-for-locking", importance=True)
    )
    assert importance["code"] == "invalid" and "importance" in importance["message"]
    assert _commits(home) == before


# 8 -------------------------------------------------------------------------------------------
def test_a_lone_surrogate_is_answered_with_the_requests_id(session):
    # json.dumps escapes it: the line carries "\ud800" as a JSON escape, as a client would
    reply = session.send(
        "tools/call",
        {"name": "memory_search", "arguments": {"query": "locks \ud800 here"}},
        timeout=60,
    )
    error = _error(reply["result"])
    assert error["code"] == "invalid" and "arguments.query" in error["message"]
    assert "U+D800" in error["message"]
    listed = session.send("tools/list", {"cursor": "\udfff"}, timeout=60)
    assert listed["error"]["code"] == -32602 and "U+DFFF" in listed["error"]["message"]
    assert not session.call("memory_search", query="lock dependencies").get("isError")


def test_bytes_that_are_not_utf8_are_answered_and_the_session_goes_on(home, shared_cache):
    env = env_for(home, shared_cache, MEMORY_AGENT_CLOCK=CLOCK)
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_search",'
        b'"arguments":{"query":"caf\xe9"}}}\n',
        b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"ping", oops\n',
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "proxy", "--home", str(home)],
        input=b"".join(lines),
        capture_output=True,
        env=env,
        timeout=120,
    )
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.decode().splitlines())}
    assert set(replies) == {1, 2, 3}, proc.stdout
    assert _error(replies[1]["result"])["code"] == "invalid"
    assert replies[2]["result"] == {}
    assert replies[3]["error"]["code"] == -32700


# 9 -------------------------------------------------------------------------------------------
def test_a_reader_that_stops_early_ends_the_command_quietly(session, home, shared_cache):
    body = "记忆 " * 30_000  # about 210 KB on stdout: more than a pipe holds
    added = session.call("memory_add", title="A very long note for the pipe test", body=body)
    assert not added.get("isError"), added
    env = env_for(home, shared_cache, MEMORY_AGENT_CLOCK=CLOCK)
    command = [
        sys.executable,
        "-m",
        "memory_agent",
        "get",
        added["structuredContent"]["id"],
        "--home",
        str(home),
    ]
    writer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    head = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True, timeout=120)
    writer.stdout.close()
    stderr = writer.stderr.read().decode()
    assert writer.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and not stderr.strip()
    assert head.stdout.decode().startswith(added["structuredContent"]["id"])


# 11 ------------------------------------------------------------------------------------------
def test_init_makes_an_existing_home_owner_only_and_says_so(tmp_path, shared_cache):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "config.toml").write_text('embedder = "minilm"\n', encoding="utf-8")
    (home / "config.toml").chmod(0o644)
    done = cli(home, shared_cache, "init", "--no-index", "--json")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    assert json.loads(done.stdout)["tightened"] == [
        f"{home}: 0755 -> 0700",
        f"{home / 'config.toml'}: 0644 -> 0600",
    ]
    home.chmod(0o750)
    again = cli(home, shared_cache, "init", "--no-index")  # a person reads this one
    assert again.returncode == 0, again.stderr
    assert f"made owner-only (it may hold private notes): {home}: 0750 -> 0700" in again.stdout


def test_a_new_config_toml_is_owner_only(tmp_path, shared_cache):
    home = tmp_path / "home"
    done = cli(home, shared_cache, "init", "--no-index", "--json", "--embedder", "minilm")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    assert json.loads(done.stdout)["tightened"] == []


# 12 ------------------------------------------------------------------------------------------
def test_a_confirm_writes_the_timestamps_its_preview_showed(tmp_path, shared_cache, minilm_model):
    from tests.memory_agent.helpers import make_memory

    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    memory = make_memory(tmp_path / "home", minilm_model, clock=Clock(CLOCK))
    memory.init(demo=True, embedder="minilm")
    try:
        gateway = Gateway(memory)
        args = {
            "old_id": "use-uv-for-locking",
            "title": "Lock dependencies with uv 0.5",
            "body": "uv lock, then uv sync --locked in CI.",
        }
        preview = gateway.supersede(**args)
        memory.clock.fixed += 59 * 60  # the user reads the preview for a while
        written = gateway.supersede(**args, confirm=True)
        for path, text in preview["preview"].items():
            assert Path(path).read_text(encoding="utf-8") == text, path
        assert written["status"] == "superseded"

        preview = gateway.archive("branch-naming", "moved to the wiki")
        memory.clock.fixed += 59 * 60
        gateway.archive("branch-naming", "moved to the wiki", confirm=True)
        ((path, text),) = preview["preview"].items()
        assert Path(path).read_text(encoding="utf-8") == text
    finally:
        memory.close()


# 13 ------------------------------------------------------------------------------------------
def test_a_reply_that_fails_its_output_schema_is_internal_and_logged(session, home):
    # A proposal the gate's state file holds without a title (an older version's file, or a
    # hand edit): memory_proposals' reply cannot match its output schema - our bug to report.
    inbox = home / "inbox"
    inbox.mkdir(mode=0o700, exist_ok=True)
    broken = {"id": "k1", "body": "b", "type": "pitfall", "episodes": [], "sessions": []}
    (inbox / "state.json").write_text(json.dumps({"proposed": {"k1": broken}}), encoding="utf-8")
    try:
        error = _error(session.call("memory_proposals"))
    finally:
        (inbox / "state.json").unlink()
    assert error["code"] == "internal", error
    assert "correct the arguments" not in error["fix"] and "daemon log" in error["fix"]
    log = _daemon_log(home)
    assert "tool memory_proposals crashed" in log and "Traceback" in log


def test_a_bug_in_the_background_gate_leaves_its_traceback_in_the_daemon_log(session, home):
    inbox = home / "inbox"
    inbox.mkdir(mode=0o700, exist_ok=True)
    # an observation that is not one: reading it is a bug in the gate (a corrupt whole file
    # is tolerated: the gate starts afresh)
    (inbox / "state.json").write_text('{"observed": {"k": "not an observation"}}', "utf-8")
    try:
        status, _, _ = DaemonClient(home).request(
            "POST",
            "/hooks/event",
            json.dumps({"event": "stop"}).encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 200
        deadline = time.monotonic() + 180  # the gate runs 2 s after the event, on a busy box
        while "gate failed" not in _daemon_log(home) and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the log the daemon writes, bounded
    finally:
        (inbox / "state.json").unlink()
    assert "gate failed" in _daemon_log(home), "the gate did not run within 180 s"
    after = _daemon_log(home).split("gate failed", 1)[1].splitlines()
    assert after[1:] and after[1].startswith("Traceback (most recent call last)"), after[:3]
    assert any("TypeError" in line for line in after[:40])


def test_a_hand_broken_entry_is_a_document_error_not_the_callers(session, home):
    path = home / "kb" / "note" / "hand-broken.md"
    path.write_text(
        "---\nid: hand-broken\ntitle: Broken by hand\ntype: note\nstatus: maybe\n"
        f"created: {CLOCK}\n---\nA body.\n",
        encoding="utf-8",
    )
    try:
        got = _error(session.call("memory_get", id="hand-broken"))
        superseded = _error(
            session.call("memory_supersede", old_id="hand-broken", title="Fixed", body="Body.")
        )
    finally:
        path.unlink()
    for error in (got, superseded):
        assert error["code"] == "document", error
        assert str(path) in error["message"] and "status" in error["message"]
        assert str(path) in error["fix"]


def test_admin_routes_answer_with_the_status_of_the_error(tmp_path, shared_cache):
    home = _new_home(tmp_path / "home", shared_cache)
    env = env_for(home, shared_cache, MEMORY_AGENT_CLOCK="2028-12-01T00:00:00Z")  # two years on
    client = DaemonClient(home)
    try:
        started = cli(home, shared_cache, "status", env=env)
        assert started.returncode == 0, started.stderr
        status, _, data = client.request("POST", "/admin/gc?dry_run=1")
        idle = json.loads(data)["archive"]
        assert status == 200 and idle, data
        path = home / "kb" / idle[0]["type"] / f"{idle[0]['id']}.md"
        with path.open("a", encoding="utf-8") as f:
            f.write("\nAn edit not committed yet.\n")
        status, _, data = client.request("POST", "/admin/gc?dry_run=0&confirm=1")
        error = json.loads(data)["error"]
        assert (status, error["code"]) == (409, "conflict"), (status, error)
        assert client.admin("gc?dry_run=1")["archive"]  # the client still reads the reply
    finally:
        _stop(home)


# 14 ------------------------------------------------------------------------------------------
def test_an_unknown_config_key_is_refused_with_the_nearest_name(tmp_path, shared_cache):
    home = _new_home(tmp_path / "home", shared_cache)
    toml = home / "config.toml"
    toml.write_text('embeder = "minilm"\n', encoding="utf-8")
    typo = cli(home, shared_cache, "status", timeout=120)
    assert typo.returncode == 2, typo.stderr
    assert "config:" in typo.stderr and "'embeder'" in typo.stderr
    assert "'embedder'" in typo.stderr and str(toml) in typo.stderr
    toml.write_text('embedder = "minilm"\nreranker_window = 40\n', encoding="utf-8")
    newer = cli(home, shared_cache, "status", timeout=120)
    assert newer.returncode == 2 and "'reranker_window'" in newer.stderr
    assert "newer version" in newer.stderr
    assert not daemon_pids(home)  # refused before anything started


def test_every_setting_a_module_reads_is_in_the_table():
    names = {s.name for s in config.SETTINGS}
    assert {"start_timeout", "fault"} <= names
    root = Path(__file__).resolve().parents[2] / "memory_agent"
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for env in ("MEMORY_AGENT_START_TIMEOUT", "MEMORY_AGENT_FAULT"):
            assert env not in text or path.name == "config.py", (path, env)
    # every MEMORY_AGENT_* name the package mentions is a setting of the table (the opencode
    # plugin's MEMORY_AGENT_BIN is the plugin's own variable, not one of ours; the openai
    # embedder's API key is on purpose no setting: the environment alone holds it)
    table = {s.env for s in config.SETTINGS}
    named = {
        name
        for path in root.rglob("*.py")
        for name in re.findall(r"MEMORY_AGENT_[A-Z_]+", path.read_text(encoding="utf-8"))
    }
    assert named - table - {"MEMORY_AGENT_BIN", config.API_KEY_ENV} == set()


def test_the_start_timeout_is_read_when_a_start_happens(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    monkeypatch.setenv("MEMORY_AGENT_START_TIMEOUT", "0.5")  # after memory_agent.client's import
    started = time.monotonic()
    with pytest.raises(DaemonError, match=r"within 0\.5 s"):
        DaemonClient(home)._wait_healthy()
    assert time.monotonic() - started < 10


def test_the_fault_setting_is_read_from_config_toml_like_any_other(tmp_path, shared_cache):
    home = _new_home(tmp_path / "home", shared_cache)
    with (home / "config.toml").open("a", encoding="utf-8") as f:
        f.write('fault = "after-commit"\n')
    env = env_for(home, shared_cache, MEMORY_AGENT_CLOCK=CLOCK)
    env.pop("MEMORY_AGENT_FAULT", None)
    try:
        before = _commits(home)
        added = cli(home, shared_cache, "add", "--title", "Faulted write", "--body", "b", env=env)
        assert added.returncode != 0 and "daemon" in added.stderr, added.stderr
        assert _commits(home) == before + 1  # killed right after its commit, as the hook says
    finally:
        _stop(home)
