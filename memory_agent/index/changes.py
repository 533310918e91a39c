"""What a scan hands the index: the changes to apply, and the stamp that says whether a file
is still as the index saw it (its mtime and size, kept with each indexed document)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ragcore import DocInfo, Document

__all__ = ["Changes", "Known", "stamp_of"]

# What the index holds now under an id (None: nothing).
Known = Callable[[str], DocInfo | None]


@dataclass
class Changes:
    """What a scan found to do: documents to (re)index, ids to drop, stamps to update (the
    file was touched or moved, its content is the same), and whether it was a full scan."""

    upserts: list[Document] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    restamps: dict[str, str | None] = field(default_factory=dict)
    moved: dict[str, dict[str, str]] = field(default_factory=dict)  # of restamps: {path, hash}
    full: bool = False
    looked_at: int = 0  # files stat'ed
    kb_ids: set[str] = field(default_factory=set)  # KB entries decided (by the path scan)

    @property
    def empty(self) -> bool:
        return not (self.upserts or self.deletes or self.restamps)


def stamp_of(st: os.stat_result) -> str:
    return f"{st.st_mtime_ns}:{st.st_size}"
