"""Processes: whether one is alive - the one test every module that cleans up after a dead
writer (temp files, locks, a daemon's pid file) uses - and how a command exits when the reader
of its output went away. Standard library only (the proxy and the hook import it)."""

from __future__ import annotations

import os
import sys

__all__ = ["EXIT_PIPE_CLOSED", "pid_alive", "stdout_closed"]

EXIT_PIPE_CLOSED = 141


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (another user's process too); a zombie - a child that exited and
    was not reaped yet - is not alive. Linux reads /proc; macOS and the BSDs ask `ps` only when
    kill(0) found the pid (to tell a zombie); Windows asks the process's exit code (kill(0)
    there would terminate it)."""
    if sys.platform == "win32":
        return _windows_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        pass
    return _ps_state(pid) not in ("Z", "")  # no /proc (macOS, BSD)


def _ps_state(pid: int) -> str | None:
    """The first letter of `ps`'s state of `pid` ("" if it is gone; None if `ps` cannot
    tell, taken as alive)."""
    import subprocess

    try:
        out = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 and not out.stdout.strip():
        return ""
    return out.stdout.strip()[:1] or None


def _windows_alive(pid: int) -> bool:  # pragma: no cover - Windows only (tests/README)
    import ctypes

    kernel = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle = kernel.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return ctypes.get_last_error() == 5  # ERROR_ACCESS_DENIED: it exists, not ours
    try:
        code = ctypes.c_ulong()
        if not kernel.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True
        return code.value == 259  # STILL_ACTIVE
    finally:
        kernel.CloseHandle(handle)


def stdout_closed() -> int:
    """The reader of stdout went away (`memory-agent search … | head -1`): drop whatever is
    left and return 141 - 128 + SIGPIPE, what a shell reports for a command killed by a closed
    pipe, so `set -o pipefail` still sees that the output was cut. The recipe of the Python
    docs (`signal` module, "Note on SIGPIPE"): point stdout at devnull so the interpreter's last
    flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (an embedding caller)
        pass
    return EXIT_PIPE_CLOSED
