"""A search in two stages, for a daemon serving many at once: the query's vectors are
embedded on the caller's thread (queries arriving together share one model run, which holds no
GIL), then the ranking - Python, under the GIL - runs on one of a few ranker threads. Ten
searches at once then queue for two rankers instead of ten threads taking turns at the GIL
between every step (experiments/concurrency round 5: ten clients' p95 14-28 % lower). Used by
`reads.run_search` and the recall hook (`injection.recall`); the daemon's pool is
`Service.rankers`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, TypeVar

from ragcore import Embedding

if TYPE_CHECKING:
    from memory_agent.index.memory import Memory

__all__ = ["in_two_stages"]

T = TypeVar("T")


def in_two_stages(
    memory: Memory,
    query: str,
    ranked: Callable[[Embedding | None], T],
    ranker: Executor | None,
    use_dense: bool = True,
) -> T:
    """`ranked(embedding)`, given the query's vectors (None: lexical only) and run on one of
    `ranker`'s threads. No `ranker`: `ranked(None)` here, and ragcore embeds the query."""
    if ranker is None:
        return ranked(None)
    embedding = memory.index.embedder.embed_query(query.strip()) if use_dense else None
    return ranker.submit(ranked, embedding).result()
