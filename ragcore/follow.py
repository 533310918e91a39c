"""An index followed, read-only, by a process that does not own it (ADR 0028: a reader beside
the daemon).

The owner (an `Index` under the home lock) is the only writer. Every change it makes is one
segment transaction that takes the next `seq` (`ragcore.segment`), committed before the
owner replies; a rebuild writes a new generation and moves CURRENT. A `Follower` opens the
generation CURRENT names the way the owner does (the saved arrays mapped, the changes since
replayed: `ragcore.modelload`), and `follow()` brings it up to date: a new generation is
opened whole; otherwise the changes after the last `seq` it has seen are replayed on a
copy-on-write clone of its read model and published by one assignment, as the owner
publishes its own. So a search in the follower after the owner's reply to a write sees that
write - whole, or (before `follow`) not at all.

The follower writes nothing to the index folder: the segment is opened read-only (`mode=ro`:
no checkpoint of the owner's WAL when it closes, no upgrade of an older segment), the saved
arrays are read, never removed or replaced (`load_model(save=False)`), and no dense graph is
built (above `ann.EXACT_BELOW` it uses the owner's saved graph when it fits at the open, else
the exact scan until the owner saves it: each follow looks for it, one stat). The files it may
write: the saved arrays' check stamp (ADR 0026), which describes the owner's file as it is,
and - opening a segment no one has open - SQLite's empty WAL file, as the owner's open makes.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from ragcore import ann
from ragcore.documents import DEFAULT_MAX_CHARS
from ragcore.embedding import Embedder
from ragcore.errors import IndexError_, IndexInconsistent
from ragcore.index import live_generation
from ragcore.modelload import replay
from ragcore.segment import FILE as SEGMENT_FILE
from ragcore.segment import SegmentFile
from ragcore.snapshot import REBUILD_HINT, Snapshot
from ragcore.tokenizer import Tokenizer

__all__ = ["Follower"]

RETIRE_AFTER_S = 60.0  # a replaced generation's segment stays open this long for its readers


class Follower:
    """The live generation under `root`, kept in step with its owner's writes. Thread-safe:
    readers take `snapshot()` (or `current_snapshot()` without following) and never wait for
    each other; one `follow` runs at a time."""

    def __init__(
        self,
        root: str | Path,
        embedder: Embedder,
        *,
        tokenizer: Tokenizer | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        with_dense: bool = True,
        retire_after_s: float = RETIRE_AFTER_S,
    ):
        self.root = Path(root)
        self.embedder = embedder
        self.tokenizer = tokenizer or Tokenizer()
        self.max_chars = max_chars
        self.with_dense = with_dense
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._seen = 0  # every change up to this seq is in the snapshot's model
        self.retire_after_s = retire_after_s
        self._retired: list[tuple[float, SegmentFile]] = []  # (replaced at, its segment)
        self._opened_rows = None  # the base rows the generation was opened with
        self._graph_stamp: tuple[int, int] | None = None  # the saved graph, as last looked at

    # -- the Owner protocol a snapshot asks for -------------------------------------------
    def current(self) -> str | None:
        return live_generation(self.root)

    def serving(self) -> tuple[str | None, ...]:
        """A snapshot's check (`Snapshot.check`) refuses one whose generation CURRENT no longer
        names - for an owner, a sign that another process moved it. Here another process
        moving CURRENT is the normal case: the snapshot held keeps answering (the owner keeps
        the generation before the live one) until `follow` opens the new one."""
        snap = self._snap
        return (snap.generation if snap is not None else None, self.current())

    # -- reads --------------------------------------------------------------------------------
    @property
    def seen(self) -> int:
        """The owner's last change (`seq`) this follower's snapshot holds."""
        return self._seen

    @property
    def held(self) -> Snapshot | None:
        """The snapshot as of the last `follow`, None before the first (opens nothing)."""
        return self._snap

    def current_snapshot(self) -> Snapshot:
        """The snapshot as of the last `follow` (opens the index the first time)."""
        snap = self._snap
        if snap is None:
            self.follow()
            snap = self._snap
        assert snap is not None
        return snap

    def snapshot(self) -> Snapshot:
        """The owner's state now: `follow`, then the snapshot."""
        self.follow()
        return self.current_snapshot()

    def follow(self) -> int:
        """Catch up with the owner: the number of changes replayed, or -1 when a generation was
        opened (the first call, or the owner switched to a new one). Raises `IndexError_` if
        there is no index, `IndexInconsistent` for a generation it cannot read (the snapshot
        before stays published)."""
        with self._lock:
            name = self.current()
            if name is None:
                raise IndexError_(f"no index under {self.root}", REBUILD_HINT)
            self._close_retired(time.monotonic() - self.retire_after_s)
            snap = self._snap
            if snap is None or snap.generation != name:
                self._open(name)
                return -1
            self._pick_up_graph()
            snap = self._snap
            # One read transaction: the owner may write while the changes are read, and a
            # document's manifest row and its chunks must come from the same change.
            with snap.segment.read_transaction():
                seq = snap.segment.state()[1]
                if seq <= self._seen:
                    return 0
                model = snap.model.clone()
                replayed = replay(model, snap.segment, self._seen)
            self._snap, self._seen = snap.with_model(model), seq
            return replayed

    def _pick_up_graph(self) -> None:
        """The dense graph the owner saved after this generation was opened here (it builds
        one in the background above `ann.EXACT_BELOW` chunks), attached once it is on disk -
        if it was built from the saved arrays this model's base rows are (their key)."""
        snap = self._snap
        assert snap is not None
        model = snap.model
        key = model.arrays_key
        if key is None or not ann.wanted(model) or model.base_rows is not self._opened_rows:
            return
        path = self.root / snap.generation / ann.FILE
        try:  # the graph, then its meta, are replaced in turn: a change of either is looked at
            stamp = (
                path.stat().st_mtime_ns,
                path.with_name(path.name + ".json").stat().st_mtime_ns,
            )
        except OSError:
            return
        if stamp == self._graph_stamp:
            return
        self._graph_stamp = stamp
        graph = ann.open_graph(path, key)
        if graph is not None:
            clone = model.clone()
            clone.attach_graph(graph)
            self._snap = snap.with_model(clone)

    def _open(self, name: str) -> None:
        path = self.root / name / SEGMENT_FILE
        try:
            segment = SegmentFile(path, read_only=True)
        except (OSError, sqlite3.Error) as exc:  # missing, unreadable
            raise IndexInconsistent(
                f"generation {name} has no readable segment ({type(exc).__name__}: {exc})",
                REBUILD_HINT,
            ) from exc
        try:
            with segment.read_transaction():  # the load reads one state of the segment
                try:
                    meta = segment.meta()
                except sqlite3.Error as exc:  # not SQLite, or not a segment
                    raise IndexInconsistent(
                        f"generation {name} has no readable segment ({exc})", REBUILD_HINT
                    ) from exc
                if meta.get("uid") is None:  # an older format: its owner gives it change numbers
                    raise IndexInconsistent(
                        f"generation {name} has no change numbers yet (a segment of an older "
                        "format): its owner adds them when it opens it",
                        "start the index's owner (the daemon) first, or rebuild the index",
                    )
                seq = segment.state()[1]
                snap = Snapshot.open(
                    self, name, None, with_dense=self.with_dense, save=False, segment=segment
                )
        except BaseException:
            segment.close()
            raise
        # The snapshot before stays readable for the searches that hold it, for
        # `retire_after_s`; then its segment is closed (not left to the garbage collector:
        # an open file keeps a removed generation's disk space, and on Windows the folder).
        if self._snap is not None:
            self._retired.append((time.monotonic(), self._snap.segment))
        self._snap, self._seen = snap, seq
        self._opened_rows, self._graph_stamp = snap.model.base_rows, None

    def _close_retired(self, before: float) -> None:
        keep = []
        for at, segment in self._retired:
            if at <= before:
                segment.close()
            else:
                keep.append((at, segment))
        self._retired = keep

    def close(self) -> None:
        with self._lock:
            snap, self._snap = self._snap, None
            self._close_retired(float("inf"))
        if snap is not None:
            snap.segment.close()
