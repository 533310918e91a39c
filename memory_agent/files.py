"""Files that several processes share: the one way memory-agent locks one, and the one way it
gzips one so the result appears under its name only when whole.

`FileLock(path)` is an exclusive lock on `path` (created 0600 if missing), between processes
and between threads alike, re-entrant in the thread that holds it. Three ways to take it:

    with lock:                    block until it is free (the home lock of a CLI call)
    lock.acquire(timeout=60)      block at most 60 s, then `LockBusy` naming the holder and the fix
    lock.try_acquire()            never block: False when another process holds it (the spawn
                                  lock of a hook; one daemon per home)

One portable layer, the same rules on every OS: threads of one process take turns on a lock of
the process (one per path, whichever `FileLock` object names it); the thread that gets it takes
the OS's lock between processes, which the kernel releases when the process dies, so a crash
never leaves a stale lock. The OS lock is `flock(2)` where the `fcntl` module exists (Linux,
macOS), `msvcrt.locking` on one byte far past the end on Windows, and POSIX `lockf` elsewhere
(which the suite runs, with `fcntl` unimportable, as the portable path: tests/README). The
waiter that times out names the holder: on Linux from the kernel's /proc/locks (the file stays
empty), elsewhere from the pid the holder wrote at the start of the file.

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
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from collections.abc import Callable, Iterator
    from typing import BinaryIO

__all__ = [
    "FileLock",
    "fsync_dir",
    "gzip_to",
    "lock_backend",
    "read_toml",
    "replacing",
    "set_toml_line",
    "temp_name",
]

POLL_S = 0.05  # how often a wait with a timeout tries again
LOCK_TABLE = "/proc/locks"  # the kernel's list of held locks (Linux; read when used)
_FAR = 1 << 30  # where msvcrt locks its byte: past any pid written at the start


def lock_backend() -> str:
    """The OS lock this process uses between processes: flock, msvcrt or lockf."""
    global _BACKEND
    if _BACKEND is None:
        try:
            import fcntl  # noqa: F401

            _BACKEND = "flock"
        except ImportError:
            _BACKEND = "msvcrt" if sys.platform == "win32" else "lockf"
    return _BACKEND


_BACKEND: str | None = None


def _os_try_lock(fd: int) -> bool:
    """Take the OS lock on `fd` without waiting; False if another process holds it."""
    backend = lock_backend()
    try:
        if backend == "flock":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        elif backend == "msvcrt":
            import msvcrt

            os.lseek(fd, _FAR, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            os.lockf(fd, os.F_TLOCK, 0)
    except (BlockingIOError, PermissionError):
        return False
    except OSError as exc:  # lockf and msvcrt say "busy" with EACCES/EAGAIN/EDEADLK too
        import errno

        if exc.errno in (errno.EACCES, errno.EAGAIN, errno.EDEADLK):
            return False
        raise
    return True


def _os_wait_lock(fd: int) -> None:
    """Take the OS lock on `fd`, waiting in the kernel until it is free (flock, lockf)."""
    if lock_backend() == "flock":
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
    else:
        os.lseek(fd, 0, os.SEEK_SET)
        os.lockf(fd, os.F_LOCK, 0)


def _os_unlock(fd: int) -> None:
    backend = lock_backend()
    if backend == "flock":
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
    elif backend == "msvcrt":
        import msvcrt

        os.lseek(fd, _FAR, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        os.lseek(fd, 0, os.SEEK_SET)
        os.lockf(fd, os.F_ULOCK, 0)


class _Shared:
    """A path's lock within this process: which thread holds it, how deeply, the OS lock's
    descriptor. One per path, shared by every `FileLock` naming it (POSIX `lockf` locks belong
    to the process, and closing any descriptor of the file drops them: one descriptor, one
    owner at a time)."""

    def __init__(self) -> None:
        self.turn = threading.Lock()  # threads of this process take turns here
        self.owner: int | None = None
        self.depth = 0
        self.fd: int | None = None


_SHARED: dict[str, _Shared] = {}
_REGISTRY = threading.Lock()  # guards _SHARED


def _shared(path: Path) -> _Shared:
    key = os.path.normcase(os.path.abspath(path))
    with _REGISTRY:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = _Shared()
        return found


class FileLock:
    """An exclusive lock on `path` between processes and threads (see the module's doc)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._shared = _shared(self.path)

    # -- taking it ---------------------------------------------------------------------------
    def acquire(self, timeout: float | None = None) -> None:
        """Block until the lock is ours; with `timeout` (seconds), raise `LockBusy` (naming
        the holder and what to do) once it has passed."""
        if self._reenter():
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        shared = self._shared
        if not shared.turn.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            raise self._busy(timeout or 0.0)
        try:
            fd = self._open()
            try:
                if deadline is None and lock_backend() != "msvcrt":
                    _os_wait_lock(fd)  # the kernel queues the waiter (/proc/locks lists it)
                while deadline is not None and not _os_try_lock(fd):
                    if time.monotonic() >= deadline:
                        raise self._busy(timeout or 0.0)
                    time.sleep(POLL_S)
                while deadline is None and lock_backend() == "msvcrt" and not _os_try_lock(fd):
                    time.sleep(POLL_S)  # (msvcrt's own blocking lock gives up after 10 s)
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            shared.turn.release()
            raise
        self._took(fd)

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; False (at once) if someone else holds it."""
        if self._reenter():
            return True
        shared = self._shared
        if not shared.turn.acquire(blocking=False):
            return False
        try:
            fd = self._open()
            if not _os_try_lock(fd):
                os.close(fd)
                shared.turn.release()
                return False
        except BaseException:
            shared.turn.release()
            raise
        self._took(fd)
        return True

    def release(self) -> None:
        """Give back one acquisition of this thread (the lock goes with the last)."""
        shared = self._shared
        if shared.owner != threading.get_ident() or shared.depth == 0:
            raise RuntimeError(f"{self.path} is not locked by this thread")
        shared.depth -= 1
        if shared.depth == 0:
            fd, shared.fd, shared.owner = shared.fd, None, None
            try:
                assert fd is not None
                _os_unlock(fd)
            finally:
                os.close(fd)
                shared.turn.release()

    @property
    def is_locked(self) -> bool:
        """Whether this thread holds it."""
        return self._shared.owner == threading.get_ident() and self._shared.depth > 0

    def holder(self) -> int | None:
        """The pid of the process holding the lock; None when it is free, or where that is
        unknown. Linux's /proc/locks first (it names any flock holder), else the pid the
        holder wrote at the start of the file, if that process is alive and the lock is
        indeed taken."""
        from_kernel = self._holder_from_kernel()
        if from_kernel is not None:
            return from_kernel or None
        try:
            with open(self.path, "rb") as fh:
                text = fh.read(32).split(b"\0", 1)[0].strip()
            pid = int(text) if text.isdigit() else None
        except OSError:
            return None
        if pid is None:
            return None
        from memory_agent.procs import pid_alive

        if pid == os.getpid():
            return pid if self._shared.depth else None
        if not pid_alive(pid) or self._free_now():
            return None
        return pid

    def _holder_from_kernel(self) -> int | None:
        """Linux: the holder from /proc/locks (0: free); None where it is not listed."""
        kind = {"flock": "FLOCK", "lockf": "POSIX"}.get(lock_backend())
        if kind is None:
            return None
        try:
            st = os.stat(self.path)
            with open(LOCK_TABLE, encoding="ascii", errors="replace") as fh:
                table = fh.read()
        except OSError:
            return None
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        for line in table.splitlines():  # "1: FLOCK  ADVISORY  WRITE <pid> <dev>:<ino> 0 EOF"
            parts = line.split()  # (a waiter's line has "->" in the second column)
            if len(parts) > 5 and parts[1] == kind and parts[5] == where:
                return int(parts[4]) if parts[4].isdigit() and parts[4] != "0" else None
        return 0

    def _free_now(self) -> bool:
        """Whether no other process holds the OS lock this instant (taken and given back)."""
        if self._shared.depth:
            return False
        if not self._shared.turn.acquire(blocking=False):
            return False  # a thread of this process holds it
        try:
            fd = self._open()
            try:
                if not _os_try_lock(fd):
                    return False
                _os_unlock(fd)
                return True
            finally:
                os.close(fd)
        finally:
            self._shared.turn.release()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- inside ------------------------------------------------------------------------------
    def _reenter(self) -> bool:
        shared = self._shared
        if shared.depth and shared.owner == threading.get_ident():
            shared.depth += 1
            return True
        return False

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)

    def _took(self, fd: int) -> None:
        shared = self._shared
        shared.fd, shared.depth, shared.owner = fd, 1, threading.get_ident()
        if os.path.exists(LOCK_TABLE):
            return  # the kernel names the holder: the file stays empty
        try:  # who holds it, for a waiter on an OS with no lock table to ask
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid()}\0".encode())
        except OSError:
            pass

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
                else "find the process holding it, let it finish or stop it, then try again"
            ),
        )


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
    """Make a rename in `folder` durable. (Windows cannot open a folder; NTFS journals the
    rename itself.)"""
    if sys.platform == "win32":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# config.toml's keys, read fast (the hooks read it on every agent event; `config.load`)
_LINE = re.compile(
    r"""^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|-?\d+|true|false)\s*(#.*)?$"""
)


def read_toml(text: str) -> dict[str, Any]:
    """config.toml's keys. A flat file of `key = "text" | number | true | false` lines (what
    `memory-agent init` writes) is read without importing tomllib (a hook starts faster);
    anything else goes to tomllib."""
    values: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None or "\\" in m.group(2):
            import tomllib

            return tomllib.loads(text)
        raw = m.group(2)
        if raw in ("true", "false"):
            values[m.group(1)] = raw == "true"
        elif raw[0] in "\"'":
            values[m.group(1)] = raw[1:-1]
        else:
            values[m.group(1)] = int(raw)
    return values


def set_toml_line(path: Path, key: str, value: str) -> bool:
    """`key = value` (value as TOML text) in the flat TOML file `path`, in place of the key's
    line or appended, every other line kept; a new file is the owner's only. True if it
    changed."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    new = f"{key} = {value}"
    out, found = [], False
    for line in lines:
        if line.split("=", 1)[0].strip() == key:
            if not found:
                out.append(new)
            found = True
        else:
            out.append(line)
    if not found:
        out.append(new)
    if out == lines:
        return False
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # owner-only, as the home
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return True
