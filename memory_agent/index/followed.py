"""A home's memory as a reader process sees it (ADR 0028): the daemon's index followed
read-only, never written.

`FollowingMemory` is a `Memory` whose index is a `ragcore.Follower` over the generation the
daemon serves: a search's refresh (`refresh_for_read`) replays the daemon's changes since the
last one instead of scanning the files - the daemon, the index's only writer, indexes what
changed on disk (its watcher) and every write, each committed before it replies. Everything
else a search or a get reads is the `Memory`'s own: the KB files, the corpora, the link graph
of the snapshot, the usage stats. Nothing here writes the index or the KB; a call that would
raises `ReadOnlyProcess`.
"""

from __future__ import annotations

import threading
from typing import Any

from memory_agent import config as config_mod
from memory_agent.errors import NotReady
from memory_agent.index.memory import Memory
from ragcore import Follower

__all__ = ["FollowedIndex", "FollowingMemory", "ReadOnlyProcess"]


class ReadOnlyProcess(RuntimeError):
    """A reader process was asked to change the index (a bug: it serves reads only)."""


class FollowedIndex:
    """The part of `ragcore.Index` a search reads, over a `Follower`."""

    def __init__(self, follower: Follower):
        self.follower = follower
        self.embedder = follower.embedder

    def exists(self) -> bool:
        return self.follower.current() is not None

    def follow(self) -> int:
        """Catch up with the daemon (`Follower.follow`)."""
        return self.follower.follow()

    def snapshot(self) -> Any:
        """The state as of the last `follow` (the first call opens the index)."""
        return self.follower.current_snapshot()

    @property
    def generation(self) -> str | None:
        return self.follower.serving()[0]

    @property
    def seen(self) -> int:
        return self.follower.seen

    def dense_state(self) -> str:
        snap = self.follower.held  # no open here: health must answer at once
        if snap is None:
            return "closed"
        return "graph" if snap.model.graph is not None else "exact"

    def doc(self, doc_id: str) -> Any:
        return self.snapshot().doc(doc_id)

    def close(self) -> None:
        self.follower.close()


class FollowingMemory(Memory):
    """A `Memory` that reads the daemon's index and writes nothing (a reader process)."""

    follows = True

    def __init__(self, cfg: config_mod.Config, **kwargs: Any):
        super().__init__(cfg, resident=True, **kwargs)
        self._followed: FollowedIndex | None = None
        self._follow_lock = threading.Lock()

    @property
    def index(self) -> FollowedIndex:  # type: ignore[override]
        if self._followed is None:
            with self._follow_lock:
                if self._followed is None:
                    if config_mod.qdrant_of(self.cfg):
                        raise NotReady(
                            "reader processes serve a local index only (this home's dense "
                            "vectors are in Qdrant)",
                            "set `read_processes = 0`; the daemon answers every search",
                        )
                    follower = Follower(
                        self.cfg.index_dir, self.embedder, max_chars=int(self.cfg.max_chars)
                    )
                    self._followed = FollowedIndex(follower)
        return self._followed

    def dense_state(self) -> str:
        followed = self._followed
        return "closed" if followed is None else followed.dense_state()

    def refresh_for_read(self) -> dict[str, Any] | None:
        """The daemon's changes since the last search, replayed (the files are the daemon's
        to scan)."""
        replayed = self.index.follow()
        return {"replayed": replayed}

    def _refresh(self, *, force: bool = False) -> dict[str, Any]:
        raise ReadOnlyProcess("a reader process never refreshes the index: the daemon does")

    def rebuild(self, hold: Any = None) -> dict[str, Any]:
        raise ReadOnlyProcess("a reader process never rebuilds the index: the daemon does")

    def close(self) -> None:
        if self._followed is not None:
            self._followed.close()
        if self._embedder is not None and self._embedder.cache is not None:
            self._embedder.cache.close()
