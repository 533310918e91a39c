"""A dict and a list whose copy costs their changes, not their size: the read model's
per-document and per-chunk maps and lists, copied on every write (`ReadModel.clone`).

A `CowDict` is a base dict, shared between copies and never changed once shared, and a small
dict of the changes made since (a removed key is marked, not deleted from the base). A copy
shares the base and copies the changes; when the changes outgrow a sixteenth of the base (and
4,096 keys), the copy folds them into a new base - O(size) once per that many changes. At a
million documents a plain dict's copy is ~25 ms, and the read model copied five of them per
write; a copy here is the size of the changes.

A `CowList` is the same for a list that is written by index and appended to: a shared base
list, the indices changed since (a dict) and what was appended since (a list).

Reads cost one more dict lookup than a dict's (a list's). Iteration follows the base's order, then the
keys added since; a key changed in place keeps its place, as in a dict (a key of the base
removed and added again comes back at its old place, where a dict would put it last).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any, Generic, TypeVar

__all__ = ["CowDict", "CowList"]

K = TypeVar("K")
V = TypeVar("V")
_GONE: Any = object()  # in the changes: the base's key is removed
_MISSING: Any = object()
FOLD_MIN = 4096  # changes kept beside the base before a copy folds them in (and a 16th of it)


class CowDict(MutableMapping[K, V], Generic[K, V]):
    __slots__ = ("_base", "_len", "_top")

    def __init__(self, base: dict[K, V] | None = None):
        """A mapping holding `base` (taken, not copied: the caller gives it up)."""
        self._base: dict[K, V] = {} if base is None else base
        self._top: dict[K, V] = {}
        self._len = len(self._base)

    def copy(self) -> CowDict[K, V]:
        """An independent copy (changes to either are not seen by the other)."""
        new = CowDict.__new__(CowDict)
        if len(self._top) > max(FOLD_MIN, len(self._base) >> 4):
            new._base, new._top = dict(self.items()), {}
        else:
            new._base, new._top = self._base, dict(self._top)
        new._len = self._len
        return new

    def __getitem__(self, key: K) -> V:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base[key]
        if value is _GONE:
            raise KeyError(key)
        return value

    def get(self, key: K, default: Any = None) -> Any:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self._top.get(key, _MISSING)  # type: ignore[call-overload]
        if value is _MISSING:
            return key in self._base
        return value is not _GONE

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self:
            self._len += 1
        self._top[key] = value

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        if key in self._base:
            self._top[key] = _GONE
        else:
            del self._top[key]
        self._len -= 1

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        del self[key]
        return value

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for key, _ in self._pairs():
            yield key

    def _pairs(self) -> Iterator[tuple[K, V]]:
        top, base = self._top, self._base
        if not top:
            yield from base.items()
            return
        for key, value in base.items():
            changed = top.get(key, _MISSING)
            if changed is _MISSING:
                yield key, value
            elif changed is not _GONE:
                yield key, changed
        for key, value in top.items():
            if value is not _GONE and key not in base:
                yield key, value

    def items(self) -> ItemsView[K, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"CowDict({dict(self._pairs())!r})"


class CowList(Generic[V]):
    """A list read and written by index (non-negative) and appended to; copied cheaply."""

    __slots__ = ("_base", "_set", "_tail")

    def __init__(self, base: list[V] | None = None):
        """A list holding `base` (taken, not copied: the caller gives it up)."""
        self._base: list[V] = [] if base is None else base
        self._set: dict[int, V] = {}  # index in the base -> its value now
        self._tail: list[V] = []  # appended since

    def copy(self) -> CowList[V]:
        new = CowList.__new__(CowList)
        if len(self._set) + len(self._tail) > max(FOLD_MIN, len(self._base) >> 4):
            new._base, new._set, new._tail = list(self), {}, []
        else:
            new._base, new._set, new._tail = self._base, dict(self._set), list(self._tail)
        return new

    def __len__(self) -> int:
        return len(self._base) + len(self._tail)

    def __getitem__(self, i: int) -> V:
        n = len(self._base)
        if i >= n:
            return self._tail[i - n]
        if i < 0:
            raise IndexError(i)
        value = self._set.get(i, _MISSING)
        return self._base[i] if value is _MISSING else value

    def __setitem__(self, i: int, value: V) -> None:
        n = len(self._base)
        if i >= n:
            self._tail[i - n] = value
        elif i < 0:
            raise IndexError(i)
        else:
            self._set[i] = value

    def append(self, value: V) -> None:
        self._tail.append(value)

    def __iter__(self) -> Iterator[V]:
        if self._set:
            changed = self._set
            for i, value in enumerate(self._base):
                yield changed.get(i, value)
        else:
            yield from self._base
        yield from self._tail

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, CowList | list) else NotImplemented

    def __repr__(self) -> str:
        return f"CowList({list(self)!r})"


class _Items(ItemsView):
    def __iter__(self):
        return self._mapping._pairs()


class _Values(ValuesView):
    def __iter__(self):
        for _, value in self._mapping._pairs():
            yield value
