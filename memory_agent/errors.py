"""Every error memory-agent reports: one tree, each with a stable `code`, a message that says
what went wrong, and a `fix` that says what to do next. One mapper (`describe`) turns any
exception into that shape for the MCP tools, the daemon's admin routes and the CLI alike.

    MemoryAgentError                   code
    ├── NotFound                       not_found     no entry with that id
    ├── ReadOnly                       read_only     the entry belongs to a read-only corpus
    ├── Conflict                       conflict      the lifecycle or the working tree forbids it
    │   ├── RepoBusy                   conflict      git is mid-rebase/merge, on a detached HEAD
    │   │                                             or another branch: for now (retry later)
    │   └── LockBusy                   conflict      another process held a lock of the home
    │                                                 past the wait: names it (memory_agent.files)
    ├── Invalid                        invalid       bad input: names the field and the bound
    ├── NotReady                       not_ready     no home yet, or the model is not loaded
    ├── ModelMissing                   model         the model's weights are not on this machine
    │                                                 and could not be fetched (or were refused)
    ├── ConfigError                    config        config.toml or repos.json is malformed
    │   └── CorpusError
    ├── GitError                       git           a git command failed (see WriteFailed)
    ├── WriteFailed                    write_failed  a write failed for an outside reason;
    │                                                 `outcome` says "rolled back" or "finished"
    ├── DaemonError                    daemon        the daemon could not be reached or started
    │   └── AlreadyRunning
    ├── ToolCallError                  (the code the daemon sent) an error reply, client side
    └── Internal                       internal      a bug: the message names the log

ragcore's own errors (`ragcore.RagcoreError`: `index`, `model`, `document`) carry a code and a
fix too; `describe` reads them the same way. Anything else is a bug and is reported as
`internal` - never as bad input.

This module is standard library only: the proxy and the CLI import it.
"""

from __future__ import annotations

import re
import sys
from typing import Any, NamedTuple

__all__ = [
    "AlreadyRunning",
    "ConfigError",
    "Conflict",
    "CorpusError",
    "DaemonError",
    "ErrorInfo",
    "GitError",
    "Internal",
    "Invalid",
    "LockBusy",
    "MemoryAgentError",
    "ModelMissing",
    "NotFound",
    "NotReady",
    "ReadOnly",
    "RepoBusy",
    "ToolCallError",
    "WriteFailed",
    "describe",
    "for_cli",
    "http_status",
]


class MemoryAgentError(Exception):
    """Base of every error memory-agent raises on purpose."""

    code = "error"
    default_fix = ""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix if fix is not None else self.default_fix

    def as_json(self) -> dict[str, str]:
        return describe(self).as_json()


class NotFound(MemoryAgentError):
    code = "not_found"
    default_fix = "find ids with memory_search"


class ReadOnly(MemoryAgentError):
    code = "read_only"
    default_fix = "edit corpus files in their own repository; add a KB entry with memory_add"


class Conflict(MemoryAgentError):
    code = "conflict"


class RepoBusy(Conflict):
    """The knowledge base's git is in a state its user ends (a rebase, merge, cherry-pick,
    revert or bisect in progress, a detached HEAD, another branch checked out): no write now,
    the same write works once it is over. Same code as `Conflict` (the wire contract); a
    caller that retries later (the gate) tells the two apart."""


class LockBusy(Conflict):
    """Another process held a file lock (`memory_agent.files.FileLock`) for longer than the
    wait allowed: the message names it (its pid, when known), the fix says what to do."""


class Invalid(MemoryAgentError):
    code = "invalid"


class NotReady(MemoryAgentError):
    code = "not_ready"


class ModelMissing(MemoryAgentError):
    """The embedding model's weights are not on this machine and could not be fetched (the hub
    unreachable, `HF_HUB_OFFLINE`, a download that kept breaking off), or a fetched file was
    refused for its content. The message says which; the fix names the one command that brings
    them from elsewhere (`memory_agent.serve.model.weights_fix`)."""

    code = "model"


class ConfigError(MemoryAgentError):
    code = "config"


class CorpusError(ConfigError):
    """repos.json is malformed; the message names the entry."""

    default_fix = "fix repos.json (see repos.example.json)"


class GitError(MemoryAgentError):
    code = "git"


class WriteFailed(MemoryAgentError):
    """A write could not be completed for a reason outside the request (a read-only folder, a
    stale `.git/index.lock`, a full disk). `outcome` is "rolled back" (nothing changed) or
    "finished" (written and committed; only a later step, such as the index refresh, failed)."""

    code = "write_failed"

    def __init__(self, message: str, fix: str | None = None, *, outcome: str = "rolled back"):
        super().__init__(message, fix)
        self.outcome = outcome


class DaemonError(MemoryAgentError):
    code = "daemon"
    default_fix = "see <home>/run/daemon.log; `memory-agent stop` and retry"


class AlreadyRunning(DaemonError):
    default_fix = "stop it with `memory-agent stop`"


class ToolCallError(MemoryAgentError):
    """An error reply from the daemon, on the client side: keeps the code it was sent."""

    def __init__(self, code: str, message: str, fix: str = ""):
        super().__init__(message, fix)
        self.code = code


class Internal(MemoryAgentError):
    code = "internal"


class ErrorInfo(NamedTuple):
    """The wire shape of an error: `{"code", "message", "fix"}`."""

    code: str
    message: str
    fix: str = ""

    def as_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "fix": self.fix}

    @property
    def text(self) -> str:
        """One text for a person or a model: starts with the code; the fix on its own line."""
        return f"{self.code}: {self.message}" + (f"\nfix: {self.fix}" if self.fix else "")


RAGCORE_FIXES = {
    "index": "run `memory-agent rebuild`",
    "model": "`memory-agent init --embedder minilm` switches to the offline model; `model_path` "
    "in config.toml (MEMORY_AGENT_MODEL_PATH) points at local weights",
    # by class, before the code: MiniLM's own weights missing - switching to MiniLM is no fix
    "WeightsUnavailable": "bring the files from a machine that reaches the hub and run "
    "`memory-agent model import PATH`",
    "ServerUnavailable": "this home's dense vectors live on the Qdrant server (qdrant_url): "
    "bring it back, or unset qdrant_url and run `memory-agent rebuild` to keep them here",
    "WeightsCorrupt": "the next try downloads the file again; or take the files from a trusted "
    "copy with `memory-agent model import PATH`",
}


_ENDPOINT_SETTINGS = (
    "the endpoint is the embedding_url and embedding_model settings (config.toml, or "
    "MEMORY_AGENT_EMBEDDING_URL and MEMORY_AGENT_EMBEDDING_MODEL); `memory-agent init "
    "--embedder minilm` switches to the offline model"
)
ENDPOINT_FIXES = {
    "auth": "memory-agent reads the key from MEMORY_AGENT_EMBEDDING_API_KEY only (in the "
    "environment of whatever starts the daemon: the agent, or your shell)",
    "dimension": "the index keeps answering from its lexical channel meanwhile",
    **{k: _ENDPOINT_SETTINGS for k in ("unreachable", "not_found", "refused", "reply")},
}


def describe(exc: BaseException, *, log_hint: str = "the daemon log") -> ErrorInfo:
    """The code, message and fix of any exception. Errors raised on purpose (ours, ragcore's)
    keep theirs; anything else is a bug, reported as `internal` without its details."""
    if isinstance(exc, MemoryAgentError):
        return ErrorInfo(exc.code, exc.message, exc.fix or "")
    ragcore_errors = sys.modules.get("ragcore.errors")  # never imported just to catch
    if ragcore_errors is not None and isinstance(exc, ragcore_errors.RagcoreError):
        # the core's fixes are neutral (legal_web uses it too): say it in this product's words
        kind = getattr(exc, "kind", None)  # an embedding endpoint's (ragcore.EndpointError)
        if kind is not None:
            return ErrorInfo(exc.code, exc.message, f"{exc.fix}; {ENDPOINT_FIXES.get(kind, '')}")
        product = RAGCORE_FIXES.get(type(exc).__name__) or RAGCORE_FIXES.get(exc.code)
        return ErrorInfo(exc.code, exc.message, f"{product} ({exc.fix})" if product else exc.fix)
    return ErrorInfo(
        "internal",
        f"unexpected {type(exc).__name__}; this is a bug in memory-agent",
        f"see {log_hint} for the traceback, and report it",
    )


# The HTTP status of each code on the daemon's admin routes (anything else: 500). Unformatted
# (fmt: skip): a table of eight pairs reads better in two lines than in ten.
HTTP_STATUS = {"invalid": 400, "not_found": 404, "read_only": 403, "conflict": 409,
               "not_ready": 503, "model": 503, "index": 503, "document": 422}  # fmt: skip


def http_status(code: str) -> int:
    """The HTTP status that answers an error with this code: 4xx for the caller's mistakes,
    503 for "not yet", 500 for the rest (a bug, git, a failed write)."""
    return HTTP_STATUS.get(code, 500)


# The CLI speaks of commands, not MCP tools.
_CLI_NAMES = {
    "memory_search": "`memory-agent search`",
    "memory_get": "`memory-agent get`",
    "memory_add": "`memory-agent add`",
    "memory_supersede": "`memory-agent supersede`",
    "memory_archive": "`memory-agent archive`",
    "memory_resolve_fork": "`memory-agent resolve`",
    "memory_index_status": "`memory-agent status`",
    "memory_history": "`memory-agent history`",
    "memory_set_importance": "`memory-agent importance`",
    "confirm=true": "--confirm",
    "force=true": "--force",
    "request_id": "--request-id",
}
_CLI_RE = re.compile(r"`?\b(" + "|".join(re.escape(k) for k in _CLI_NAMES) + r")\b`?")


def for_cli(text: str) -> str:
    """`text` with MCP tool names and arguments replaced by the CLI's commands and flags."""
    return _CLI_RE.sub(lambda m: _CLI_NAMES[m.group(1)], text)


def from_wire(data: Any) -> ErrorInfo | None:
    """An `ErrorInfo` from a structured error (`{"error": {"code", "message", "fix"}}`)."""
    if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
        return None
    err = data["error"]
    if not isinstance(err.get("code"), str):
        return None
    return ErrorInfo(err["code"], str(err.get("message", "")), str(err.get("fix", "") or ""))
