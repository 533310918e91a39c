"""The edges a search expands from a hit (`recall.ranking.rerank`'s `neighbours`): the links
its author wrote, then the documents that name one of its rare entities. They depend on one
index state alone, so they are memoised per index revision, across searches.
"""

from __future__ import annotations

import math

from memory_agent.recall import policy
from memory_agent.recall.ranking import Edge
from ragcore import Index

__all__ = ["neighbours_of"]

# The edges of the documents searches have expanded, for the newest index state seen: they
# depend on that state alone (the links and the entities' counts), and a search expands ~20
# documents, many of them the same from one search to the next (about a fifth of a search's
# Python work at 1,000 entries when computed each time). (revision, {doc id: edges}); a new
# revision starts a new memo, so a write costs nothing here; bounded by MEMO_DOCS. The policy
# values the edges depend on are part of the key (experiments change them between searches).
_memo: tuple[tuple, dict[str, list[Edge]]] = ((-1,), {})
MEMO_DOCS = 20_000


def neighbours_of(index: Index, graph: dict[str, list[tuple[str, str]]]):
    """A document's edges for the expansion: its authored links (`graph`, the link graph of
    this same `index` state), then the documents that name one of its rare entities (at most
    policy.ENTITY_NEIGHBOURS, rarest first, with a factor in 0..1 for how rare). Memoised per
    index revision, across searches (`_memo`)."""
    global _memo
    n_docs = max(len(index), 3)
    key = (
        index.revision,
        policy.ENTITY_NEIGHBOURS,
        policy.ENTITY_MAX_DOCS,
        policy.EDGE_WEIGHTS.get("entity", 0.0) > 0.0,
    )
    cached = _memo
    if cached[0] != key:
        cached = (key, {})
        if key[0] >= _memo[0][0]:  # revisions only grow: an older snapshot's search keeps its own
            _memo = cached  # one assignment; concurrent searches at worst compute twice
    memo = cached[1]

    def neighbours(doc_id: str) -> list[Edge]:
        found = memo.get(doc_id)
        if found is not None:
            return found
        out: list[Edge] = [(other, kind, 1.0, "") for other, kind in graph.get(doc_id, [])]
        info = index.doc(doc_id)
        if info is not None and policy.EDGE_WEIGHTS.get("entity", 0.0) > 0.0:
            rare = sorted(
                (df, entity)
                for entity in info.entities
                if 2 <= (df := index.entity_count(entity)) <= policy.ENTITY_MAX_DOCS
            )
            seen: set[str] = set()
            for df, entity in rare:
                factor = math.log(n_docs / df) / math.log(n_docs)
                for other in sorted(index.entity_docs(entity)):
                    if other != doc_id and other not in seen:
                        seen.add(other)
                        out.append((other, "entity", factor, entity))
                        if len(seen) >= policy.ENTITY_NEIGHBOURS:
                            break
                if len(seen) >= policy.ENTITY_NEIGHBOURS:
                    break
        if len(memo) < MEMO_DOCS:
            memo[doc_id] = out
        return out

    return neighbours
