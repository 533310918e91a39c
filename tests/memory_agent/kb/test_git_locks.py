"""Git as people use it - git's lock files and a full disk: sixty adds beside an editor's `git
status` loop are retried and leave nothing staged; a stale `index.lock` is named stale with the
command that removes it, a lock held while git runs names the process and says wait, and where the
process table cannot be read no lock is called stale; a full disk is called a full disk. Real git in
tmp folders, the real daemon and CLI. (Issue 18; each test failed on the code before its fix, see
the comment above it.)

(`home` is kb/conftest.py's.)"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.errors import GitError, ToolCallError
from memory_agent.index.memory import Memory
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.gitrun import git_processes
from tests.memory_agent.kb.git_by_hand import CLOCK, _stop, add, files_of, git, refused
from tests.memory_agent.mcp_helpers import ROOT


class IdeLoop:
    """What an editor does to a repository: `git status` again and again, each refreshing the
    index under `.git/index.lock` for a moment (held here for 15-40 ms, as a large repo's
    refresh does)."""

    def __init__(self, kb: Path):
        self.kb, self.stop, self.held = kb, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        lock = self.kb / ".git" / "index.lock"
        n = 0
        while not self.stop.is_set():
            n += 1
            subprocess.run(
                ["git", "-C", str(self.kb), "status", "--porcelain"], capture_output=True
            )
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            self.held += 1
            self.stop.wait(0.015 + 0.025 * (n % 2))
            os.close(fd)
            os.unlink(lock)
            self.stop.wait(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


# Before: 20-32 of 60 adds failed with write_failed (the fix said to delete index.lock), and
# their files stayed staged: `git checkout -- .` brought back entries reported as not written.
def test_sixty_adds_beside_an_editors_git_loop_are_retried_and_leave_nothing_staged(home):
    kb = home / "kb"
    add(home, "Warm the daemon", "The first add loads the model.")
    results: list[dict | ToolCallError] = []
    with IdeLoop(kb) as loop:
        for n in range(60):
            try:
                title, body = f"Editor loop entry {n}", f"Body {n}: distinct text {n * 7919}."
                results.append(add(home, title, body, force=True))  # near each other
            except ToolCallError as exc:
                results.append(exc)
    assert loop.held > 20  # the lock really was taken again and again
    failed = [r for r in results if isinstance(r, ToolCallError)]
    assert not failed, [(e.code, e.message, e.fix) for e in failed]
    assert all(r["status"] == "created" for r in results)
    assert git(kb, "status", "--porcelain") == ""
    before = files_of(kb)
    git(kb, "checkout", "--", ".")
    assert files_of(kb) == before
    assert {f"note/{r['id']}.md" for r in results} <= before


# Before: the fix said "if no git command is running there, remove that file" for any lock,
# waited for nothing, and told a stale lock from a busy one by no sign.
def test_a_stale_index_lock_is_named_stale_with_the_command_that_removes_it(home):
    kb = home / "kb"
    add(home, "Warm the daemon", "The first add loads the model.")
    lock = kb / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    files = files_of(kb)
    error = refused(home, "Blocked by a stale lock", "git died and left its lock.")
    assert error.code == "write_failed" and "rolled back, nothing changed" in error.message
    assert "stale" in error.message and "no git process" in error.message
    assert f"rm {lock}" in error.fix
    lock.unlink()
    assert files_of(kb) == files and git(kb, "status", "--porcelain") == ""
    again = add(home, "Blocked by a stale lock", "git died and left its lock.")
    assert again["status"] == "created", again


def test_a_lock_held_while_git_runs_names_the_process_and_says_wait(tmp_path):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    (kb / "note").mkdir()
    (kb / "note" / "a.md").write_text("a\n")
    holder = subprocess.Popen(
        ["git", "hash-object", "--stdin"], cwd=kb, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    lock = kb / ".git" / "index.lock"
    try:
        lock.write_text("")
        started = time.monotonic()
        with pytest.raises(GitError) as caught:
            KBRepo(kb).commit_paths([kb / "note" / "a.md"], "memory: add a")
        assert time.monotonic() - started >= 5  # it waited for the lock first (10 s)
        assert (
            f"pid {holder.pid}" in caught.value.message
            and "git hash-object" in caught.value.message
        )
        assert "wait" in caught.value.fix and "rm " not in caught.value.fix
        lock.unlink()
        assert repo.commit_paths([kb / "note" / "a.md"], "memory: add a")
    finally:
        holder.stdin.close()
        holder.wait(10)


# Before: git's ENOSPC message names index.lock, and the error said to remove it (or, when the
# entry file could not be written, to make the folder writable).
def test_a_full_disk_is_called_a_full_disk(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    kb = home / "kb"
    kb.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(kb)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", CLOCK)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    try:
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
        add(home, "Warm the daemon", "The first add loads the model.")
        head, files = git(kb, "rev-parse", "HEAD"), files_of(kb)
        pad = kb / ".pad"
        pad.write_bytes(b"x" * 4096)  # one page, freed below: room for the entry, not for git

        def fill_up(name: str) -> None:
            fd = os.open(kb / name, os.O_CREAT | os.O_WRONLY)
            try:
                while os.write(fd, b"x" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)

        fill_up(".fill")
        pad.unlink()
        # first there is room for the entry's file but not for git's object, then for nothing
        for step in ("git", "file"):
            if step == "file":
                fill_up(".fill-2")
            error = refused(home, f"Written to a full disk ({step})", "There is no room for this.")
            assert error.code == "write_failed" and "rolled back, nothing changed" in error.message
            assert "disk is full" in error.message, error.message
            assert ("`git update-index`" in error.message) == (step == "git"), error.message
            assert "free some space" in error.fix and "index.lock" not in error.fix
            assert files_of(kb) == files and git(kb, "rev-parse", "HEAD") == head
    finally:
        _stop(home)
        subprocess.run(["umount", "-l", str(kb)], capture_output=True)


# Review 8. Before: git_processes() read /proc or nothing; with no /proc (macOS) a lock older
# than 10 s was called stale at once and the fix said `rm` it - under a `git commit` whose
# user is typing the message. A git process of another user (cwd unreadable) was skipped.
def _locked_kb(tmp_path: Path) -> tuple[Path, Path, Path]:
    kb = tmp_path / "kb"
    KBRepo.init(kb)
    (kb / "note").mkdir()
    (kb / "note" / "a.md").write_text("a\n")
    lock = kb / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 3600  # an hour old: "stale" if nobody could hold it
    os.utime(lock, (old, old))
    return kb, kb / "note" / "a.md", lock


@pytest.mark.parametrize("table", ["none", "empty", "unreadable-cwd"])
def test_a_lock_is_not_called_stale_where_the_process_table_cannot_be_read(tmp_path, table):
    kb, entry, lock = _locked_kb(tmp_path)
    proc = tmp_path / "proc"
    if table != "none":
        proc.mkdir()
    if table == "unreadable-cwd":  # this process, and a git process whose cwd is hidden
        (proc / str(os.getpid())).mkdir()
        (proc / "4242").mkdir()
        (proc / "4242" / "comm").write_text("git\n")
    assert git_processes(kb, proc) is None
    started = time.monotonic()
    with pytest.raises(GitError) as caught:
        KBRepo(kb, lock_wait=1.0, proc_root=proc).commit_paths([entry], "memory: add a")
    assert time.monotonic() - started >= 1.0  # waited for it first
    error = caught.value
    assert "cannot tell whether a git process holds it" in error.message, error.message
    assert "stale" not in error.message
    assert error.fix.startswith("wait for any git command") and "git commit" in error.fix
    # the real process table says it: no git process there, the lock is stale (no wait)
    started = time.monotonic()
    with pytest.raises(GitError) as caught:
        KBRepo(kb, lock_wait=5.0).commit_paths([entry], "memory: add a")
    assert time.monotonic() - started < 5.0
    assert "stale" in caught.value.message and f"rm {lock}" in caught.value.fix


def test_a_failed_git_command_is_named_past_its_config_options(tmp_path):
    """The commit's plumbing runs `git -c core.looseCompression=0 update-index ...`: an error
    names `update-index`, not `-c` (a full disk used to say "`git -c` could not write")."""
    repo, _ = KBRepo.init(tmp_path / "kb")
    with pytest.raises(GitError) as raised:
        repo.git("-c", "core.looseCompression=0", "-c", "pack.threads=1", "no-such-command")
    assert "`git no-such-command` failed" in raised.value.message
