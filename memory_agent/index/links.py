"""The authored link graph of an index: which documents name which, both ways.

Derived from the index alone (each document's wikilinks and typed `links:`), so the index side
computes it and caches it per revision (`Memory.link_graph`); the ranking walks it
(`memory_agent.recall.edges.neighbours_of`).
"""

from __future__ import annotations

from typing import Any

from memory_agent.kb.entries import read_links

__all__ = ["link_graph"]


def link_graph(index: Any) -> dict[str, list[tuple[str, str]]]:
    """Authored links between documents, both directions: the body's [[wikilinks]] and the
    frontmatter's typed `links:` (references, derived_from, contained_in, contradicts). A link
    to a superseded entry leads on to its successor, as a `supersedes` edge."""
    successor: dict[str, str] = {}
    links: dict[str, list[tuple[str, str]]] = {}
    for info in index.docs():  # most documents link nowhere: one look each (issue 19)
        meta = info.meta
        if info.links or meta.get("links"):
            links[info.id] = read_links(meta.get("links"), info.links)  # bounded
        successors = meta.get("superseded_by")
        if successors:  # a fork (two machines superseded it) leads on to the first successor
            successor[info.id] = str(successors[0] if isinstance(successors, list) else successors)
    graph: dict[str, list[tuple[str, str]]] = {}
    for doc, targets in links.items():
        for target, kind in targets:
            seen = {target}
            while target in successor and successor[target] not in seen:
                target = successor[target]
                kind = kind if kind == "contradicts" else "supersedes"
                seen.add(target)
            if target != doc and index.doc(target) is not None:
                graph.setdefault(doc, []).append((target, kind))
                graph.setdefault(target, []).append((doc, kind))
    return graph
