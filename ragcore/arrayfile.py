"""Named numpy arrays in one file, each checked by a CRC32 and memory-mapped when read.

    magic (8 bytes) | header length (u32) | header CRC32 (u32) | header (JSON) | arrays

Each array starts at a multiple of 64 bytes; the header holds the writer's `meta` and, for
each array, its dtype, shape, offset and CRC32, and the size of the data (so a truncated file
is told by its length). `write` replaces the file atomically (`ragcore.atomic`).
`ArrayFile(path)` reads and checks the header; `arrays()` maps the arrays read-only
(`np.memmap`; or reads those asked for) and checks every CRC. A file that is not one, is
truncated, or fails a CRC raises `ArrayFileError`: its reader rebuilds what it held, and never
uses it.

The mapped arrays' CRCs are checked once per file: a file whose every CRC held gets a stamp
beside it (`<name>.checked`: its size, inode, modification and change times, its header's
CRC), and a later read of the same, unchanged file skips the mapped arrays' CRCs (at a
million entries, 2.6 GB read and hashed at every daemon start). A file replaced (the writer
renames a new one in: a new inode) or written in place (new times) is checked again. What a
stamp cannot see is damage that leaves the file's size and times alone (a disk's bit rot);
the arrays read into memory are checked at every read. ADR 0026.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.atomic import atomic_file, atomic_write

__all__ = ["ArrayFile", "ArrayFileError", "write"]

MAGIC = b"RAGARR1\n"
ALIGN = 64
_PREFIX = struct.Struct("<8sII")
CHECKED = ".checked"  # the stamp's suffix: `<file>.checked` beside the file


class ArrayFileError(ValueError):
    """The file is not a complete, intact array file."""


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(memoryview(a).cast("B")) if a.nbytes else 0


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def write(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write `arrays` and `meta` (JSON values) to `path`, replacing it whole."""
    arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    layout: dict[str, list[Any]] = {}
    size = 0  # offsets count from the first aligned byte after the header
    for name, a in arrays.items():
        layout[name] = [a.dtype.str, list(a.shape), size, _crc(a)]
        size = _aligned(size + a.nbytes)
    header = json.dumps({"meta": meta, "arrays": layout, "data": size}).encode()
    start = _aligned(_PREFIX.size + len(header))
    with atomic_file(path) as fh:
        fh.write(_PREFIX.pack(MAGIC, len(header), zlib.crc32(header)))
        fh.write(header)
        position = _PREFIX.size + len(header)
        for name, a in arrays.items():
            at = start + layout[name][2]
            fh.write(b"\0" * (at - position))
            if a.nbytes:
                fh.write(memoryview(a).cast("B"))
            position = at + a.nbytes
        fh.write(b"\0" * (start + size - position))


class ArrayFile:
    """A written array file, its header read and checked (the arrays are not read yet)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            prefix = fh.read(_PREFIX.size)
            if len(prefix) != _PREFIX.size:
                raise ArrayFileError(f"{self.path.name}: shorter than its prefix")
            magic, length, crc = _PREFIX.unpack(prefix)
            if magic != MAGIC:
                raise ArrayFileError(f"{self.path.name}: not an array file")
            header = fh.read(length)
            size = fh.seek(0, 2)
            st = os.fstat(fh.fileno())
        if len(header) != length or zlib.crc32(header) != crc:
            raise ArrayFileError(f"{self.path.name}: the header is truncated or damaged")
        # what names this file as it stands: another file, or this one written again, differs
        self._identity = {
            "size": st.st_size,
            "inode": st.st_ino,
            "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns,
            "header_crc": crc,
        }
        try:
            parsed = json.loads(header)
            self.meta: dict[str, Any] = parsed["meta"]
            self._layout: dict[str, list[Any]] = parsed["arrays"]
            self._start = _aligned(_PREFIX.size + length)
            expected = self._start + int(parsed["data"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ArrayFileError(f"{self.path.name}: unreadable header ({exc})") from exc
        if size != expected:
            raise ArrayFileError(f"{self.path.name}: {size} bytes, expected {expected}")

    def arrays(self, read: Collection[str] = ()) -> dict[str, np.ndarray]:
        """Every array, each checked against its CRC32: memory-mapped read-only (one mapping
        for the file), except those named in `read`, which are read into memory (what the
        caller drops right away, so that its pages never count against the process). The
        mapped arrays' CRCs are skipped when this file was checked whole before (its stamp)."""
        out: dict[str, np.ndarray] = {}
        whole: np.memmap | None = None
        checked = self._stamped()
        with open(self.path, "rb") as fh:
            for name, (dtype, shape, offset, crc) in self._layout.items():
                try:
                    dt = np.dtype(dtype)
                    shape = tuple(int(n) for n in shape)
                    size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
                    start = self._start + int(offset)
                    if size == 0:
                        a = np.empty(shape, dtype=dt)
                    elif name in read:
                        fh.seek(start)
                        a = np.frombuffer(fh.read(size), dtype=dt).reshape(shape)
                    else:
                        if whole is None:
                            whole = np.memmap(self.path, dtype=np.uint8, mode="r")
                        a = np.asarray(whole[start : start + size]).view(dt).reshape(shape)
                except (TypeError, ValueError, OSError) as exc:
                    raise ArrayFileError(f"{self.path.name}: array {name}: {exc}") from exc
                if a.nbytes != size or ((name in read or not checked) and _crc(a) != crc):
                    raise ArrayFileError(f"{self.path.name}: array {name} fails its CRC")
                out[name] = a
        _release(whole)
        if not checked:
            self._stamp()
        return out

    @property
    def stamp_path(self) -> Path:
        return self.path.with_name(self.path.name + CHECKED)

    def _stamped(self) -> bool:
        """Whether every CRC of this very file held at an earlier read."""
        try:
            return json.loads(self.stamp_path.read_bytes()) == self._identity
        except (OSError, ValueError):
            return False

    def _stamp(self) -> None:
        """Record that every CRC held (best effort: a folder that refuses it costs a check at
        the next read, nothing else)."""
        with contextlib.suppress(OSError):
            atomic_write(self.stamp_path, json.dumps(self._identity).encode())


def _release(whole: np.memmap | None) -> None:
    """Let go of the pages the CRC check read: they stay in the page cache, and only those a
    search reads count against the process again (at a million entries the dense matrix is
    1.5 GB, of which a search on the graph reads a few hundred rows)."""
    handle = getattr(whole, "_mmap", None)
    if handle is not None and hasattr(handle, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        handle.madvise(mmap.MADV_DONTNEED)
