"""`memory_search` and `memory_get` as a serving process answers them: the daemon's `Service`
and a reader process (`serve.reader`, ADR 0028) run this one code, so a search answers the
same in either.

A search folds the usage events the other processes logged since the last one (at most once a
second: `Usage.catch_up`), embeds its query on the caller's thread, ranks on one of the
`rankers` and logs its query and hits to this process's own events file. While the model
loads, it answers from the lexical channel at once and says so (`degraded`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memory_agent.index.memory import Memory
from memory_agent.recall import reads
from memory_agent.recall.reads import run_search
from memory_agent.serve.model import ModelLoader
from memory_agent.serve.usage import Usage
from ragcore import EndpointError

__all__ = ["RANKERS", "ReadCalls"]

# Threads that rank searches (`reads.run_search`'s second stage): one per core, at most four.
# Ten searches at once on 2 cores: 154-180 searches/s and p95 81-95 ms with two rankers,
# against 97-113/s and 130-150 ms with each search ranked on its own thread
# (experiments/concurrency round 5).
RANKERS = max(1, min(4, os.cpu_count() or 1))


class ReadCalls:
    """Search and get over `memory`, with its `model`, its `usage` log and a ranker pool.
    `project(where)`: the identity of the project a call comes from; `touch()`: a call came."""

    def __init__(
        self,
        memory: Memory,
        model: ModelLoader,
        usage: Usage,
        project: Callable[[str | None], str | None],
        touch: Callable[[], None] = lambda: None,
    ):
        self.memory = memory
        self.model = model
        self.usage = usage
        self.project = project
        self.touch = touch
        self.rankers = ThreadPoolExecutor(RANKERS, thread_name_prefix="memory-agent-rank")
        self.searches = 0  # answered by this process (`/health`)
        self.gets = 0

    def search(
        self, query: str, caller: str | None = None, where: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        self.touch()
        t = time.perf_counter()
        kwargs["project"] = self.project(where)
        self.usage.catch_up()  # what the other processes logged, before the ranking reads it
        why = self.model.lexical_only()  # None: the model is loaded (or was waited for)
        if why is None:
            try:  # no lock: it reads a snapshot; embedded here, ranked on a ranker thread
                found = run_search(self.memory, query, ranker=self.rankers, **kwargs)
            except EndpointError as exc:  # the server went away since it last answered
                self.model.lost(exc)
                why = self.model.unanswered()
        if why is not None:
            found = run_search(self.memory, query, use_dense=False, ranker=self.rankers, **kwargs)
            found.reply["degraded"] = why
        self.searches += 1
        return self.usage.record_search(query, found, t, caller)

    def get(self, entry_id: str, caller: str | None = None) -> dict[str, Any]:
        self.touch()
        reply = reads.get(self.memory, entry_id)  # reads the file; no lock
        self.usage.record_get(reply["id"], caller)  # a person's look is logged apart
        self.gets += 1
        return reply

    def shutdown(self) -> None:
        self.rankers.shutdown()
