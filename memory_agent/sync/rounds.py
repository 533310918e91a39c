"""What the rounds of sync did while nobody was looking, and what a person has been shown.

The daemon runs most rounds on its own (a timer, after a write, at a session's start), so a
`memory-agent sync` typed a moment later often finds nothing left to do: its own round's
`pulled 0, pushed 0` would hide that seven commits went out and fifteen entries came in, or
that this machine's new `deploy-window` was renamed `deploy-window-2` because the other
machine had made the same id first. So the record of a KB's remote (`run/remote.json`, kept by
`memory_agent.sync.remote.Syncer`) keeps the last `KEPT` rounds that did something - each with
its number, its time, what it pushed and pulled (commits, and entry files that came in), the
ids it renamed, the forks it made and the variants it kept - and `seen`, the number of the
last round a person was shown. `unseen` sums the rounds after it; `memory-agent sync` and
`memory-agent remote` print that and move `seen` on (`mark_seen`); `status` and the browser
show it without moving it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KEPT", "mark_seen", "note_round", "unseen"]

KEPT = 50  # rounds that did something, kept in the record (older ones are dropped)
LISTS = ("renamed", "forks", "variants")


def note_round(record: dict[str, Any], report: dict[str, Any], at: float) -> None:
    """Add a finished round's report to `record` (in place), if it did anything."""
    did = {
        "pulled": int(report.get("pulled") or 0),
        "pushed": int(report.get("pushed") or 0),
        "entries_in": int(report.get("entries_in") or 0),
        **{key: list(report.get(key) or []) for key in LISTS},
    }
    if not any(did.values()) and not report.get("joined"):
        return
    number = int(record.get("round") or 0) + 1
    record["round"] = number
    rounds = [r for r in record.get("rounds") or [] if isinstance(r, dict)]
    rounds.append({"n": number, "at": at, "joined": bool(report.get("joined")), **did})
    record["rounds"] = rounds[-KEPT:]


def unseen(record: dict[str, Any]) -> dict[str, Any] | None:
    """What the rounds after the last one a person was shown did, summed (None: nothing)."""
    seen = int(record.get("seen") or 0)
    rounds = [
        r for r in record.get("rounds") or [] if isinstance(r, dict) and int(r.get("n", 0)) > seen
    ]
    if not rounds:
        return None
    out: dict[str, Any] = {
        "rounds": len(rounds),
        "since": rounds[0].get("at"),
        "until": rounds[-1].get("at"),
        "upto": int(rounds[-1]["n"]),
        "pulled": sum(int(r.get("pulled") or 0) for r in rounds),
        "pushed": sum(int(r.get("pushed") or 0) for r in rounds),
        "entries_in": sum(int(r.get("entries_in") or 0) for r in rounds),
    }
    for key in LISTS:
        out[key] = [item for r in rounds for item in r.get(key) or []]
    return out


def mark_seen(record: dict[str, Any], upto: int) -> bool:
    """Move `seen` to round `upto` (in place); whether it moved."""
    if upto <= int(record.get("seen") or 0):
        return False
    record["seen"] = upto
    return True
