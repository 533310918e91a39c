"""Names to sets of document rows, built in bulk with numpy and changed one row at a time: the
read model's entity index (which documents name an entity).

A compact base (CSR: each name's rows, from every document's names at once) plus the sets that
changed since. A change to a name copies its set out of the base (or, after a `clone`, out of
the original's) first, so the base is never written and a clone never changes its original.
The base stays right for every name not copied out: a document's rows change only through its
own names, which are copied out first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SetIndex", "name_table"]

_EMPTY: frozenset[int] = frozenset()


def name_table(per_row: list[tuple[str, ...]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each row's names as (the distinct names in order of first use, offsets with one entry
    per row plus one, the name ids of all rows in a row)."""
    ids: dict[str, int] = {}
    flat = [ids.setdefault(name, len(ids)) for names in per_row for name in names]
    offsets = np.zeros(len(per_row) + 1, dtype=np.int64)
    np.cumsum([len(names) for names in per_row], out=offsets[1:])
    return list(ids), offsets, np.asarray(flat, dtype=np.int32)


class SetIndex:
    def __init__(self) -> None:
        self._position: dict[str, int] = {}  # name -> its place in the base
        self._offsets = np.zeros(1, dtype=np.int64)
        self._rows = np.empty(0, dtype=np.int32)
        self._changed: dict[str, set[int]] = {}
        self._shared: set[str] = set()  # changed sets the original of a clone also holds

    @classmethod
    def build(cls, names: list[str], offsets: np.ndarray, ids: np.ndarray) -> SetIndex:
        """From a `name_table`: row r names `ids[offsets[r]:offsets[r + 1]]`."""
        new = cls()
        span = max(offsets.size, 1)
        rows = np.repeat(np.arange(offsets.size - 1, dtype=np.int64), np.diff(offsets))
        pairs = np.sort(ids.astype(np.int64) * span + rows)  # by name, then row
        pairs = pairs[np.concatenate([[True], pairs[1:] != pairs[:-1]])] if pairs.size else pairs
        by_name, rows = np.divmod(pairs, span)
        new._rows = rows.astype(np.int32)
        counts = np.bincount(by_name, minlength=len(names))
        new._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        new._position = {name: i for i, name in enumerate(names)}
        return new

    def clone(self) -> SetIndex:
        new = SetIndex.__new__(SetIndex)
        new._position, new._offsets, new._rows = self._position, self._offsets, self._rows
        new._changed = dict(self._changed)
        new._shared = set(self._changed)
        return new

    def _base(self, name: str) -> np.ndarray:
        i = self._position.get(name)
        if i is None:
            return self._rows[:0]
        return self._rows[self._offsets[i] : self._offsets[i + 1]]

    def rows(self, name: str) -> set[int] | frozenset[int]:
        """The rows holding `name` (do not modify)."""
        held = self._changed.get(name)
        if held is not None:
            return held
        base = self._base(name)
        return set(base.tolist()) if base.size else _EMPTY

    def count(self, name: str) -> int:
        held = self._changed.get(name)
        return len(held) if held is not None else int(self._base(name).size)

    def _own(self, name: str) -> set[int]:
        held = self._changed.get(name)
        if held is None:
            held = self._changed[name] = set(self._base(name).tolist())
        elif name in self._shared:
            self._shared.discard(name)
            held = self._changed[name] = set(held)
        return held

    def add(self, name: str, row: int) -> None:
        self._own(name).add(row)

    def discard(self, name: str, row: int) -> None:
        self._own(name).discard(row)
