"""Crash-safe file replacement: a temp file in the same folder, fsync, rename, fsync the folder
(`atomic_write` for bytes in hand, `atomic_file` to stream a large file).

A reader sees the old file or the new one, never a torn one; after a crash, at worst a
`.<name>.*.tmp` file is left behind (callers clean those up).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_file", "atomic_write", "fsync_dir", "temp_files"]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_name(path: Path) -> Path:
    return path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"


def temp_files(path: Path) -> list[tuple[Path, int]]:
    """The temp files `atomic_write` left beside `path` (a writer that died mid-write), each
    with the pid of the process that wrote it: the caller decides which are safe to remove."""
    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)\.[0-9a-f]{{8}}\.tmp$")
    if not path.parent.is_dir():
        return []
    found = []
    for candidate in path.parent.iterdir():
        m = pattern.match(candidate.name)
        if m:
            found.append((candidate, int(m.group(1))))
    return found


@contextmanager
def atomic_file(path: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """Write `path` through the yielded file: on a clean exit it replaces `path` whole (fsync,
    rename, fsync the folder); on an exception nothing changes. For data too large to hold as
    one bytes object; `mode` sets the new file's permissions."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    try:
        with open(tmp, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Replace `path` with `data` (str is written as UTF-8 with LF line ends); `mode` sets the
    new file's permissions (default: as the umask makes them)."""
    with atomic_file(path, mode) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
