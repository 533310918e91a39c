"""The MCP tools: names, parameters and docstrings are the contract the agent reads.

Each tool returns one JSON object as structured content. Anticipated failures (unknown id,
read-only entry, lifecycle conflict, invalid entry, index not ready) are `ToolError`s: the call
returns `is_error=True` with a message that says what to do next.
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memory_agent import __version__
from memory_agent.client import CALLER_HEADER
from memory_agent.errors import MemoryAgentError
from memory_agent.service import Service
from ragcore import RagcoreError

__all__ = ["TOOL_NAMES", "build_server"]

INSTRUCTIONS = """Long-term memory for this user's projects: decisions, pitfalls, conventions and
facts learned in earlier sessions, plus read-only Markdown docs from their repositories.
Search it before re-deriving a conclusion or asking the user something they may have told an
earlier session. Add what a future session would need and cannot get from the code or the git
log. Never duplicate: search first; change an entry with memory_supersede, retire it with
memory_archive (both preview first)."""

TOOL_NAMES = ("memory_search", "memory_get", "memory_add", "memory_supersede", "memory_archive",
              "memory_set_importance", "memory_history", "memory_index_status")  # fmt: skip


def _call(fn, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        return fn(*args, **kwargs)
    except MemoryAgentError as exc:
        raise ToolError(f"{exc.code}: {exc}") from exc
    except RagcoreError as exc:
        raise ToolError(f"index: {exc}") from exc
    except ValueError as exc:
        raise ToolError(f"invalid: {exc}") from exc


def _caller(ctx: Context | None) -> str | None:
    """The calling client, as the proxy or the CLI names it in a request header."""
    try:
        request = ctx.request_context.request if ctx is not None else None
    except ValueError:  # no request (an in-process call)
        return None
    headers = getattr(request, "headers", None)
    return headers.get(CALLER_HEADER) if headers is not None else None


def build_server(service: Service) -> MCPServer:
    server = MCPServer("memory-agent", version=__version__, instructions=INSTRUCTIONS)

    def tool(fn):
        """Register `fn` with its docstring dedented: the model reads it as the description."""
        return server.tool(description=inspect.cleandoc(fn.__doc__ or ""))(fn)

    @tool
    def memory_search(
        query: str,
        limit: int = 8,
        types: list[str] | None = None,
        tags: list[str] | None = None,
        include_readonly: bool = True,
        include_archived: bool = False,
        explain: bool = False,
        as_of: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Search the memory (knowledge base + read-only project docs) by meaning and keywords.

        Use it first, before working out something that may already be known: a past decision,
        a pitfall, a convention, where something lives. Ask in plain words ("how do we run
        migrations"); English and Chinese both work. Filters: `types` (principle, correction,
        decision, guideline, pitfall, process, model, fact, preference, note), `tags`,
        `include_readonly` (project docs), `include_archived`. Superseded entries are never
        returned: their successors are.

        Returns {hits: [{id, title, type, status, score, snippet, source, writable, why?}],
        generation}. `writable: false` marks a read-only project doc. Next: memory_get(id) for
        the full text of a promising hit. `degraded` in the reply means the model is still
        loading and only keyword matching was used; search again in a few seconds for the full
        result. `explain: true` adds, per hit, its rank and score in each channel and every
        ranking signal (reinforcement from past recalls, importance, recency, dormancy, links)
        under `why`. `as_of: "YYYY-MM-DD"` answers from the memory as it stood on that day
        (entries created by then and not yet superseded or archived): "what did we believe
        then?".
        """
        return _call(
            service.search,
            query,
            caller=_caller(ctx),
            limit=limit,
            types=types,
            tags=tags,
            include_readonly=include_readonly,
            include_archived=include_archived,
            explain=explain,
            as_of=as_of,
        )

    @tool
    def memory_get(id: str) -> dict[str, Any]:
        """Read one entry in full, by the id a search returned.

        Returns {id, title, type, status, tags, body, path, writable, supersedes,
        superseded_by, created}. If `status` is superseded, read `superseded_by` instead: that
        entry replaced this one.
        """
        return _call(service.get, id)

    @tool
    def memory_add(
        title: str,
        body: str,
        type: str = "note",
        tags: list[str] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Remember something new that a future session will need.

        Worth adding: decisions and why, pitfalls (symptom, cause, fix), conventions, user
        preferences, facts that are hard to rediscover. Not worth adding: what the code or the
        git log already says, or anything temporary. One idea per entry; a one-line title; a
        self-contained body. `type`: principle, correction, decision, guideline, pitfall,
        process, model, fact, preference or note. Search first: if an entry already says it,
        supersede that entry instead.

        Returns {status: created, id, path, commit, generation} once the file is written,
        committed to git and indexed; or {status: duplicate, duplicate_of, score} when an
        existing active entry already says this (nothing is written: read it with memory_get,
        and supersede it if yours is better). Pass a `request_id` (any unique string) and
        retry with the same one after a timeout: you get the first reply, never a second copy.
        """
        return _call(
            service.add, title=title, body=body, type=type, tags=tags or [], request_id=request_id
        )

    @tool
    def memory_supersede(
        old_id: str,
        title: str,
        body: str,
        type: str | None = None,
        tags: list[str] | None = None,
        confirm: bool = False,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Replace an entry that is outdated or wrong with a new one; the old one is kept,
        marked superseded, and leaves search.

        First call without `confirm`: you get {status: preview, id, old_id, preview} showing
        both files exactly as they would be written, and nothing is written. Show the preview
        to the user if the change matters; then call again with the same arguments and
        `confirm: true` to write both files in one git commit: {status: superseded, id, old_id,
        commit, generation}. `type` and `tags` default to the old entry's. Read-only project
        docs cannot be superseded.
        """
        return _call(
            service.supersede,
            old_id=old_id,
            title=title,
            body=body,
            type=type,
            tags=tags,
            confirm=confirm,
            request_id=request_id,
        )

    @tool
    def memory_archive(id: str, reason: str, confirm: bool = False) -> dict[str, Any]:
        """Retire an entry that is no longer true and has no replacement (use memory_supersede
        when there is one). The file stays, marked archived with your reason; it leaves default
        search (include_archived brings it back).

        First call without `confirm`: {status: preview, id, preview}, nothing written. Then with
        `confirm: true`: {status: archived, id, commit, generation}.
        """
        return _call(service.archive, entry_id=id, reason=reason, confirm=confirm)

    @tool
    def memory_set_importance(id: str, importance: int, note: str | None = None) -> dict[str, Any]:
        """Say how much an entry matters, from 1 (minor) to 10 (must not be missed): a strong
        user preference, a recurring concern, an incident that must never repeat. Important
        entries rank higher in every later search, across sessions. The only effect is an event
        in the usage log; the entry's file is not touched. The last value set wins.

        Returns {id, importance, note}.
        """
        return _call(service.set_importance, id, importance, note)

    @tool
    def memory_history(id: str) -> dict[str, Any]:
        """The supersede chain through an entry, oldest first: how a decision or a fact changed
        over time, with dates and reasons. Use it when an entry says it replaced another, or
        to explain why the current answer differs from an older one.

        Returns {id, chain: [{id, title, type, status, created, superseded_by?, superseded_at?,
        archived_at?, reason?}]}.
        """
        return _call(service.history, id)

    @tool
    def memory_index_status() -> dict[str, Any]:
        """Health of the memory: is the index consistent with the files, and what it holds.

        Returns {generation, consistent, entries, points, manifest_points, embedder, sources:
        [{label, entries, writable, available}], pending, last_refresh}. `consistent: false` or
        a source with `available: false` (a project folder that moved) is worth telling the
        user; `memory-agent rebuild` repairs an inconsistent index.
        """
        return _call(service.status)

    return server
