"""A change signal for the scanner: Linux inotify through ctypes (no dependency).

`Watcher` watches a set of directories (not recursively: the scanner adds every directory
its rule would read, so excluded trees such as node_modules cost no watch) and collects the
paths of files that were written, moved or deleted, and whether a full rescan is needed (a
directory appeared, moved or vanished; the kernel's queue overflowed; a watch could not be
added). `drain()` returns what happened since the last call without blocking.

The cost is per event, not per file: a search with nothing changed reads no file and stats
none. inotify misses nothing that goes through the kernel of this machine; it does not see
changes on network filesystems made by other machines - for those the scanner's periodic
full scan (at most once a second, on demand) remains.

The `no_inotify` setting (`MEMORY_AGENT_NO_INOTIFY=1`) turns inotify off (`Memory.start_watching`):
every search then stats the knowledge base's files, as on a system without inotify (macOS,
BSD). The README's Speed section gives what that costs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Watcher", "WatchEvents", "inotify_available"]

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_HEADER = struct.Struct("iIII")

_libc = None


def _lib():
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        _libc = ctypes.CDLL(name or "libc.so.6", use_errno=True)
    return _libc


def inotify_available() -> bool:
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return False
    try:
        return hasattr(_lib(), "inotify_init1")
    except OSError:
        return False


@dataclass
class WatchEvents:
    paths: set[Path] = field(default_factory=set)
    rescan: str | None = None  # why a full rescan is needed, if it is


class Watcher:
    def __init__(self) -> None:
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd = fd
        self._dirs: dict[int, Path] = {}
        self._by_path: dict[Path, int] = {}
        self._lock = threading.Lock()
        self._pending = WatchEvents()

    def close(self) -> None:
        with self._lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

    def watched(self) -> set[Path]:
        return set(self._by_path)

    def watch(self, directory: Path) -> bool:
        """Watch one directory (idempotent). False (and a rescan request) if it cannot be."""
        directory = Path(directory)
        with self._lock:
            if directory in self._by_path:
                return True
            wd = _lib().inotify_add_watch(self.fd, os.fsencode(directory), MASK)
            if wd < 0:
                err = ctypes.get_errno()
                if err != errno.ENOENT:
                    self._pending.rescan = f"cannot watch {directory}: {os.strerror(err)}"
                return False
            self._dirs[wd] = directory
            self._by_path[directory] = wd
            return True

    def unwatch_all(self) -> None:
        with self._lock:
            for wd in list(self._dirs):
                _lib().inotify_rm_watch(self.fd, wd)
            self._dirs.clear()
            self._by_path.clear()

    def settle(self) -> bool:
        """Nothing to start: a folder is watched from `watch()` on, before it is read (the
        portable watcher's `settle()` starts one)."""
        return False

    def drain(self) -> WatchEvents:
        """Everything that happened since the last call (never blocks)."""
        with self._lock:
            while True:
                ready, _, _ = select.select([self.fd], [], [], 0)
                if not ready:
                    break
                try:
                    data = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    break
                self._parse(data)
            events, self._pending = self._pending, WatchEvents()
            return events

    def _parse(self, data: bytes) -> None:
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            name = data[offset + _HEADER.size : offset + _HEADER.size + length].rstrip(b"\0")
            offset += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                self._pending.rescan = "the change queue overflowed"
                continue
            directory = self._dirs.get(wd)
            if mask & IN_IGNORED:
                if directory is not None:
                    self._dirs.pop(wd, None)
                    self._by_path.pop(directory, None)
                continue
            if directory is None:
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                self._pending.rescan = f"{directory} was moved or removed"
                continue
            path = directory / os.fsdecode(name)
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE):
                    self._pending.rescan = f"folder {path} appeared, moved or vanished"
                continue
            self._pending.paths.add(path)
