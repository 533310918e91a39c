"""The clock, as a setting like every other input.

Every time the memory reasons about - an entry's `created`, `superseded_at` and `archived_at`,
the time stamp of a usage event, recency and dormancy, gc - comes from one `Clock`. By default
it is the system clock; the `clock` setting (`MEMORY_AGENT_CLOCK`) pins it to a fixed instant
(ISO 8601, e.g. `2026-11-30T09:00:00Z`), so tests and experiments never depend on the day they
run. Operational times (log lines, uptime, timeouts) stay on the real clocks.

`parse_time` is the one reader of a date the memory is given (the setting, an entry's
frontmatter, the index's payloads, a search's `as_of`); each caller decides what a bad one means.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["Clock", "iso", "parse_time"]


def parse_time(value: Any, *, date_only: bool = False) -> float:
    """Seconds since the epoch of an ISO 8601 time: the one date parser of the memory (the
    `clock` setting, entry dates, the index's payloads, `as_of`). A date alone means its
    midnight, UTC; a time without an offset is UTC; a `date` or `datetime` (as YAML reads
    one) counts as its text would. With `date_only`, only a date is accepted (YYYY-MM-DD).
    Anything else - None, a number, garbage - raises ValueError naming the value and the form.
    Each caller decides what a bad value means to it (a setting refused, an entry invalid, a
    ranking signal left out)."""
    import datetime as dt  # here: a hook's start-up does not pay for it

    when = value
    if isinstance(value, str):
        text = value.strip()
        try:
            if date_only:
                when = dt.date.fromisoformat(text)
            else:
                when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            when = None
    elif date_only and isinstance(value, dt.datetime):
        when = None
    if not isinstance(when, dt.date):  # a datetime is a date too
        example = "2026-11-30" if date_only else "2026-11-30T09:00:00Z"
        form = "a date" if date_only else "a time"
        raise ValueError(f"{value!r} is not {form}; use ISO 8601 such as {example}")
    if not isinstance(when, dt.datetime):
        when = dt.datetime(when.year, when.month, when.day)
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
