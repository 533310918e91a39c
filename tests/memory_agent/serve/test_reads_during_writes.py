"""Many agents at once: reads never wait for writes, and see each write whole.

A write is held in flight by a `git` on the daemon's PATH that, once armed, stops at the write's
commit (`git commit-tree`) until the test lets it go: the memory's own write path, held at a point
every version of it passes while it writes. On the code before issue 18 every read waited for the
write's lock, so these tests failed there (a search sent while the write was held got no answer
until the write was let go)."""

from __future__ import annotations

import json
import os
import signal
import stat
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

ANSWER_S = 60  # a read held behind the write would wait for the hold (bounded at 180 s)

GIT_SHIM = """#!/bin/sh
# The real git, except that once $HOLD_DIR/armed exists a commit waits for $HOLD_DIR/go.
case " $* " in
  *" commit-tree "*|*" commit "*)
    if [ -e "$HOLD_DIR/armed" ]; then
      touch "$HOLD_DIR/held"
      i=0
      while [ ! -e "$HOLD_DIR/go" ] && [ $i -lt 1800 ]; do sleep 0.1; i=$((i+1)); done
    fi;;
esac
exec {git} "$@"
"""


def _git() -> str:
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "git"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise RuntimeError("git not found")


class Held:
    """The daemon of a demo home, with a `git` that can hold a write at its commit."""

    def __init__(self, tmp_path: Path, cache: Path):
        self.home = tmp_path / "home"
        self.dir = tmp_path / "hold"
        shim = tmp_path / "shim"
        shim.mkdir()
        self.dir.mkdir()
        (shim / "git").write_text(GIT_SHIM.replace("{git}", _git()))
        (shim / "git").chmod(stat.S_IRWXU)
        self.cache = cache
        self.extra = {
            "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOLD_DIR": str(self.dir),
        }
        Memory(config.load({"home": str(self.home)})).init(demo=True, embedder="minilm", sync=False)
        self.daemon = subprocess.Popen(
            [sys.executable, "-m", "memory_agent", "daemon", "--home", str(self.home), "--preload"],
            env=env_for(self.home, cache, **self.extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = DaemonClient(self.home, timeout=ANSWER_S)
        deadline = time.monotonic() + 120
        while self.client.health() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        # the model is loaded and the first index built (slow on a busy machine)
        DaemonClient(self.home, timeout=900).admin("refresh")

    def session(self) -> ProxySession:
        s = ProxySession(self.home, self.cache, **self.extra)
        s.initialize()
        return s

    def arm(self) -> None:
        (self.dir / "armed").touch()

    def wait_held(
        self, *threads: threading.Thread, outs: list[dict] = (), timeout: float = 600
    ) -> None:
        """Until a write stands at its commit (a 100,000-character entry embeds for a while
        on a busy machine first)."""
        deadline = time.monotonic() + timeout
        while not (self.dir / "held").exists() and time.monotonic() < deadline:
            assert any(t.is_alive() for t in threads), f"the write ended before its commit: {outs}"
            time.sleep(0.05)
        assert (self.dir / "held").exists(), "no write reached its commit"

    def release(self) -> None:
        (self.dir / "armed").unlink(missing_ok=True)
        (self.dir / "go").touch()

    def close(self) -> None:
        self.release()
        try:
            self.daemon.terminate()
            self.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
        for pid in daemon_pids(self.home):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def held(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    h = Held(tmp_path, shared_cache)
    yield h
    h.close()


def _call(s: ProxySession, name: str, **arguments) -> dict:
    """A tool call that must be answered within ANSWER_S (it raises otherwise)."""
    reply = s.send("tools/call", {"name": name, "arguments": arguments}, timeout=ANSWER_S)
    result = reply["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


def _in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["reply"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _big_body() -> str:
    """About 100,000 characters of distinct sentences (the body limit is 100,000)."""
    sentences = []
    n = 0
    while sum(len(s) + 1 for s in sentences) < 99_000:
        sentences.append(
            f"Observation {n}: the quokka-{n % 97} ledger shard {n * 7919 % 10007} "
            f"rebalanced after step {n % 13} of the zephyrine migration."
        )
        n += 1
    body = " ".join(sentences)
    return body[:100_000]


def test_a_search_is_answered_while_a_large_add_is_in_flight(held):
    writer, reader = held.session(), held.session()
    try:
        held.arm()
        add, out = _in_thread(
            _call, writer, "memory_add", title="The zephyrine migration log", body=_big_body()
        )
        held.wait_held(add)
        # the add is in flight (its files written, its commit held): every read answers
        hits = _call(reader, "memory_search", query="how do we lock dependencies")
        assert hits["hits"] and add.is_alive() and "reply" not in out
        status, _, data = held.client.request(
            "POST",
            "/hooks/recall",
            json.dumps(
                {
                    "prompt": "how do we lock dependencies in this repo?",
                    "session": "s1",
                    "event": "prompt",
                }
            ).encode(),
            {"Content-Type": "application/json"},
            timeout=ANSWER_S,
        )
        assert status == 200 and "context" in json.loads(data)
        assert _call(reader, "memory_index_status")["consistent"] is True
        overview = held.client.request("GET", "/admin/overview", timeout=ANSWER_S)
        assert overview[0] == 200 and json.loads(overview[2])["types"]
        assert add.is_alive() and "reply" not in out  # all of that while the add was held
        # nothing of the held add is visible yet: it is published whole, after its commit
        before = _call(reader, "memory_search", query="zephyrine migration quokka ledger")
        assert all("zephyrine" not in h["id"] for h in before["hits"])
        held.release()
        add.join(timeout=600)
        assert "error" not in out, out.get("error")
        reply = out["reply"]
        assert reply["status"] == "created" and reply["generation"]
        # read-your-writes: a search sent after the reply finds the entry
        after = _call(reader, "memory_search", query="zephyrine migration quokka ledger")
        assert reply["id"] in [h["id"] for h in after["hits"]]
        assert after["generation"] == reply["generation"]
    finally:
        writer.close()
        reader.close()


def test_a_search_during_a_supersede_sees_the_old_entry_or_the_new_one_never_both(held):
    writer, reader = held.session(), held.session()
    try:
        first = _call(
            writer,
            "memory_add",
            title="Vendoring policy for the flumox toolchain",
            body="We vendor flumox releases under third_party/flumox and pin them by hash.",
        )
        assert first["status"] == "created"
        query = "flumox vendoring policy"
        assert first["id"] in [h["id"] for h in _call(reader, "memory_search", query=query)["hits"]]
        held.arm()
        supersede, out = _in_thread(
            _call,
            writer,
            "memory_supersede",
            old_id=first["id"],
            title="Vendoring policy for the flumox toolchain, revised",
            body="We no longer vendor flumox: it is installed from the internal mirror, pinned.",
            confirm=True,
        )
        held.wait_held(supersede)
        during = [h["id"] for h in _call(reader, "memory_search", query=query)["hits"]]
        assert supersede.is_alive() and "reply" not in out
        assert first["id"] in during  # the old state, whole: the old entry still active ...
        assert not [i for i in during if i != first["id"] and "flumox" in i]  # ... alone
        held.release()
        supersede.join(timeout=300)
        assert "error" not in out, out.get("error")
        new_id = out["reply"]["id"]
        after = [h["id"] for h in _call(reader, "memory_search", query=query)["hits"]]
        assert new_id in after and first["id"] not in after  # the new state, whole
    finally:
        writer.close()
        reader.close()


def test_concurrent_writers_all_commit_while_reads_answer(held):
    n = 6
    sessions = [held.session() for _ in range(n)]
    reader = held.session()
    kb = held.home / "kb"
    count = int(
        subprocess.run(
            ["git", "-C", str(kb), "rev-list", "--count", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    try:
        held.arm()
        writes = [
            _in_thread(
                _call,
                s,
                "memory_add",
                title=f"Runbook step {i} for the kelvar cluster",
                body=f"Step {i}: drain node kelvar-{i} with `kctl drain kelvar-{i}` first, "
                f"then rotate its certificate {i * 31}.",
                type="guideline",
                force=True,
            )
            for i, s in enumerate(sessions)
        ]
        held.wait_held(*(t for t, _ in writes), outs=[out for _, out in writes])
        # one write stands at its commit, the others queue behind it: reads still answer
        assert _call(reader, "memory_search", query="how do we lock dependencies")["hits"]
        assert _call(reader, "memory_index_status")["consistent"] is True
        assert sum(t.is_alive() for t, _ in writes) == n  # no write has replied yet
        held.release()
        for t, _ in writes:
            t.join(timeout=300)
        replies = [out.get("reply") or out.get("error") for _, out in writes]
        assert all(isinstance(r, dict) and r["status"] == "created" for r in replies), replies
        ids = {r["id"] for r in replies}
        assert len(ids) == n
        after = int(
            subprocess.run(
                ["git", "-C", str(kb), "rev-list", "--count", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert after == count + n  # one commit each, none lost
        found = _call(reader, "memory_search", query="kelvar cluster runbook drain", limit=20)
        assert ids <= {h["id"] for h in found["hits"]}
        status = _call(reader, "memory_index_status")
        assert status["consistent"] is True and status["pending"] == 0
    finally:
        for s in [*sessions, reader]:
            s.close()
