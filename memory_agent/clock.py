"""The clock, as a setting like every other input.

Every time the memory reasons about - an entry's `created`, `superseded_at` and `archived_at`,
the time stamp of a usage event, recency and dormancy, gc - comes from one `Clock`. By default
it is the system clock; the `clock` setting (`MEMORY_AGENT_CLOCK`) pins it to a fixed instant
(ISO 8601, e.g. `2026-11-30T09:00:00Z`), so tests and experiments never depend on the day they
run. Operational times (log lines, uptime, timeouts) stay on the real clocks.
"""

from __future__ import annotations

import time

__all__ = ["Clock", "iso", "parse_time"]


def parse_time(value: str) -> float:
    """Seconds since the epoch from ISO 8601 (a date alone means its midnight, UTC)."""
    text = value.strip()
    try:
        import datetime as dt  # here: a hook's start-up does not pay for it

        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(
            f"{value!r} is not a time; use ISO 8601 such as 2026-11-30T09:00:00Z"
        ) from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def iso(ts: float) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds)."""
    import datetime as dt

    return dt.datetime.fromtimestamp(int(ts), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    """`now()` in seconds since the epoch: the system time, or a fixed instant."""

    def __init__(self, fixed: str | float | None = None):
        if isinstance(fixed, str):
            fixed = parse_time(fixed) if fixed.strip() else None
        self.fixed = fixed

    def __call__(self) -> float:
        return self.now()

    def now(self) -> float:
        return self.fixed if self.fixed is not None else time.time()

    def iso(self) -> str:
        return iso(self.now())

    @classmethod
    def from_setting(cls, value: str) -> Clock:
        return cls(value or None)
