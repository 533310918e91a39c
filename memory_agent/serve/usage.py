"""The usage log as the daemon keeps it (ADR 0006): what earlier sessions logged is folded into
the live per-entry stats at start, this session's events go to its own file, and every event
is folded into those stats as it is logged - a search's query and the recalls of its hits in
one write. With reader processes (ADR 0028) each process logs to its own file and folds the
others' new lines (`EventTail`) at most once a `CATCH_UP_S`, before a search ranks: the
reinforcement stays one fold over every file.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
import time
from typing import Any

from memory_agent.index.memory import Memory
from memory_agent.intake.redact import redact
from memory_agent.recall.events import EventLog, EventTail, apply_event, compact, fold, is_look
from memory_agent.recall.reads import Found

__all__ = ["QUERY_LOG_CHARS", "Usage"]

log = logging.getLogger("memory_agent.service")  # the daemon log's name for it, unchanged
QUERY_LOG_CHARS = 500  # a query is logged (usage events) up to this many characters
CATCH_UP_S = 1.0  # the other processes' new events are folded at most this often


class Usage:
    """`compact_old`: gzip finished sessions' files at start (the daemon does; a reader does not)."""

    def __init__(self, memory: Memory, *, compact_old: bool = True):
        self._memory = memory
        events_dir = memory.home / "events"
        self.events = EventLog(events_dir, clock=memory.clock)
        self._tail = EventTail(events_dir, self.events.path.name)
        folded = fold(events_dir, self._tail)
        memory.stats = folded.stats
        self.fold_report = folded
        self._qid_prefix = secrets.token_hex(4) + "-"
        self._qids = itertools.count(1)
        self._stats_lock = threading.Lock()  # the live usage stats, changed by every read
        self._tail_lock = threading.Lock()
        self._caught_up = time.monotonic()
        if not compact_old:
            return
        try:  # gzip finished sessions' files; the fold reads both forms
            compacted = compact(events_dir, keep=self.events.path)
            if compacted:
                log.info("events: compacted %d old session file(s)", len(compacted))
        except OSError as exc:  # derived data: a failed compaction must not stop the daemon
            log.warning("events: compaction failed (%s); it is retried at the next start", exc)
        if folded.corrupt_lines or folded.read_errors:
            log.warning(
                "events: %d corrupt line(s) skipped, read errors: %s",
                folded.corrupt_lines,
                folded.read_errors,
            )

    def catch_up(self, force: bool = False) -> int:
        """Fold the events other processes (a daemon's readers, the daemon) logged since the
        last catch-up, if it was `CATCH_UP_S` ago or more (`force`: now, waiting for another
        thread's catch-up - gc judges idleness by them); the number folded. A search calls it
        before it ranks; a call while another thread catches up returns at once."""
        if not force and time.monotonic() - self._caught_up < CATCH_UP_S:
            return 0
        if not self._tail_lock.acquire(blocking=force):
            return 0
        try:
            self._caught_up = time.monotonic()
            events = self._tail.new_events()  # read outside the stats' lock, applied under it
            with self._stats_lock:
                return sum(apply_event(self._memory.stats, e) for e in events)
        finally:
            self._tail_lock.release()

    def record(self, kind: str, **fields: Any) -> None:
        """Log one event and fold it into the live stats."""
        event = self.events.append(kind, **fields)
        with self._stats_lock:
            apply_event(self._memory.stats, event)

    def record_get(self, entry: str, caller: str | None) -> None:
        """An entry read: an agent's `get` (it counts as use), or a person's look."""
        self.record("look" if is_look(caller) else "get", entry=entry)

    def record_search(
        self, query: str, found: Found, started: float, caller: str | None
    ) -> dict[str, Any]:
        """Log the query and its hits (one write); fold the recalls into the live stats.
        Returns the search's reply."""
        reply = found.reply
        qid = f"{self._qid_prefix}{next(self._qids):x}"  # unique per daemon, no system call
        items: list[tuple[str, dict[str, Any]]] = [
            (
                "query",
                {
                    "qid": qid,
                    # redacted with a margin, then cut exactly: a secret across the cut
                    # leaves nothing
                    "text": redact(query[: QUERY_LOG_CHARS + 4096])[:QUERY_LOG_CHARS],
                    "results": len(reply["hits"]),
                    "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                    "caller": caller,
                },
            )
        ]
        kind = "look" if is_look(caller) else "recall"  # a person's look is not a recall
        for rank, hit in enumerate(reply["hits"], start=1):
            items.append(
                (
                    kind,
                    {
                        "qid": qid,
                        "entry": hit["id"],
                        "rank": rank,
                        "score": hit["score"],
                        "channel": found.channels.get(hit["id"], "links"),
                    },
                )
            )
        events = self.events.append_many(items)
        with self._stats_lock:
            for event in events[1:]:
                apply_event(self._memory.stats, event)
        return reply
