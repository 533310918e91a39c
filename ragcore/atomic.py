"""Crash-safe file replacement: a temp file in the same folder, fsync, rename, fsync the folder.

A reader sees the old file or the new one, never a torn one; after a crash, at worst a
`.<name>.*.tmp` file is left behind (callers clean those up).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir"]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Replace `path` with `data` (str is written as UTF-8 with LF line ends); `mode` sets the
    new file's permissions (default: as the umask makes them)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)
