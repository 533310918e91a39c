"""What the memory browser (`memory_agent.ui`) reads from the daemon: counts, a page of
documents, one entry's stats and neighbours. Each reads one snapshot of the index and takes
no lock (ADR 0011); the usage stats are the live ones.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from memory_agent.index.memory import Memory
from memory_agent.kb.kbs import is_kb_source, kb_of_source
from memory_agent.kb.scopes import search_scopes
from memory_agent.recall.gc import plan

__all__ = ["entries", "entry_context", "overview"]


def overview(memory: Memory, proposals: int) -> dict[str, Any]:
    """Counts by type, status and source, and what the gate (its `proposals` waiting) and
    gc would do."""
    with memory.session():  # no lock: one snapshot of the index
        by_type, by_status, by_source, by_scope = Counter(), Counter(), Counter(), Counter()
        snap = memory.index.snapshot() if memory.index.exists() else None
        for info in snap.docs() if snap is not None else ():
            by_source[info.source] += 1
            by_scope[info.scope] += 1
            if is_kb_source(info.source):  # every KB of the home (`kb`, `kb:team`)
                by_type[info.type] += 1
                by_status[info.status] += 1
        gc = plan(memory, memory.clock()) if memory.index.exists() else {}
    return {
        "types": dict(by_type),
        "statuses": dict(by_status),
        "sources": dict(by_source),
        "scopes": dict(by_scope),
        "dormant": len(gc.get("dormant", [])),
        "archive_candidates": len(gc.get("archive", [])),
        "proposals": proposals,
    }


def entries(
    memory: Memory,
    offset: int,
    limit: int,
    entry_type: str,
    status: str,
    source: str,
    scope: str = "",
) -> dict[str, Any]:
    """A page of documents, newest first, with their usage stats. `scope`: `global`, a
    project's name or identity (its documents only), or empty (every scope)."""
    scopes = set(search_scopes(scope, None, memory.kb_dir) or ()) - (
        {"global"} if scope not in ("global", "") else set()
    )
    with memory.session():  # no lock: one snapshot of the index
        docs = [
            info
            for info in memory.index.snapshot().docs()
            if (not entry_type or info.type == entry_type)
            and (not status or info.status == status)
            and (not source or info.source == source)
            and (not scope or info.scope in scopes)
        ]
    docs.sort(key=lambda d: (str(d.meta.get("created") or ""), d.id), reverse=True)
    rows = []
    for info in docs[offset : offset + limit]:
        s = memory.stats.get(info.id)
        rows.append(
            {
                "id": info.id,
                "title": info.title,
                "type": info.type,
                "status": info.status,
                "source": info.source,
                "kb": kb_of_source(info.source),
                "scope": info.scope,
                "created": str(info.meta.get("created") or ""),
                "recall_count": s.recall_count if s else 0,
                "importance": s.importance if s else None,
            }
        )
    return {"total": len(docs), "offset": offset, "entries": rows}


def entry_context(memory: Memory, entry_id: str) -> dict[str, Any]:
    """An entry's usage stats and its linked neighbours."""
    with memory.session():  # no lock: one snapshot of the index
        snap = memory.index.snapshot() if memory.index.exists() else None
        graph = memory.link_graph(snap) if snap is not None else {}
        neighbours = []
        for other, kind in graph.get(entry_id, []):
            info = snap.doc(other) if snap is not None else None
            if info is not None:
                neighbours.append({"id": other, "title": info.title, "kind": kind})
    s = memory.stats.get(entry_id)
    return {
        "id": entry_id,
        "stats": s.as_json() if s else None,
        "neighbours": neighbours,
    }
