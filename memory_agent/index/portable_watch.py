"""A change signal for the scanner on every OS: watchfiles (the Rust `notify` crate: inotify on
Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows), with the interface of the inotify
`Watcher` (`memory_agent.index.watch`).

The same contract: `watch(directory)` (not recursive), `unwatch_all()`, `drain()` returns the
paths written, moved or deleted since the last call, and `rescan` when a full scan is needed (a
folder appeared, moved or vanished; a folder could not be watched; the watcher thread failed).
Events reach `drain()` through a thread that collects what the OS reports. So that a change
made just before a search is in that search (as with inotify), `drain()` ends with a fence:
it rewrites a file of its own in a folder it also watches (`<home>/run/watch/fence`) and waits
until the thread has seen that write - everything the OS reported before it is then in hand.
The OS reports in order within one watcher on Linux (one inotify queue) and macOS (one FSEvents
stream); Windows watches each folder on its own, so there a change may reach the search after
next. A fence not seen within `FENCE_WAIT_S` asks for a full scan instead (never a stale
answer). What the fence costs a search: experiments/watchers.

The set of folders is given to `notify` when it starts, so a change of the set (a full scan
re-registers every folder) starts a new one at `settle()` or the next `drain()`, the old one
running until the new one is up. What changed between the scan reading a folder and the new
watcher starting is not reported: `settle()` says a new one started, and the scanner reads the
folders once more (inotify watches a folder before it is read, and needs no second pass).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from memory_agent.index.watch import WatchEvents

__all__ = ["PortableWatcher", "watchfiles_available"]

log = logging.getLogger("memory_agent.scanner")
STEP_MS = 2  # how long notify waits for more changes before it hands a group over
DEBOUNCE_MS = 50  # the longest a group is held
TIMEOUT_MS = 1000  # how often the thread wakes with nothing changed (to see a stop)
FENCE_WAIT_S = 1.0  # a fence not seen by then: a full scan instead


def watchfiles_available() -> bool:
    try:
        from watchfiles._rust_notify import RustNotify  # noqa: F401
    except ImportError:
        return False
    return True


class _Stop:
    """The stop signal `RustNotify.watch` polls."""

    def __init__(self) -> None:
        self.flag = threading.Event()

    def is_set(self) -> bool:
        return self.flag.is_set()


class _Run:
    """One `notify` watcher over a fixed set of folders, and its thread."""

    def __init__(self, folders: set[Path], sink) -> None:
        from watchfiles._rust_notify import RustNotify

        self.folders = set(folders)
        self.stop = _Stop()
        self.notify = RustNotify([str(f) for f in sorted(folders)], False, False, 300, False, True)
        self.thread = threading.Thread(
            target=self._loop, args=(sink,), name="memory-agent-watch", daemon=True
        )
        self.thread.start()

    def _loop(self, sink) -> None:
        try:
            while not self.stop.is_set():
                found = self.notify.watch(DEBOUNCE_MS, STEP_MS, TIMEOUT_MS, self.stop)
                if isinstance(found, set):
                    sink(found, None)
                elif found == "signal":
                    continue
        except Exception as exc:  # noqa: BLE001 - the scanner falls back to a full scan
            sink(set(), f"the file watcher stopped: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.stop.flag.set()
        self.thread.join(timeout=5)
        try:
            self.notify.close()
        except Exception:  # noqa: BLE001 - closing a watcher that already failed
            pass


class PortableWatcher:
    def __init__(self, fence_dir: Path) -> None:
        if not watchfiles_available():
            raise OSError("watchfiles is not installed")
        self._lock = threading.Lock()
        self._seen = threading.Condition(self._lock)
        self._wanted: set[Path] = set()
        self._run: _Run | None = None
        self._pending = WatchEvents()
        self.fence_dir = Path(fence_dir)
        self.fence_dir.mkdir(parents=True, exist_ok=True)
        self.fence = self.fence_dir / "fence"
        self._fenced = 0  # the last fence written
        self._fence_seen = 0  # the last fence the thread reported

    def close(self) -> None:
        with self._lock:
            run, self._run = self._run, None
        if run is not None:
            run.close()

    def watched(self) -> set[Path]:
        return set(self._wanted)

    def watch(self, directory: Path) -> bool:
        """Watch one directory (idempotent); it takes effect at the next `drain()`. False if
        it does not exist (nothing to watch)."""
        directory = Path(directory)
        if not directory.is_dir():
            return False
        with self._lock:
            self._wanted.add(directory)
        return True

    def unwatch_all(self) -> None:
        with self._lock:
            self._wanted.clear()

    def settle(self) -> bool:
        """Start watching the folders given since the last start, now. True if a new watcher
        started: a change made before it is not reported, so the caller reads the folders again
        (the scanner's full scan does)."""
        return self._restart_if_changed()

    def drain(self) -> WatchEvents:
        """Everything that happened before this call (waits for the fence, see the module)."""
        self._restart_if_changed()
        with self._lock:
            running = self._run is not None
        if running:
            self._fenced += 1
            n = self._fenced
            self.fence.write_text(str(n))
            with self._seen:
                if not self._seen.wait_for(lambda: self._fence_seen >= n, FENCE_WAIT_S):
                    self._pending.rescan = (
                        self._pending.rescan
                        or f"the file watcher did not report within {FENCE_WAIT_S:g} s"
                    )
        with self._lock:
            events, self._pending = self._pending, WatchEvents()
            return events

    def _restart_if_changed(self) -> bool:
        with self._lock:
            wanted = set(self._wanted)
            current = self._run.folders if self._run is not None else None
        if current == wanted | {self.fence_dir} or (not wanted and current is None):
            return False
        new = None
        if wanted:
            try:
                new = _Run(wanted | {self.fence_dir}, self._collect)
            except (OSError, RuntimeError) as exc:  # a folder vanished meanwhile, or no watch
                with self._lock:
                    self._pending.rescan = f"cannot watch the folders: {exc}"
        with self._lock:
            old, self._run = self._run, new
        if old is not None:
            old.close()
        return new is not None

    def _collect(self, found: set[tuple[int, str]], failed: str | None) -> None:
        with self._lock:
            if failed:
                self._pending.rescan = failed
                log.warning("%s: files are rescanned until it restarts", failed)
                self._run = None  # the next drain starts a new one
            watched = self._wanted
            for _change, name in found:
                path = Path(name)
                if path == self.fence:
                    try:
                        self._fence_seen = max(self._fence_seen, int(path.read_text() or 0))
                    except (OSError, ValueError):
                        pass  # being rewritten: the next report has it
                    continue
                if path == self.fence_dir or path.parent == self.fence_dir:
                    continue
                if path in watched or os.path.isdir(path):
                    self._pending.rescan = f"folder {path} appeared, moved or vanished"
                    continue
                if path.parent not in watched:
                    continue  # (a folder's own entry, reported by some OSes)
                self._pending.paths.add(path)
            self._seen.notify_all()
