"""Errors the memory tools report. Each carries a `code` (stable, for clients) and a message
that says what to do next.

    MemoryAgentError
    ├── NotFound        no entry with that id
    ├── ReadOnly        the entry belongs to a read-only corpus
    ├── Conflict        the lifecycle forbids it (already superseded / archived)
    ├── Invalid         the entry would not be valid (names every field problem)
    └── NotReady        no home or no index yet (names `memory-agent init` / `rebuild`)
"""

from __future__ import annotations

__all__ = ["Conflict", "Invalid", "MemoryAgentError", "NotFound", "NotReady", "ReadOnly"]


class MemoryAgentError(Exception):
    code = "error"

    def as_json(self) -> dict[str, str]:
        return {"error": str(self), "code": self.code}


class NotFound(MemoryAgentError):
    code = "not_found"


class ReadOnly(MemoryAgentError):
    code = "read_only"


class Conflict(MemoryAgentError):
    code = "conflict"


class Invalid(MemoryAgentError):
    code = "invalid"


class NotReady(MemoryAgentError):
    code = "not_ready"
