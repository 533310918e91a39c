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
    was not reaped yet - is not alive."""
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
        return True  # no /proc (macOS): kill(0) said it exists


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
