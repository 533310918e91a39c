"""Files that several processes share: the one way memory-agent locks one, and the one way it
gzips one so the result appears under its name only when whole.

`FileLock(path)` is an exclusive `flock(2)` lock on `path` (created 0600 if missing), between
processes and between threads alike: each holding thread has its own descriptor, and the lock
is re-entrant in the thread that holds it. Three ways to take it:

    with lock:                    block until it is free (the home lock of a CLI call)
    lock.acquire(timeout=60)      block at most 60 s, then `LockBusy` naming the holder and the fix
    lock.try_acquire()            never block: False when another process holds it (the spawn
                                  lock of a hook; one daemon per home)

A wait that times out names the holder (`holder()`: its pid, from the kernel's /proc/locks) and
the fix. The kernel releases a lock when its process dies: a crash never leaves a stale lock.
The lock file is created empty and never written.

`with replacing(dest) as fh:` writes a file that replaces `dest` only when whole: to a temporary
name beside it that is unique to the process (`temp_name`: `<name>.tmp-<pid>-<hex>`, so a
leftover of a crash names a process that is gone), fsynced, renamed over `dest`, the folder
fsynced. A crash at any point leaves `dest` as it was or whole, never torn. `gzip_to(src, dest)`
is that for a gzipped copy of `src` (the journal's and the usage events' compaction); `src` is
not touched (the caller removes it after).

Standard library only: the proxy, the client and the hook command use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from collections.abc import Callable, Iterator
    from typing import BinaryIO

__all__ = ["FileLock", "fsync_dir", "gzip_to", "replacing", "temp_name"]

POLL_S = 0.05  # how often a wait with a timeout tries again


class FileLock:
    """An exclusive lock on `path` between processes and threads (see the module's doc)."""

    def __init__(self, path: str | os.PathLike[str]):
        import threading  # here: a hook that never locks does not import it

        self.path = Path(path)
        self._mine = threading.local()  # this thread's descriptor and depth

    # -- taking it ---------------------------------------------------------------------------
    def acquire(self, timeout: float | None = None) -> None:
        """Block until the lock is ours; with `timeout` (seconds), raise `LockBusy` (naming
        the holder and what to do) once it has passed."""
        if self._reenter():
            return
        fd = self._open()
        try:
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + timeout
                while not _try_flock(fd):
                    if time.monotonic() >= deadline:
                        raise self._busy(timeout)
                    time.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        self._took(fd)

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; False (at once) if someone else holds it."""
        if self._reenter():
            return True
        fd = self._open()
        if not _try_flock(fd):
            os.close(fd)
            return False
        self._took(fd)
        return True

    def release(self) -> None:
        """Give back one acquisition of this thread (the lock goes with the last)."""
        depth = getattr(self._mine, "depth", 0)
        if depth == 0:
            raise RuntimeError(f"{self.path} is not locked by this thread")
        self._mine.depth = depth - 1
        if depth == 1:
            fd, self._mine.fd = self._mine.fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    @property
    def is_locked(self) -> bool:
        """Whether this thread holds it."""
        return getattr(self._mine, "depth", 0) > 0

    def holder(self) -> int | None:
        """The pid of the process holding the lock, as the kernel lists it in /proc/locks
        (Linux); None when it is free, or where that is unknown. Nothing is written to the
        lock file: it stays empty."""
        try:
            st = os.stat(self.path)
            with open("/proc/locks", encoding="ascii", errors="replace") as fh:
                table = fh.read()
        except OSError:
            return None
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        for line in table.splitlines():  # "1: FLOCK  ADVISORY  WRITE <pid> <dev>:<ino> 0 EOF"
            parts = line.split()  # (a waiter's line has "->" in the second column)
            if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == where:
                return int(parts[4]) if parts[4].isdigit() and parts[4] != "0" else None
        return None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- inside ------------------------------------------------------------------------------
    def _reenter(self) -> bool:
        depth = getattr(self._mine, "depth", 0)
        if depth:
            self._mine.depth = depth + 1
        return bool(depth)

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _took(self, fd: int) -> None:
        self._mine.fd, self._mine.depth = fd, 1

    def _busy(self, timeout: float):
        from memory_agent.errors import LockBusy

        pid = self.holder()
        if pid == os.getpid():
            return LockBusy(
                f"{self.path} is held by another thread of this process; waited {timeout:g} s",
                "this is a bug in memory-agent: report it with the log",
            )
        who = f"process {pid}" if pid else "another process"
        return LockBusy(
            f"{self.path} is held by {who}; waited {timeout:g} s for it",
            (
                f"wait for process {pid} to finish, or stop it if it hangs (`kill {pid}`), "
                "then try again"
                if pid
                else f"find the process holding it (`fuser -v {self.path}`), let it finish or "
                "stop it, then try again"
            ),
        )


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def temp_name(name: str) -> str:
    """`<name>.tmp-<pid>-<6 hex>`: a temporary name unique to this process (a leftover's pid
    says whether the process that wrote it is gone)."""
    import secrets

    return f"{name}.tmp-{os.getpid()}-{secrets.token_hex(3)}"


@contextlib.contextmanager
def replacing(dest: Path, *, tmp: Path | None = None, gz: bool = False) -> Iterator[BinaryIO]:
    """A binary file whose content replaces `dest` when the block ends without an error:
    written to `tmp` (default: `temp_name` beside `dest`; created 0600), gzipped with `gz`,
    fsynced, renamed over `dest`, and the folder fsynced. An error (or a crash) leaves `dest`
    as it was; an error removes the temp file, a crash leaves it to a cleaner that reads its
    pid."""
    tmp = tmp if tmp is not None else dest.with_name(temp_name(dest.name))
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        if gz:
            import gzip

            with gzip.open(tmp, "wb") as fh:
                yield fh
        else:
            with open(tmp, "wb") as fh:
                yield fh
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(dest.parent)


def gzip_to(
    src: Path,
    dest: Path,
    *,
    tmp: Path | None = None,
    transform: Callable[[bytes], bytes] | None = None,
) -> None:
    """Gzip `src` into `dest`, crash-safely (`replacing`); `transform`, if given, rewrites
    each line on the way. `src` is left as it is."""
    with open(src, "rb") as fh, replacing(dest, tmp=tmp, gz=True) as out:
        if transform is not None:
            for line in fh:
                out.write(transform(line))
        else:
            while chunk := fh.read(1 << 16):
                out.write(chunk)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
