"""Whether a process is alive: the one test every module that cleans up after a dead writer
(temp files, locks, a daemon's pid file) uses. Standard library only (the proxy and the hook
import it)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


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
