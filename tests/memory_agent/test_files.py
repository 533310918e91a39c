"""memory_agent.files: the one file lock (flock; msvcrt on Windows; lockf where the `fcntl`
module is missing, which the portable run exercises) and the one crash-safe gzip, driven with
real processes and real files."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from memory_agent.errors import LockBusy, describe
from memory_agent.files import FileLock, gzip_to, lock_backend, replacing

HOLD = (
    "import sys\nfrom memory_agent.files import FileLock, gzip_to, lock_backend, replacing\n"
    "lock = FileLock(sys.argv[1])\nlock.acquire()\nprint('held', flush=True)\n"
    "sys.stdin.read()\nlock.release()\n"
)


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock until its stdin closes (or it is killed)."""
    path = tmp_path / "home.lock"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        yield path, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_a_lock_another_process_holds_is_refused_at_once_by_try_acquire(holder):
    path, _ = holder
    assert FileLock(path).try_acquire() is False


def test_the_wait_for_a_held_lock_ends_naming_the_holder_and_the_fix(holder):
    path, proc = holder
    with pytest.raises(LockBusy) as busy:
        FileLock(path).acquire(timeout=0.2)
    info = describe(busy.value)
    assert info.code == "conflict"
    assert f"held by process {proc.pid}" in info.message and str(path) in info.message
    assert f"kill {proc.pid}" in info.fix


def test_a_waiter_gets_the_lock_when_the_holder_lets_go(holder):
    path, proc = holder
    lock = FileLock(path)
    waiter = threading.Thread(target=lock.acquire, kwargs={"timeout": 30})
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive()  # still waiting while the other process holds it
    proc.stdin.close()  # the holder releases
    waiter.join(timeout=30)
    assert not waiter.is_alive() and proc.wait(timeout=10) == 0


def test_a_holder_that_dies_leaves_no_stale_lock(holder):
    path, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    lock = FileLock(path)
    lock.acquire(timeout=5)
    assert lock.is_locked
    lock.release()


@pytest.mark.skipif(
    lock_backend() != "flock",
    reason="an older version's raw flock: only the flock backend sees it (the portable run "
    "locks with lockf, which Linux keeps apart from flock)",
)
def test_a_holder_with_a_raw_flock_is_named_too(tmp_path):
    path = tmp_path / "spawn.lock"
    code = (  # an older version's lock: flock on a file opened "a+"
        "import fcntl, sys\nfh = open(sys.argv[1], 'a+')\nfcntl.flock(fh, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\nsys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        assert FileLock(path).holder() == proc.pid
        with pytest.raises(LockBusy, match=f"held by process {proc.pid}"):
            FileLock(path).acquire(timeout=0.1)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert FileLock(path).holder() is None  # free again


def test_the_lock_is_exclusive_between_threads_and_reentrant_in_one(tmp_path):
    lock = FileLock(tmp_path / "home.lock")
    with lock:
        with lock:  # the same thread again: no deadlock
            assert lock.is_locked
        assert lock.is_locked  # the outer hold is still there
        other: list[bool] = []
        thread = threading.Thread(target=lambda: other.append(lock.try_acquire()))
        thread.start()
        thread.join(timeout=10)
        assert other == [False]
    assert not lock.is_locked
    assert lock.try_acquire()
    assert lock.holder() == os.getpid()
    lock.release()
    assert (tmp_path / "home.lock").read_bytes() == b""  # never written: stays empty


def test_releasing_a_lock_not_held_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="not locked by this thread"):
        FileLock(tmp_path / "x.lock").release()


# -- a file replaced whole: replacing, gzip_to ---------------------------------------------------
def test_gzip_to_writes_a_whole_copy_and_leaves_no_temp_file(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"".join(b'{"n": %d}\n' % i for i in range(20_000)))
    gzip_to(src, tmp_path / "s.jsonl.gz")
    assert gzip.decompress((tmp_path / "s.jsonl.gz").read_bytes()) == src.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "s.jsonl.gz"]


def test_gzip_to_rewrites_each_line_with_a_transform(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"token=abc\nplain\n")
    gzip_to(src, tmp_path / "part.gz", transform=lambda line: line.replace(b"abc", b"[x]"))
    assert gzip.decompress((tmp_path / "part.gz").read_bytes()) == b"token=[x]\nplain\n"


def test_an_error_while_replacing_leaves_the_old_file_and_no_temp(tmp_path):
    dest = tmp_path / "state.json"
    dest.write_text("old")
    with pytest.raises(ValueError), replacing(dest) as fh:
        fh.write(b"half of the new")
        raise ValueError("the writer failed")
    assert dest.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_crash_while_replacing_leaves_the_old_file_and_a_temp_naming_the_process(tmp_path):
    dest = tmp_path / "part.gz"
    dest.write_bytes(b"old")
    code = (
        "import sys\nfrom pathlib import Path\nfrom memory_agent.files import replacing\n"
        "with replacing(Path(sys.argv[1]), gz=True) as fh:\n"
        "    fh.write(b'new' * 100000)\n    print('writing', flush=True)\n    sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(dest)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert dest.read_bytes() == b"old"
    [leftover] = [p.name for p in tmp_path.iterdir() if p != dest]
    assert re.fullmatch(rf"part\.gz\.tmp-{proc.pid}-[0-9a-f]{{6}}", leftover)


def test_without_a_kernel_lock_table_the_holder_writes_its_pid_and_is_named(tmp_path, monkeypatch):
    """macOS and Windows have no /proc/locks: the holder writes its pid at the start of the
    file, and a waiter names it from there (and only while it holds the lock)."""
    from memory_agent import files

    path = tmp_path / "home.lock"
    code = (
        "import sys\nfrom memory_agent import files\nfiles.LOCK_TABLE = '/nonexistent'\n"
        "files.FileLock(sys.argv[1]).acquire()\nprint('held', flush=True)\nsys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    monkeypatch.setattr(files, "LOCK_TABLE", str(tmp_path / "no-lock-table"))
    try:
        assert proc.stdout.readline().strip() == "held"
        assert path.read_bytes().split(b"\0")[0] == str(proc.pid).encode()
        assert FileLock(path).holder() == proc.pid
        with pytest.raises(LockBusy, match=f"held by process {proc.pid}"):
            FileLock(path).acquire(timeout=0.1)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert FileLock(path).holder() is None  # its pid is still written; the lock is free
