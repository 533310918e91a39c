"""The portable layer, in the ordinary run (issue 28, item 3): each piece that Windows or macOS
takes is driven here on Linux for real - the daemon over TCP with its token, the watchfiles
watcher, process liveness through `ps`, git's lock holders through `ps` and `lsof`, and the
lockf lock in processes where memory-agent's code cannot import fcntl. (`scripts/check
--portable` runs the product's whole suite that way too.)"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.endpoint import read_endpoint
from memory_agent.index.memory import Memory
from memory_agent.index.portable_watch import PortableWatcher, watchfiles_available
from memory_agent.kb.gitrun import _git_processes_ps, git_processes
from memory_agent.procs import _ps_state, pid_alive
from tests.memory_agent.mcp_helpers import ProxySession

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "tests" / "portable" / "block_fcntl.py"


def test_the_daemon_over_tcp_answers_with_its_token_and_refuses_without(
    tmp_path, shared_cache, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_TRANSPORT", "tcp")
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    session = ProxySession(home, shared_cache, MEMORY_AGENT_TRANSPORT="tcp")
    try:
        session.initialize()
        DaemonClient(home).admin("refresh")  # the model and the first index (over TCP too)
        reply = session.call("memory_search", query="timestamps in UTC")
        assert reply["structuredContent"].get("hits"), reply  # through the proxy, over TCP
        endpoint = read_endpoint(home / "run")
        assert endpoint.kind == "tcp" and not (home / "run" / "daemon.sock").exists()
        assert oct((home / "run" / "daemon.json").stat().st_mode & 0o777) == "0o600"
        for headers in ({}, {"X-Memory-Agent-Token": "guess"}):
            conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
            conn.request("GET", "/health", headers=headers)
            response = conn.getresponse()
            assert response.status == 401
            assert "token" in json.loads(response.read())["error"]["message"]
            conn.close()
    finally:
        session.close()
        DaemonClient(home).stop(wait=True)
    assert not (home / "run" / "daemon.json").exists()  # a stopped daemon takes its file away


def test_a_stale_endpoint_file_is_no_daemon_and_the_next_call_starts_one(
    tmp_path, shared_cache, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_TRANSPORT", "tcp")
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    (home / "run" / "daemon.json").write_text(
        json.dumps({"transport": "tcp", "port": 9, "token": "old", "pid": 1})
    )
    client = DaemonClient(home)
    assert client.health() is None  # a dead daemon's file: nothing answers there
    try:
        assert client.ensure()["status"] in ("ok", "degraded", "loading")
        assert read_endpoint(home / "run").port != 9
    finally:
        client.stop(wait=True)


@pytest.mark.skipif(not watchfiles_available(), reason="watchfiles is not installed")
def test_the_watchfiles_watcher_reports_writes_deletes_and_new_folders(tmp_path):
    """And each in the very next drain: the fence (a write of its own it waits to see) makes
    the watcher thread's delivery part of the drain, as inotify's queue is."""
    (tmp_path / "note").mkdir()
    watcher = PortableWatcher(tmp_path / "fence")
    try:
        assert watcher.watch(tmp_path) and watcher.watch(tmp_path / "note")
        assert not watcher.watch(tmp_path / "missing")
        assert watcher.drain().paths == set()  # (starts the watcher)
        entry = tmp_path / "note" / "a.md"
        entry.write_text("one")
        seen = watcher.drain()
        assert seen.paths == {entry} and seen.rescan is None
        assert watcher.drain().paths == set()  # reported once
        entry.unlink()
        assert watcher.drain().paths == {entry}
        (tmp_path / "fact").mkdir()
        assert "appeared" in watcher.drain().rescan
    finally:
        watcher.close()


@pytest.mark.skipif(not watchfiles_available(), reason="watchfiles is not installed")
def test_a_file_written_right_after_the_first_scan_is_seen_by_watchfiles(
    tmp_path, shared_cache, monkeypatch
):
    """The watchfiles watcher starts after the full scan has read the folders (its folder set
    is fixed at start): a file written in between was never reported, so the next search ranked
    without it (the portable run's two-stage search test). The scan reads the folders again once
    the watcher is up."""
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    memory = Memory(config.load({"home": str(home), "watcher": "watchfiles"}), resident=True)
    try:
        assert memory.start_watching()
        assert isinstance(memory.scanner.watcher, PortableWatcher)
        with memory.session():
            memory.refresh()
        path = memory.kb_dir / "fact" / "zephyrine-quota.md"
        path.write_text(
            "---\nid: zephyrine-quota\ntitle: The zephyrine quota\ntype: fact\n"
            "status: active\ncreated: 2026-11-30T10:00:00Z\n---\n\nNine crates a week.\n"
        )
        with memory.session():
            memory.refresh()
            assert memory.index.doc("zephyrine-quota") is not None
    finally:
        memory.close()


def test_liveness_through_ps_tells_a_zombie_from_a_live_process():
    """What macOS takes (no /proc): `ps`'s state of the process."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _ps_state(child.pid) not in ("Z", "") and pid_alive(child.pid)
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while _ps_state(child.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _ps_state(child.pid) == "Z" and not pid_alive(child.pid)  # exited, not reaped
    child.wait()
    assert _ps_state(child.pid) == "" and not pid_alive(child.pid)


@pytest.mark.skipif(not shutil.which("lsof"), reason="no lsof on this machine")
def test_git_lock_holders_through_ps_and_lsof_match_the_process_table(tmp_path):
    repo = tmp_path / "kb"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    holder = subprocess.Popen(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 10
        while not git_processes(repo) and time.monotonic() < deadline:
            time.sleep(0.01)
        from_proc = git_processes(repo)
        assert from_proc and from_proc[0][0] == holder.pid
        assert _git_processes_ps(str(repo.resolve())) == from_proc
        assert _git_processes_ps(str((tmp_path / "other").resolve())) == []
    finally:
        holder.communicate(b"x")


def test_without_fcntl_our_code_locks_with_lockf_and_excludes_another_process(tmp_path):
    """A process where memory-agent's code cannot import fcntl (as on Windows) takes the
    lockf path; two such processes still exclude each other, and a waiter names the holder."""
    env = dict(os.environ, MEMORY_AGENT_PORTABLE_BLOCK=str(BLOCK), PYTHONPATH=str(ROOT))
    lock = tmp_path / "home.lock"
    hold = (
        "import sys\nfrom memory_agent.files import FileLock, lock_backend\n"
        "assert lock_backend() == 'lockf', lock_backend()\n"
        "FileLock(sys.argv[1]).acquire()\nprint('held', flush=True)\nsys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        wait = (
            "import sys\nfrom memory_agent.files import FileLock\n"
            "from memory_agent.errors import LockBusy\n"
            "try:\n    FileLock(sys.argv[1]).acquire(timeout=0.3)\n"
            "except LockBusy as exc:\n    print(exc.message)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", wait, str(lock)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert f"held by process {holder.pid}" in out.stdout, out.stdout + out.stderr
    finally:
        holder.kill()
        holder.wait(timeout=10)
