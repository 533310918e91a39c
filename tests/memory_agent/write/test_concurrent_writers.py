"""Many processes writing at once, and processes killed mid-write: every write committed once, and a
kill between the write and its commit, or between the commit and the index refresh, repaired by the
next write without overwriting a later edit."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from memory_agent.recall import reads
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import git, make_memory

WRITER = textwrap.dedent("""
    import json, sys
    from memory_agent import config
    from memory_agent.write.gateway import Gateway
    from memory_agent.index.memory import Memory
    from tests.memory_agent.distinct_facts import fact
    worker = int(sys.argv[1])
    gateway = Gateway(Memory(config.load()))
    replies = []
    for n in range(10):
        title, body = fact(worker, n)
        replies.append(gateway.add(title, body, type="fact"))
    print(json.dumps(replies))
""")


ROOT = str(Path(__file__).resolve().parents[3])  # the repository


def _env(home, cache, **extra):
    return dict(
        os.environ,
        MEMORY_AGENT_HOME=str(home),
        MEMORY_AGENT_CACHE=str(cache),
        MEMORY_AGENT_EMBEDDER="minilm",
        PYTHONPATH=ROOT,
        **extra,
    )


def test_eight_processes_adding_ten_entries_each_end_with_eighty_commits(
    tmp_path, minilm_model, shared_cache
):
    home = tmp_path / "home"
    memory = make_memory(home, minilm_model)
    memory.init(embedder="minilm")
    start = int(git(memory.kb_dir, "rev-list", "--all", "--count") or 0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(home, shared_cache),
        )
        for w in range(8)
    ]
    replies = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        replies += json.loads(out)
    assert [r["status"] for r in replies] == ["created"] * 80
    assert len({r["id"] for r in replies}) == 80
    assert len(list((memory.kb_dir / "fact").glob("*.md"))) == 80
    assert int(git(memory.kb_dir, "rev-list", "--count", "HEAD")) == start + 80
    subprocess.run(
        ["git", "-C", str(memory.kb_dir), "fsck", "--strict"], check=True, capture_output=True
    )
    assert git(memory.kb_dir, "status", "--porcelain") == ""
    status = memory.status()
    assert status["consistent"] and status["entries"] == 80 and status["pending"] == 0


def _killed_add(home, cache, fault, request_id):
    code = (
        "from memory_agent import config\nfrom memory_agent.write.gateway import Gateway\n"
        "from memory_agent.index.memory import Memory\n"
        "Gateway(Memory(config.load())).add('Killed mid-write', "
        "'The process was killed while writing this entry.', type='note', "
        f"request_id={request_id!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(home, cache, MEMORY_AGENT_FAULT=fault),
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def test_a_kill_between_write_and_commit_is_repaired_by_the_next_write(
    tmp_path, minilm_model, shared_cache
):
    home = tmp_path / "home"
    memory = make_memory(home, minilm_model)
    memory.init(embedder="minilm")
    head = git(memory.kb_dir, "rev-parse", "HEAD")
    _killed_add(home, shared_cache, "after-write", "req-killed-1")
    path = memory.kb_dir / "note" / "killed-mid-write.md"
    assert path.is_file()  # written, not committed
    assert git(memory.kb_dir, "rev-parse", "HEAD") == head
    assert memory.status()["pending"] == 1
    retry = Gateway(memory).add(
        "Killed mid-write",
        "The process was killed while writing this entry.",
        request_id="req-killed-1",
    )
    assert retry["status"] == "created" and retry["id"] == "killed-mid-write"
    assert retry["commit"] == git(memory.kb_dir, "rev-parse", "HEAD").strip() != head.strip()
    assert "(recovered)" in git(memory.kb_dir, "log", "-1", "--format=%s")
    assert git(memory.kb_dir, "status", "--porcelain") == ""
    status = memory.status()
    assert status["pending"] == 0 and status["consistent"]
    assert (
        reads.search(memory, "process killed while writing", limit=1)["hits"][0]["id"]
        == retry["id"]
    )
    assert len(list(memory.kb_dir.rglob("killed-mid-write*.md"))) == 1


def test_a_kill_between_commit_and_refresh_is_repaired_and_the_index_reconciled(
    tmp_path, minilm_model, shared_cache
):
    home = tmp_path / "home"
    memory = make_memory(home, minilm_model)
    memory.init(embedder="minilm")
    _killed_add(home, shared_cache, "after-commit", "req-killed-2")
    assert git(memory.kb_dir, "log", "-1", "--format=%s").strip() == "memory: add killed-mid-write"
    other = Gateway(memory).add("Unrelated entry", "Something else entirely, about printers.")
    assert other["status"] == "created"
    status = memory.status()
    assert status["pending"] == 0 and status["consistent"] and status["entries"] == 2
    # the killed call's retry gets its reply, with the commit that was made before the kill
    retry = Gateway(memory).add(
        "Killed mid-write",
        "The process was killed while writing this entry.",
        request_id="req-killed-2",
    )
    assert retry["status"] == "created" and retry["id"] == "killed-mid-write"
    assert (
        retry["commit"]
        == git(memory.kb_dir, "log", "-1", "--format=%H", "--", "note/killed-mid-write.md").strip()
    )
    assert int(git(memory.kb_dir, "rev-list", "--count", "HEAD")) == 3  # init, killed, other


def test_recovery_never_overwrites_an_edit_made_after_the_commit(
    tmp_path, minilm_model, shared_cache
):
    home = tmp_path / "home"
    memory = make_memory(home, minilm_model)
    memory.init(embedder="minilm")
    _killed_add(home, shared_cache, "after-commit", "req-killed-3")
    path = memory.kb_dir / "note" / "killed-mid-write.md"
    edited = path.read_text().replace("was killed", "was definitely killed")
    path.write_text(edited)  # the user fixes the entry before any daemon comes back
    Gateway(memory).add("Unrelated entry", "Something else entirely, about printers.")
    assert path.read_text() == edited
    assert memory.status()["pending"] == 0
