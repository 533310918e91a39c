"""Re-ranking with the memory's dynamics (`memory_agent.recall.policy`): reinforcement, importance,
recency and decay, links. Input: ragcore's hits (relevance); output: ranked entries with every
signal's contribution, for `explain`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory_agent.clock import parse_time
from memory_agent.recall import policy
from memory_agent.recall.events import EntryStats

__all__ = ["Edge", "Ranked", "rerank"]

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
    via: str | None = None  # the path that gave the links signal, e.g. "entity 'x' from <id>"

    @property
    def score(self) -> float:
        return self.relevance + sum(self.signals.values())


def _ts(value: Any) -> float | None:
    """A payload's time (`created`, ...) in seconds: a number as it is, text through
    `clock.parse_time`; None when missing or not a time (that signal is left out)."""
    if isinstance(value, (int, float)):
        return float(value)
    if value is None or value == "":
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def idle_days(payload: dict[str, Any], stats: EntryStats | None, now: float) -> float | None:
    """Days since the entry was created, updated, recalled or opened; None if nothing says
    (a project doc without dates gets no recency or decay signal at all)."""
    times = [_ts(payload.get("created")), _ts(payload.get("updated"))]
    if stats is not None:
        times += [stats.last_recalled, stats.last_opened]
    known = [t for t in times if t is not None]
    return (now - max(known)) / DAY if known else None


# An edge: (neighbour id, kind, weight factor in [0, 1], label for the path - e.g. the entity).
Edge = tuple[str, str, float, str]


def rerank(
    candidates: list[Ranked],
    *,
    stats: dict[str, EntryStats],
    now: float,
    neighbours: Callable[[str], list[Edge]],
    lookup,
    allowed,
) -> list[Ranked]:
    """Add the signals to each candidate, pull in the neighbours of strong hits (up to
    `policy.MAX_HOPS` hops), sort.

    `neighbours(doc)` lists its edges; `lookup(doc)` gives a neighbour's (payload, snippet)
    or None; `allowed(payload)` applies the search's filter to it.

    A neighbour's links signal is LINK_SCALE x edge weight x the strength of the node it was
    reached from (a strong hit's relevance; a hop further, that times the edge weight and
    HOP_DECAY). It never lifts an entry that does not match the query past the hit it came
    from; one that matches (it has relevance of its own) is capped only when
    `policy.CAP_MATCHING`. Edges of weight 0 (contradicts) are not followed."""
    by_id = {c.doc_id: c for c in candidates}
    sources = [c for c in candidates[: policy.LINK_SOURCES] if c.relevance >= policy.LINK_MIN_SCORE]
    # (node, its strength, the strong hit it came from, the path so far)
    frontier = [(hit.doc_id, hit.relevance, hit, "") for hit in sources]
    pulled = 0
    for hop in range(1, policy.MAX_HOPS + 1):
        reached: dict[str, tuple[float, Ranked, str]] = {}
        for node, strength, root, path in frontier:
            for other, kind, factor, label in neighbours(node):
                weight = policy.EDGE_WEIGHTS.get(kind, 0.0) * factor
                if other == node or other == root.doc_id or weight <= 0.0:
                    continue
                target = by_id.get(other)
                if target is None:
                    if pulled >= policy.MAX_PULLED:
                        continue
                    found = lookup(other)
                    if found is None or not allowed(found[0]):
                        continue
                    target = by_id[other] = Ranked(other, 0.0, found[0], found[1])
                    pulled += 1
                bonus = policy.LINK_SCALE * weight * strength
                if target.relevance <= 0.0 or policy.CAP_MATCHING:
                    # brought closer to the hit it came from, never past it
                    bonus = min(bonus, max(0.0, root.relevance - target.relevance - 1e-3))
                step = f"{kind} '{label}'" if label else kind
                route = f"{step} from {node}" + (f", {path}" if path else "")
                if bonus > target.signals.get("links", 0.0):
                    target.signals["links"] = bonus
                    target.via = route
                if hop < policy.MAX_HOPS:
                    onward = strength * weight * policy.HOP_DECAY
                    if onward > reached.get(other, (0.0,))[0]:
                        reached[other] = (onward, root, route)
        frontier = [(doc, st, root, route) for doc, (st, root, route) in reached.items()]
        frontier.sort(key=lambda f: -f[1])
        del frontier[policy.HOP_FRONTIER :]
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
