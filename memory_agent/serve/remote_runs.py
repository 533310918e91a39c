"""The daemon's own rounds of sync with the KB's remote (`memory_agent.sync.remote`): every
`sync_interval` seconds, shortly after a write and at a session's start - in a background
thread, never in a caller's way. While the remote is unreachable the interval doubles (up to an
hour) and comes back down after a round that works; a rewritten upstream stops the rounds until
a person acts (`status` says what to do). `sync_interval = 0` turns the rounds off
(`memory-agent sync` still runs one). Each KB of the home has its own rounds (`KbRemotes`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from memory_agent.errors import MemoryAgentError
from memory_agent.kb.kbs import KbPlace
from memory_agent.sync.remote import Syncer, UpstreamRewritten
from memory_agent.sync.transport import RemoteUnreachable

__all__ = ["KbRemotes", "RemoteRuns"]

log = logging.getLogger("memory_agent.remote")
AFTER_WRITE_S = 5.0  # a burst of writes is pushed once, this long after the first
MAX_BACKOFF_S = 3600.0


class RemoteRuns:
    def __init__(self, syncer: Syncer, interval: float):
        self.syncer = syncer
        self.interval = float(interval)
        self._wake = threading.Event()
        self._due = time.monotonic() + 2.0  # the first round soon after the daemon starts
        self._backoff = self.interval
        self._round = threading.Lock()  # one round at a time (a CLI's and the timer's)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.interval <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="remote-sync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def poke(self, delay: float = AFTER_WRITE_S) -> None:
        """A round soon (after a write, at a session's start), unless one is due sooner."""
        if self.interval <= 0:
            return
        self._due = min(self._due, time.monotonic() + delay)
        self._wake.set()

    def run_now(self) -> dict[str, Any]:
        """One round for a caller (`memory-agent sync`): its report, or its error."""
        with self._round:
            return self.syncer.run()

    def between_rounds(self) -> threading.Lock:
        """Held: no round runs (`kb remove` moves the clone away meanwhile)."""
        return self._round

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(max(0.0, self._due - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                return
            if time.monotonic() < self._due:
                continue
            self._due = time.monotonic() + self._backoff
            try:
                if self.syncer.url() is None or self.syncer.record().get("stopped"):
                    continue
                with self._round:
                    report = self.syncer.run()
                self._backoff = self.interval
                self._due = time.monotonic() + self._backoff
                if report.get("pulled") or report.get("pushed"):
                    log.info(
                        "sync: pulled %s, pushed %s commit(s)", report["pulled"], report["pushed"]
                    )
            except RemoteUnreachable as exc:
                self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
                self._due = time.monotonic() + self._backoff
                log.info("sync: %s; next try in %.0f s", exc.message, self._backoff)
            except UpstreamRewritten as exc:
                log.warning("sync stopped: %s", exc.message)
            except MemoryAgentError as exc:
                log.warning("sync failed: %s", exc.message)
            except Exception:  # noqa: BLE001 - the thread must go on
                log.exception("sync failed")


class KbRemotes:
    """The rounds of every KB of the home (`memory_agent.kb.kbs`): one `RemoteRuns` each,
    made when a KB is first seen (a KB added while the daemon runs gets its rounds), stopped
    when it is removed. `syncer`, `run_now` and `poke` without a name are the personal KB's,
    as before there were several."""

    def __init__(self, make: Callable[[KbPlace], RemoteRuns], places: Callable[[], list[KbPlace]]):
        self._make = make
        self._places = places
        self._runs: dict[KbPlace, RemoteRuns] = {}
        self._lock = threading.Lock()
        self._started = False

    def all(self) -> list[tuple[KbPlace, RemoteRuns]]:
        """Each KB's runs, in the registry's order (personal first)."""
        places = self._places()
        with self._lock:
            for place in [p for p in self._runs if p not in places]:
                self._runs.pop(place).stop()  # removed (or re-added otherwise)
            for place in places:
                if place not in self._runs:
                    self._runs[place] = self._make(place)
                    if self._started:
                        self._runs[place].start()
            return [(p, self._runs[p]) for p in places]

    def runs(self, name: str | None = None) -> RemoteRuns:
        from memory_agent.kb.kbs import PERSONAL

        wanted = name or PERSONAL
        for place, runs in self.all():
            if place.name == wanted:
                return runs
        raise KeyError(wanted)

    @property
    def syncer(self) -> Syncer:
        return self.runs().syncer

    def run_now(self) -> dict[str, Any]:
        return self.runs().run_now()

    def start(self) -> None:
        self._started = True
        for _, runs in self.all():
            runs.start()

    def stop(self) -> None:
        self._started = False
        with self._lock:
            for runs in self._runs.values():
                runs.stop()

    def poke(self, delay: float = AFTER_WRITE_S, name: str | None = None) -> None:
        """A round soon for KB `name` (None: every KB, as at a session's start)."""
        for place, runs in self.all():
            if name is None or place.name == name:
                runs.poke(delay)
