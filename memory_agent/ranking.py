"""Re-ranking with the memory's dynamics (`memory_agent.policy`): reinforcement, importance,
recency and decay, links. Input: ragcore's hits (relevance); output: ranked entries with every
signal's contribution, for `explain`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from memory_agent import policy
from memory_agent.events import EntryStats

__all__ = ["Ranked", "rerank"]

DAY = 86400.0


@dataclass
class Ranked:
    doc_id: str
    relevance: float
    payload: dict[str, Any]
    snippet: str
    why: dict[str, Any] | None = None
    signals: dict[str, float] = field(default_factory=dict)
    state: str = "active"

    @property
    def score(self) -> float:
        return self.relevance + sum(self.signals.values())


def _ts(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def idle_days(payload: dict[str, Any], stats: EntryStats | None, now: float) -> float | None:
    """Days since the entry was created, updated, recalled or opened; None if nothing says
    (a project doc without dates gets no recency or decay signal at all)."""
    times = [_ts(payload.get("created")), _ts(payload.get("updated"))]
    if stats is not None:
        times += [stats.last_recalled, stats.last_opened]
    known = [t for t in times if t is not None]
    return (now - max(known)) / DAY if known else None


def rerank(
    candidates: list[Ranked],
    *,
    stats: dict[str, EntryStats],
    now: float,
    neighbours: dict[str, list[tuple[str, str]]],
    lookup,
    allowed,
) -> list[Ranked]:
    """Add the signals to each candidate, pull in linked neighbours of strong hits, sort.

    `neighbours[doc]` lists (neighbour id, edge kind); `lookup(doc)` gives a neighbour's
    (payload, snippet) or None; `allowed(payload)` applies the search's filter to it."""
    by_id = {c.doc_id: c for c in candidates}
    strong = [c for c in candidates[: policy.LINK_SOURCES] if c.relevance >= policy.LINK_MIN_SCORE]
    for hit in strong:
        for other, kind in neighbours.get(hit.doc_id, []):
            if other == hit.doc_id:
                continue
            bonus = policy.LINK_SCALE * policy.EDGE_WEIGHTS[kind] * hit.relevance
            target = by_id.get(other)
            if target is None:
                found = lookup(other)
                if found is None or not allowed(found[0]):
                    continue
                target = by_id[other] = Ranked(other, 0.0, found[0], found[1])
            # A link brings a neighbour closer to the hit that points at it, never past it: it
            # adds context, it does not overrule the relevance order of the strong hits.
            bonus = min(bonus, max(0.0, hit.relevance - target.relevance - 1e-3))
            target.signals["links"] = max(target.signals.get("links", 0.0), bonus)
    for c in by_id.values():
        s = stats.get(c.doc_id)
        entry_type = str(c.payload.get("type", "note"))
        idle = idle_days(c.payload, s, now)
        c.signals["reinforcement"] = policy.reinforcement_bonus(s.recall_count if s else 0)
        c.signals["importance"] = policy.importance_bonus(s.importance if s else None)
        c.signals["recency"] = policy.recency_bonus(idle, entry_type) if idle is not None else 0.0
        c.state = (
            "active"
            if idle is None
            else policy.decay_state(idle, entry_type, s.recall_count if s else 0)
        )
        c.signals["dormancy"] = -policy.DORMANT_PENALTY if c.state == "dormant" else 0.0
        c.signals.setdefault("links", 0.0)
    return sorted(by_id.values(), key=lambda c: (-c.score, c.doc_id))
