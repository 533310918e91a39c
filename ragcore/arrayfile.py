"""Named numpy arrays in one file, each checked by a CRC32 and memory-mapped when read.

    magic (8 bytes) | header length (u32) | header CRC32 (u32) | header (JSON) | arrays

Each array starts at a multiple of 64 bytes; the header holds the writer's `meta` and, for
each array, its dtype, shape, offset and CRC32, and the size of the data (so a truncated file
is told by its length). `write` replaces the file atomically (`ragcore.atomic`).
`ArrayFile(path)` reads and checks the header; `arrays()` maps the arrays read-only
(`np.memmap`; or reads those asked for) and checks every CRC. A file that is not one, is
truncated, or fails a CRC raises `ArrayFileError`: its reader rebuilds what it held, and never
uses it.
"""

from __future__ import annotations

import json
import mmap
import struct
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.atomic import atomic_file

__all__ = ["ArrayFile", "ArrayFileError", "write"]

MAGIC = b"RAGARR1\n"
ALIGN = 64
_PREFIX = struct.Struct("<8sII")


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
        if len(header) != length or zlib.crc32(header) != crc:
            raise ArrayFileError(f"{self.path.name}: the header is truncated or damaged")
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
        caller drops right away, so that its pages never count against the process)."""
        out: dict[str, np.ndarray] = {}
        whole: np.memmap | None = None
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
                if a.nbytes != size or _crc(a) != crc:
                    raise ArrayFileError(f"{self.path.name}: array {name} fails its CRC")
                out[name] = a
        _release(whole)
        return out


def _release(whole: np.memmap | None) -> None:
    """Let go of the pages the CRC check read: they stay in the page cache, and only those a
    search reads count against the process again (at a million entries the dense matrix is
    1.5 GB, of which a search on the graph reads a few hundred rows)."""
    handle = getattr(whole, "_mmap", None)
    if handle is not None and hasattr(handle, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        handle.madvise(mmap.MADV_DONTNEED)
