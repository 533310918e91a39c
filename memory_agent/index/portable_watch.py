"""A change signal for the scanner on every OS: watchfiles (the Rust `notify` crate: inotify on
Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows), with the interface of the inotify
`Watcher` (`memory_agent.index.watch`).

The same contract: `watch(directory)` (not recursive), `unwatch_all()`, `drain()` returns the
paths written, moved or deleted since the last call, and `rescan` when a full scan is needed (a
folder appeared, moved or vanished; a folder could not be watched; the watcher thread failed).
One difference, measured in experiments/watchers: events reach `drain()` through a thread that
collects what the OS reports, so a change made outside memory-agent is seen by the next search
after the watcher's delivery time (`STEP_MS` to group them, plus the OS's own latency), not at
once as with inotify. memory-agent's own writes never wait for it: the write path refreshes the
paths it wrote.

The set of folders is given to `notify` when it starts, so a change of the set (a full scan
re-registers every folder) starts a new one at the next `drain()`, the old one running until
the new one is up.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from memory_agent.index.watch import WatchEvents

__all__ = ["PortableWatcher", "watchfiles_available"]

log = logging.getLogger("memory_agent.scanner")
STEP_MS = 20  # how long notify waits for more changes before it hands a group over
DEBOUNCE_MS = 200  # the longest a group is held
TIMEOUT_MS = 1000  # how often the thread wakes with nothing changed (to see a stop)


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
    def __init__(self) -> None:
        if not watchfiles_available():
            raise OSError("watchfiles is not installed")
        self._lock = threading.Lock()
        self._wanted: set[Path] = set()
        self._run: _Run | None = None
        self._pending = WatchEvents()

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

    def drain(self) -> WatchEvents:
        """Everything reported since the last call (never waits for the OS)."""
        self._restart_if_changed()
        with self._lock:
            events, self._pending = self._pending, WatchEvents()
            return events

    def _restart_if_changed(self) -> None:
        with self._lock:
            wanted = set(self._wanted)
            current = self._run.folders if self._run is not None else None
        if current == wanted or (not wanted and current is None):
            return
        new = None
        if wanted:
            try:
                new = _Run(wanted, self._collect)
            except (OSError, RuntimeError) as exc:  # a folder vanished meanwhile, or no watch
                with self._lock:
                    self._pending.rescan = f"cannot watch the folders: {exc}"
        with self._lock:
            old, self._run = self._run, new
        if old is not None:
            old.close()

    def _collect(self, found: set[tuple[int, str]], failed: str | None) -> None:
        with self._lock:
            if failed:
                self._pending.rescan = failed
                log.warning("%s: files are rescanned until it restarts", failed)
                self._run = None  # the next drain starts a new one
            watched = self._wanted
            for _change, name in found:
                path = Path(name)
                if path in watched or os.path.isdir(path):
                    self._pending.rescan = f"folder {path} appeared, moved or vanished"
                    continue
                if path.parent not in watched:
                    continue  # (a folder's own entry, reported by some OSes)
                self._pending.paths.add(path)
