"""Forgetting, safely: which entries have gone dormant, and which could be archived.

Nothing is ever deleted: `memory-agent gc --dry-run` lists the entries with the reason; applying
it archives the archive candidates through the gateway (preview first, then one commit with all
of them). Dormant entries are only ranked lower (see `memory_agent.recall.policy`).
"""

from __future__ import annotations

from typing import Any

from memory_agent.index.memory import KB_SOURCE, Memory
from memory_agent.recall import policy
from memory_agent.recall.ranking import idle_days

__all__ = ["plan"]


def plan(memory: Memory, now: float) -> dict[str, Any]:
    dormant, archive = [], []
    entries = 0
    for info in memory.index.docs():
        if info.source != KB_SOURCE or info.status != "active":
            continue
        payload = info.payload()
        entries += 1
        doc = info.id
        stats = memory.stats.get(doc)
        recalls = stats.recall_count if stats else 0
        entry_type = str(payload.get("type", "note"))
        idle = idle_days(payload, stats, now)
        if idle is None:
            continue  # no date to judge by
        pace = policy.pace(entry_type)
        item = {
            "id": doc,
            "type": entry_type,
            "idle_days": round(idle, 1),
            "recall_count": recalls,
            "title": payload.get("title", ""),
        }
        if policy.should_archive(idle, entry_type, recalls):
            limit = policy.ARCHIVE_AFTER_DAYS[pace] * (2 if recalls >= policy.PROVEN_RECALLS else 1)
            archive.append(
                {
                    **item,
                    "reason": f"idle {idle:.0f} days > {limit:.0f} "
                    f"({pace}-moving type {entry_type})",
                }
            )
        elif policy.decay_state(idle, entry_type, recalls) == "dormant":
            limit = policy.DORMANT_AFTER_DAYS[pace] * (2 if recalls >= policy.PROVEN_RECALLS else 1)
            dormant.append(
                {**item, "reason": f"idle {idle:.0f} days > {limit:.0f}: ranked lower, kept"}
            )
    key = lambda c: (-c["idle_days"], c["id"])  # noqa: E731
    return {
        "entries": entries,
        "dormant": sorted(dormant, key=key),
        "archive": sorted(archive, key=key),
    }
