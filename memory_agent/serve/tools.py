"""The MCP tools: names, parameters and descriptions are the contract the agent reads.

Every parameter is described and bounded in the input schema (the shared ones once, in
`serve.tool_params`); every reply has an output schema (`serve.schemas`); annotations tell
clients which tools only read (so they can be auto-approved) and which change the memory.
Each tool is one call of the `Service`.

Errors: a tool never returns an error message as a result; `serve.mcp_server.MemoryServer`
turns whatever goes wrong into one `is_error` reply with a code and a fix (ADR 0007).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from memory_agent import __version__, limits
from memory_agent.serve import schemas
from memory_agent.serve.mcp_server import MemoryServer, caller_of, where_of
from memory_agent.serve.service import Service
from memory_agent.serve.tool_params import (
    ADDS,
    READ,
    RETIRES,
    SETS,
    BodyArg,
    ConfirmArg,
    EntryType,
    ForceArg,
    IdArg,
    LinksArg,
    RequestIdArg,
    ScopeArg,
    TagsArg,
    TitleArg,
)

__all__ = ["INSTRUCTIONS", "TOOL_NAMES", "build_server", "tool_list"]

INSTRUCTIONS = """Long-term memory for this user's projects: decisions, pitfalls, conventions and
facts learned in earlier sessions, plus read-only Markdown docs from their repositories.
Search it before re-deriving a conclusion or asking the user something they may have told an
earlier session. Add what a future session would need and cannot get from the code or the git
log. Never duplicate: search first; change an entry with memory_supersede, retire it with
memory_archive (both preview first). Errors start with a code and end with the fix."""

TOOL_NAMES = (
    "memory_search",
    "memory_get",
    "memory_add",
    "memory_supersede",
    "memory_archive",
    "memory_resolve_fork",
    "memory_set_importance",
    "memory_history",
    "memory_index_status",
    "memory_proposals",
    "memory_accept",
    "memory_reject",
)


def build_server(service: Service) -> MCPServer:
    server = MemoryServer(
        "memory-agent", version=__version__, instructions=INSTRUCTIONS, tool_names=TOOL_NAMES
    )

    def tool(title: str, annotations: ToolAnnotations):
        """Register a tool with its docstring dedented: the model reads it as the description."""

        def register(fn):
            return server.tool(
                title=title,
                description=inspect.cleandoc(fn.__doc__ or ""),
                annotations=annotations,
            )(fn)

        return register

    @tool("Search the memory", READ)
    def memory_search(
        query: Annotated[
            str,
            Field(
                description="What you are looking for, in plain words (English or Chinese), "
                "e.g. 'how do we run migrations'.",
                min_length=1,
                max_length=limits.MAX_QUERY,
            ),
        ],
        limit: Annotated[
            int,
            Field(description="How many hits to return.", ge=1, le=limits.MAX_LIMIT, strict=True),
        ] = 8,
        types: Annotated[
            list[EntryType] | None,
            Field(description="Only entries of these types (default: every type)."),
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Only entries with any of these tags.", max_length=limits.MAX_TAGS),
        ] = None,
        include_readonly: Annotated[
            bool,
            Field(description="Include read-only project docs (writable: false).", strict=True),
        ] = True,
        include_archived: Annotated[
            bool,
            Field(
                description="Include archived entries (retired, kept for the record).", strict=True
            ),
        ] = False,
        include_episodes: Annotated[
            bool,
            Field(
                description="Include episodes: turns of earlier agent sessions captured by the "
                "hooks (what was asked, which tools ran, what failed, the answer).",
                strict=True,
            ),
        ] = False,
        explain: Annotated[
            bool,
            Field(
                description="Add `why` to each hit: every channel and ranking signal.", strict=True
            ),
        ] = False,
        as_of: Annotated[
            str | None,
            Field(
                description="YYYY-MM-DD: answer from the memory as it stood at the end of that "
                "day (entries created by then and not yet superseded or archived).",
                pattern=r"^\d{4}-\d{2}-\d{2}$",
                json_schema_extra={"format": "date"},
            ),
        ] = None,
        scope: Annotated[
            str | None,
            Field(
                description="Where to look: `project` (default: this session's project - its "
                "repository - and global), `global` (only what holds everywhere), `all` (every "
                "project too), or a project's name or identity (that project and global).",
                min_length=1,
                max_length=limits.MAX_ID,
            ),
        ] = None,
        kb: Annotated[
            str | None,
            Field(
                description="Only this knowledge base: personal, or one this home added, such "
                "as team (default: every KB, plus project docs and episodes as asked). Each "
                "hit's `kb` names its KB.",
                max_length=32,
            ),
        ] = None,
        min_score: Annotated[
            float | None,
            Field(
                description="Leave out hits whose `similarity` (absolute, unlike `score`) is "
                "below this, e.g. 0.3: an empty answer then means the memory has nothing on it.",
                ge=-1,
                le=1,
            ),
        ] = None,
        ctx: Context | None = None,
    ) -> schemas.SearchReply:
        """Search the memory (knowledge base + read-only project docs) by meaning and keywords.

        Use it first, before working out something that may already be known: a past decision,
        a pitfall, a convention, where something lives. Superseded entries are never returned:
        their successors are. Next: memory_get(id) for the full text of a promising hit.
        `degraded` in the reply means the model is still loading (or its embedding server is
        not answering: the text says which) and only keyword matching was used; search again
        in a few seconds for the full result. Each hit's `scope` says
        whether it holds everywhere (global) or in one project; another project's entries
        appear only with `scope: all` or its name (`elsewhere` names the projects that have
        something when this one has nothing). `score` ranks the hits of one search; the
        absolute `similarity` says whether the best of them is about the query at all.
        """
        return service.search(
            query,
            caller=caller_of(ctx),
            where=where_of(ctx),
            scope=scope,
            limit=limit,
            types=types,
            tags=tags,
            include_readonly=include_readonly,
            include_archived=include_archived,
            include_episodes=include_episodes,
            explain=explain,
            as_of=as_of,
            kb=kb,
            min_score=min_score,
        )

    @tool("Read one entry", READ)
    def memory_get(id: IdArg, ctx: Context | None = None) -> schemas.EntryReply:
        """Read one entry in full, by the id a search returned.

        If `status` is superseded, read `superseded_by` instead: that entry replaced this one
        (a list of two: a fork two machines made; memory_resolve_fork resolves it).
        """
        return service.get(id, caller_of(ctx))

    @tool(
        "Remember something new",
        ADDS,
    )
    def memory_add(
        title: TitleArg,
        body: BodyArg,
        type: Annotated[EntryType, Field(description="What kind of knowledge this is.")] = "note",
        tags: TagsArg = None,
        request_id: RequestIdArg = None,
        force: ForceArg = False,
        links: LinksArg = None,
        scope: ScopeArg = None,
        kb: Annotated[
            str | None,
            Field(
                description="Which knowledge base to write to: personal (default) or one this "
                "home added, such as team (`memory-agent kb list` names them). Ids of another "
                "KB than personal read <kb>:<id>.",
                max_length=32,
            ),
        ] = None,
        ctx: Context | None = None,
    ) -> schemas.AddReply:
        """Remember something new that a future session will need.

        Worth adding: decisions and why, pitfalls (symptom, cause, fix), conventions, user
        preferences, facts that are hard to rediscover. Not worth adding: what the code or the
        git log already says, or anything temporary. One idea per entry. Search first: if an
        entry already says it, supersede that entry instead.

        `status: created` means the file is written, committed to git and indexed.
        `status: duplicate` means an active entry already says this and nothing was written:
        read it with memory_get and supersede it if yours is better.
        """
        return service.add(
            title=title,
            body=body,
            type=type,
            tags=tags or [],
            request_id=request_id,
            force=force,
            links=links,
            scope=scope,
            kb=kb,
            where=where_of(ctx),
        )

    @tool(
        "Replace an outdated entry",
        RETIRES,
    )
    def memory_supersede(
        old_id: IdArg,
        title: TitleArg,
        body: BodyArg,
        type: Annotated[
            EntryType | None, Field(description="Default: the old entry's type.")
        ] = None,
        tags: Annotated[
            list[Annotated[str, Field(max_length=limits.MAX_TAG)]] | None,
            Field(description="Default: the old entry's tags.", max_length=limits.MAX_TAGS),
        ] = None,
        confirm: ConfirmArg = False,
        request_id: RequestIdArg = None,
        force: ForceArg = False,
        links: Annotated[LinksArg, Field(description="Default: the old entry's links.")] = None,
        scope: Annotated[
            ScopeArg,
            Field(
                description="Default: the old entry's scope. `project` moves the successor into "
                "this session's project, `global` makes it hold everywhere."
            ),
        ] = None,
        ctx: Context | None = None,
    ) -> schemas.SupersedeReply:
        """Replace an entry that is outdated or wrong with a new one; the old one is kept,
        marked superseded, and leaves search.

        First call without `confirm`: `status: preview` shows both files exactly as they would
        be written, and nothing is written. Show the preview to the user if the change
        matters; then call again with the same arguments and `confirm: true` to write both
        files in one git commit. The preview runs the confirm's duplicate check: `status:
        duplicate` (at either call) means another active entry already says this and nothing
        was written. Read-only project docs cannot be superseded.
        """
        return service.supersede(
            old_id=old_id,
            title=title,
            body=body,
            type=type,
            tags=tags,
            confirm=confirm,
            request_id=request_id,
            force=force,
            links=links,
            scope=scope,
            where=where_of(ctx),
        )

    @tool(
        "Retire an entry",
        RETIRES,
    )
    def memory_archive(
        id: IdArg,
        reason: Annotated[
            str,
            Field(
                description="Why it is retired, e.g. 'the staging cluster was shut down'.",
                min_length=1,
                max_length=limits.MAX_REASON,
            ),
        ],
        confirm: ConfirmArg = False,
        request_id: RequestIdArg = None,
    ) -> schemas.ArchiveReply:
        """Retire an entry that is no longer true and has no replacement (use memory_supersede
        when there is one). The file stays, marked archived with your reason; it leaves default
        search (include_archived brings it back).

        First call without `confirm`: `status: preview`, nothing written. Then with
        `confirm: true`: `status: archived`.
        """
        return service.archive(entry_id=id, reason=reason, confirm=confirm, request_id=request_id)

    @tool("Resolve a fork", RETIRES)
    def memory_resolve_fork(
        id: Annotated[
            str,
            Field(
                description="The entry two machines superseded: its superseded_by lists two "
                "successors (memory_get shows it; `memory-agent remote` lists every fork).",
                min_length=1,
                max_length=limits.MAX_ID,
            ),
        ],
        keep: Annotated[
            str | None,
            Field(
                description="The successor to keep; the other is archived, its reason naming "
                "the fork. Leave it out to merge (title and body).",
                max_length=limits.MAX_ID,
            ),
        ] = None,
        title: Annotated[
            str | None,
            Field(
                description="Merge: the new entry's title (one line).",
                max_length=limits.MAX_TITLE,
            ),
        ] = None,
        body: Annotated[
            str | None,
            Field(
                description="Merge: the new entry's text, written from both successors; it "
                "supersedes both.",
                max_length=limits.MAX_BODY,
            ),
        ] = None,
        reason: Annotated[
            str | None,
            Field(
                description="Keep: why (added to the archived successor's reason).",
                max_length=limits.MAX_REASON,
            ),
        ] = None,
        confirm: ConfirmArg = False,
        request_id: RequestIdArg = None,
    ) -> schemas.ResolveReply:
        """Resolve a fork: an entry that two machines superseded, so a sync left it with two
        successors. Keep one (`keep`: the other is archived, nothing deleted) or merge both
        into a new entry (`title` and `body`: it supersedes both); the old entry then names one
        successor again.

        First call without `confirm`: `status: preview` shows every file as it would be
        written, and nothing is written. Then the same arguments with `confirm: true`:
        `status: resolved`, one git commit, synced like any write.
        """
        return service.resolve_fork(
            entry_id=id,
            keep=keep,
            title=title,
            body=body,
            reason=reason,
            confirm=confirm,
            request_id=request_id,
        )

    @tool(
        "Say how much an entry matters",
        SETS,
    )
    def memory_set_importance(
        id: IdArg,
        importance: Annotated[
            int,
            Field(description="1 (minor) to 10 (must not be missed).", ge=1, le=10, strict=True),
        ],
        note: Annotated[
            str | None, Field(description="Why it matters.", max_length=limits.MAX_NOTE)
        ] = None,
    ) -> schemas.ImportanceReply:
        """Say how much an entry matters, from 1 (minor) to 10 (must not be missed): a strong
        user preference, a recurring concern, an incident that must never repeat. Important
        entries rank higher in every later search, across sessions. The only effect is an event
        in the usage log; the entry's file is not touched. The last value set wins.
        """
        return service.set_importance(id, importance, note)

    @tool("How an entry changed over time", READ)
    def memory_history(id: IdArg) -> schemas.HistoryReply:
        """The supersede chain through an entry, oldest first: how a decision or a fact changed
        over time, with dates and reasons. Use it when an entry says it replaced another, or
        to explain why the current answer differs from an older one.
        """
        return service.history(id)

    @tool("Lessons waiting for a decision", READ)
    def memory_proposals() -> schemas.ProposalsReply:
        """Lessons the ingest gate found in recurring, verified outcomes of earlier sessions
        (a command failed, a change was made, the same command then succeeded - in several
        episodes of several sessions), waiting to be accepted into the knowledge base (when
        the gate is set to propose). Read each one; accept what is right, reject the rest.
        """
        return service.proposals()

    @tool(
        "Accept a proposed lesson",
        SETS,
    )
    def memory_accept(
        id: Annotated[str, Field(description="A proposal id from memory_proposals.")],
    ) -> schemas.AddReply:
        """Write a proposed lesson into the knowledge base (through the same checks as
        memory_add; `source: auto`, with the episodes it came from)."""
        return service.accept(id)

    @tool(
        "Reject a proposed lesson",
        ADDS,
    )
    def memory_reject(
        id: Annotated[str, Field(description="A proposal id from memory_proposals.")],
        reason: Annotated[
            str,
            Field(
                description="Why it is wrong or not worth keeping.",
                min_length=1,
                max_length=limits.MAX_REASON,
            ),
        ],
    ) -> schemas.RejectReply:
        """Drop a proposed lesson for good: the same lesson is never proposed again."""
        return service.reject(id, reason)

    @tool("Health of the memory", READ)
    def memory_index_status() -> schemas.StatusReply:
        """Health of the memory: is the index consistent with the files, and what it holds.

        `consistent: false` or a source with `available: false` (a project folder that moved)
        is worth telling the user; `memory-agent rebuild` repairs an inconsistent index.
        """
        return service.status()

    return server


def tool_list() -> list[dict[str, Any]]:
    """`tools/list` as the daemon answers it (what `tools.json`, the proxy's snapshot, holds)."""
    import asyncio

    server = build_server(None)  # type: ignore[arg-type] - tools only touch it when called
    tools = asyncio.run(server.list_tools())
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


if __name__ == "__main__":  # python -m memory_agent.serve.tools > memory_agent/tools.json
    import json
    import sys

    json.dump(tool_list(), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
