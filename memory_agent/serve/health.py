"""`/health`'s reply: what the daemon is and how it runs, answered at once.

It touches neither the model nor the store, and makes nothing: a daemon whose model failed,
or whose index could not be opened, still answers (the fields say why).
"""

from __future__ import annotations

import os
import time
from typing import Any

from memory_agent import __version__
from memory_agent.config import endpoint_of

__all__ = ["health"]


def health(service: Any) -> dict[str, Any]:
    """The `serve.service.Service`'s health: version, process, model, generation, rebuild and
    how dense search runs (`Memory.dense_state`: graph, building, exact, server, closed)."""
    memory, model = service.memory, service.model
    return {
        "status": "ok",
        "version": __version__,
        "pid": os.getpid(),
        "uptime_s": round(time.time() - service.started, 1),
        "home": str(memory.home),
        "embedder": memory.cfg.embedder,
        "embedding_endpoint": endpoint_of(memory.cfg),
        "model": model.state,
        "model_loaded": model.loaded,
        "model_error": model.error,
        "model_fix": model.fix or None,
        "repair_error": service.repair_error,
        "generation": memory.current_generation(),
        "rebuilding": service.rebuilding(),
        "dense": memory.dense_state(),
        "query_graph": memory.query_graph(),  # `query_precision` as it runs (ADR 0027)
        "searches": service.reads.searches,  # answered by this process
        # the reader processes (ADR 0028): where each serves, or that it starts or exited
        "readers": service.readers.health() if service.readers is not None else [],
    }
