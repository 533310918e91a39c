"""`memory-agent scrub`: what earlier versions stored verbatim - plain and gzipped journals, events,
the gate's inbox - redacted in place, idempotent; the daemon scrubs once at its first start and the
episodes follow; the gate's read positions are reset so no episode counts twice; a running daemon is
stopped before the journal is rewritten. (Issue 17.)

(`capture_home` is the memory_agent conftest's.)"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.capture.gate import Gate, read_state
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.intake.journal import read_session, sessions
from memory_agent.serve.scrub import scrub_home
from tests.memory_agent.mcp_helpers import daemon_pids, env_for
from tests.memory_agent.stored_secrets import AWS_SECRET, stored

OLD = {  # what an earlier version stored verbatim
    "input password": "OldPl41nPassw0rd",
    "curl": "Hunt3rCurlPass",
    "env secret": AWS_SECRET,
    "query": "Qu3ryS3cretPassw0rd",
    "gz prompt": "GzPr0mptS3cretVal",
    "inbox": "Inb0xS3cretValue",
}


def old_records(session: str, secret_of: str) -> list[dict]:
    return [
        {
            "ts": 100.0,
            "event": "prompt",
            "session": session,
            "client": "claude-code",
            "prompt": f"deploy with password {OLD[secret_of]} please",
        },
        {
            "ts": 101.0,
            "event": "tool",
            "session": session,
            "client": "claude-code",
            "tool": "Bash",
            "input": {
                "command": f"curl -u ci:{OLD['curl']} https://x.io",
                "password": OLD["input password"],
                "env": {"AWS_SECRET_ACCESS_KEY": OLD["env secret"]},
            },
            "output": "ok",
            "ok": True,
        },
        {"ts": 102.0, "event": "stop", "session": session, "answer": "done"},
    ]


def lines(records: list[dict]) -> bytes:
    return b"".join((json.dumps(r) + "\n").encode() for r in records)


@pytest.fixture
def old_home(tmp_path):
    """A home as an earlier version left it: a plain journal, a gzipped part, events (plain
    and gzipped) and a gate inbox holding secrets, and one lesson the gate wrote by itself."""
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    j = home / "journal"
    j.mkdir(mode=0o700, exist_ok=True)
    (j / "s-plain.jsonl").write_bytes(lines(old_records("s-plain", "input password")))
    (j / "s-gz.jsonl.4000-1700000000000000000.gz").write_bytes(
        gzip.compress(lines(old_records("s-gz", "gz prompt")))
    )
    (j / "s-gz.jsonl").write_bytes(lines([{"ts": 200.0, "event": "prompt", "prompt": "later"}]))
    (j / ".s-gz.jsonl.gz.tmp-999999999-abc123").write_bytes(b"crashed copy " + OLD["curl"].encode())
    ev = home / "events"
    ev.mkdir(mode=0o700, exist_ok=True)
    query = {
        "kind": "query",
        "qid": "q",
        "text": f"password {OLD['query']}",
        "results": 0,
        "ts": 1.0,
    }
    (ev / "20250101T000000-1-aaaaaa.jsonl").write_bytes(lines([query]))
    (ev / "20240101T000000-2-bbbbbb.jsonl.gz").write_bytes(gzip.compress(lines([query])))
    (home / "inbox").mkdir(mode=0o700, exist_ok=True)
    (home / "inbox" / "state.json").write_text(
        json.dumps(
            {
                "proposed": {
                    "k1": {"title": "curl fails", "command": f"curl -u ci:{OLD['inbox']} x"}
                },
                "promoted": {},
            }
        )
    )
    (home / "kb" / "pitfall").mkdir(exist_ok=True)
    (home / "kb" / "pitfall" / "auto-lesson.md").write_text(
        "---\nid: auto-lesson\ntitle: pytest fails without the fixture\ntype: pitfall\n"
        "status: active\ncreated: '2026-01-01T00:00:00Z'\ntags: [auto]\nsource: auto\n---\n\n"
        "Observed output: ...\n"
    )
    return home


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env_for(home, home.parent / "cache"),
        timeout=300,
    )


def test_scrub_redacts_plain_and_gzipped_journals_events_and_inbox(old_home):
    before = {
        name: list(read_session(paths)) for name, paths in sessions(old_home / "journal").items()
    }
    assert OLD["gz prompt"] in stored(old_home)  # the test sees inside gzip
    proc = run_cli(old_home, "scrub", "--json", "--no-rebuild")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["journal"]["lines"] == 4  # prompt + tool of each session
    assert report["events"]["lines"] == 2 and report["inbox"] == 1
    assert [lesson["id"] for lesson in report["auto_lessons"]] == ["auto-lesson"]
    assert report["auto_lessons"][0]["archive"].startswith("memory-agent archive auto-lesson ")
    everything = stored(old_home)
    for name, secret in OLD.items():
        assert secret not in everything, f"{name} still stored"
    assert (old_home / "run" / "scrub-v1").exists()
    # the records are all still there, in order, only redacted
    after = {
        name: list(read_session(paths)) for name, paths in sessions(old_home / "journal").items()
    }
    assert {n: [r["event"] for r in rs] for n, rs in after.items()} == {
        n: [r["event"] for r in rs] for n, rs in before.items()
    }
    assert after["s-gz"][-1]["prompt"] == "later"
    assert after["s-plain"][1]["input"]["command"].startswith("curl -u ")
    # idempotent: a second run changes nothing
    snapshot = {
        p: p.read_bytes() for p in old_home.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    again = json.loads(run_cli(old_home, "scrub", "--json", "--no-rebuild").stdout)
    assert again["journal"]["lines"] == again["events"]["lines"] == again["inbox"] == 0
    now = {p: p.read_bytes() for p in old_home.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert now == snapshot


def test_the_daemon_scrubs_at_its_first_start_and_the_episodes_follow(
    old_home, shared_cache, monkeypatch
):
    """Run once on upgrade: the daemon scrubs when run/scrub-v1 is absent, then builds a fresh
    index generation (it writes the marker last), so no episode built from the old journal
    text stays searchable, and the old generation's files are gone."""
    for key, value in env_for(old_home, shared_cache).items():
        if key.startswith("MEMORY_AGENT_") or key == "PYTHONPATH":  # the daemon runs this tree
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("MEMORY_AGENT_JOURNAL_RETENTION_DAYS", "100000")  # episodes of 1970
    client = DaemonClient(old_home)
    marker = old_home / "run" / "scrub-v1"
    try:
        client.ensure()
        # the files are scrubbed before the daemon answers (the gate never reads old text)
        for name, secret in OLD.items():
            assert secret not in stored(old_home / "journal") + stored(old_home / "events"), name
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:  # the scrub's own signal
            time.sleep(0.2)
        assert marker.exists(), (old_home / "run" / "daemon.log").read_text()[-2000:]
        for name, secret in OLD.items():
            assert secret not in stored(old_home), f"{name} still stored"
        hits = client.call_tool(
            "memory_search", {"query": "deploy with password please", "include_episodes": True}
        )["hits"]
        assert [h for h in hits if h["id"].startswith("episodes/")], hits
        assert "[REDACTED" in json.dumps(hits)
        # on demand, with this version's daemon running: nothing left to do, the daemon's own
        # events file (held open) is left alone, the daemon keeps running
        live = sorted((old_home / "events").glob(f"*-{client.pid()}-*.jsonl"))
        assert live
        before = {p: p.stat().st_ino for p in live}
        proc = run_cli(old_home, "scrub", "--json")
        assert proc.returncode == 0, proc.stderr
        again = json.loads(proc.stdout)
        assert again["journal"]["lines"] == again["events"]["lines"] == 0
        assert again["index"] is None and again["stopped_daemon"] is None
        assert {p: p.stat().st_ino for p in live} == before
        assert client.health() is not None
    finally:
        client.stop(wait=True)
        for pid in daemon_pids(old_home):
            os.kill(pid, signal.SIGKILL)


def failure_fix_records(session: str, n: int, secret: str) -> list[dict]:
    """One turn: a command fails, a file is edited, the same command passes."""
    base = {"session": session, "client": "claude-code", "cwd": "/w"}
    return [
        {**base, "ts": 100.0 + n, "event": "prompt", "prompt": f"deploy, password={secret}{n}"},
        {
            **base,
            "ts": 100.1 + n,
            "event": "tool",
            "tool": "Bash",
            "ok": False,
            "input": {"command": "make deploy"},
            "error": "Error: missing DEPLOY_TARGET",
        },
        {
            **base,
            "ts": 100.2 + n,
            "event": "tool",
            "tool": "Edit",
            "ok": True,
            "input": {"file_path": "/w/settings.py"},
            "output": "ok",
        },
        {
            **base,
            "ts": 100.3 + n,
            "event": "tool",
            "tool": "Bash",
            "ok": True,
            "input": {"command": "make deploy"},
            "output": "done",
        },
        {**base, "ts": 100.4 + n, "event": "stop", "answer": "deployed"},
    ]


def test_scrub_resets_the_gates_read_positions_so_no_episode_is_counted_twice(capture_home):
    """The gate knows a journal file by the hash of its first line and reads on from an
    offset. A scrub that rewrote the first line made it read the file whole again: every
    episode counted twice (new ids), the prompt counter doubled."""
    home = capture_home
    secret = "Hunt3rPassw0rdGate"
    folder = home / "journal"
    folder.mkdir(mode=0o700, exist_ok=True)
    for session in ("s-gate-a", "s-gate-b"):
        records = [r for n in (1, 2) for r in failure_fix_records(session, n, secret)]
        (folder / f"{session}.jsonl").write_bytes(lines(records))
    memory = Memory(config.load({"home": str(home)}))
    gate = Gate(memory, gateway=None)
    first = gate.run()
    assert first["proposed"], first  # 4 episodes of 2 sessions: a qualified lesson
    before = read_state(home)
    (key,) = before["observed"]
    assert len(before["observed"][key]["episodes"]) == 4

    report = scrub_home(home, mark=False)
    assert report["journal"]["sessions"] == ["s-gate-a", "s-gate-b"]
    assert secret not in stored(folder)
    gate.run()
    after = read_state(home)
    assert sorted(after["observed"][key]["episodes"]) == sorted(before["observed"][key]["episodes"])
    assert {n: e["prompts"] for n, e in after["journal"].items()} == {"s-gate-a": 2, "s-gate-b": 2}
    assert after["proposed"].keys() == before["proposed"].keys()
    assert secret not in stored(home / "inbox")
    # appended after the scrub: read once, numbered on
    with open(folder / "s-gate-a.jsonl", "ab") as fh:
        fh.write(lines(failure_fix_records("s-gate-a", 3, "x")))
    gate.run()
    episodes = read_state(home)["observed"][key]["episodes"]
    assert sorted(episodes) == sorted([*before["observed"][key]["episodes"], "episodes/s-gate-a/3"])


def test_scrub_on_demand_stops_a_running_daemon_before_it_rewrites_the_journal(
    old_home, shared_cache, monkeypatch
):
    """The daemon's gate runs in another process, with no lock the CLI could share: were it to
    run between a file's rewrite and the reset of its read positions (or save a state read
    before the reset), it would count the session twice. So `memory-agent scrub` stops a
    running daemon (this version's too) when it has a journal file or the gate's state to
    rewrite, and holds the spawn lock while it does."""
    for key, value in env_for(old_home, shared_cache).items():
        if key.startswith("MEMORY_AGENT_") or key == "PYTHONPATH":
            monkeypatch.setenv(key, value)
    (old_home / "run").mkdir(exist_ok=True)
    (old_home / "run" / "scrub-v1").write_text("scrubbed by an earlier run\n")  # no scrub at start
    path = old_home / "inbox" / "state.json"
    state = json.loads(path.read_text())
    state["journal"] = {
        "s-plain": {
            "files": {"0123456789abcdef": {"offset": 900}},
            "parts": [],
            "prompts": 1,
            "tail": None,
        }
    }
    path.write_text(json.dumps(state))
    client = DaemonClient(old_home)
    try:
        client.ensure()
        pid = client.pid()
        proc = run_cli(old_home, "scrub", "--json", "--no-rebuild")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["stopped_daemon"] == pid
        assert client.health() is None
        assert report["journal"]["sessions"] == ["s-gz", "s-plain"]
        assert "s-plain" not in read_state(old_home)["journal"]  # read again, once, cleanly
        for name, secret in OLD.items():
            assert secret not in stored(old_home), f"{name} still stored"
    finally:
        client.stop(wait=True)
        for pid in daemon_pids(old_home):
            os.kill(pid, signal.SIGKILL)


def test_a_starting_daemon_scrubs_without_reading_every_kb_file(old_home, monkeypatch):
    """Before it serves, a starting daemon scrubs the journal, the events and the inbox - not
    the KB: listing the gate's own lessons read every entry (minutes at 1,000,000 entries,
    before the first answer). `memory-agent scrub` still lists them."""
    import threading
    from types import SimpleNamespace

    from memory_agent.kb import entries
    from memory_agent.serve import scrub

    reads = []
    real = entries.read_entry
    monkeypatch.setattr(entries, "read_entry", lambda path: reads.append(path) or real(path))
    service = SimpleNamespace(
        memory=SimpleNamespace(home=old_home),
        events=SimpleNamespace(path=old_home / "events" / "none.jsonl"),
        gate_lock=threading.Lock(),
    )
    report = scrub._scrub_files(service)
    assert report["journal"]["lines"] > 0  # it did scrub
    assert reads == [] and report["auto_lessons"] is None
    assert [lesson["id"] for lesson in scrub_home(old_home)["auto_lessons"]] == ["auto-lesson"]
    assert reads  # the on-demand scrub reads the KB for its list
