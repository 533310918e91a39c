"""The shapes of the tools' replies, as typed dicts: the MCP server publishes them as output
schemas (every key described) and checks each reply against them before it is sent.

An error reply has one shape for every tool, `{"error": {"code", "message", "fix"}}`; the
published output schema of each tool is "its reply, or an error" (`with_error`), so a client
that checks structured content against the schema accepts both.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

__all__ = [
    "ERROR_CODES",
    "AddReply",
    "ArchiveReply",
    "EntryReply",
    "HistoryReply",
    "ImportanceReply",
    "ProposalsReply",
    "RejectReply",
    "ResolveReply",
    "SearchReply",
    "StatusReply",
    "SupersedeReply",
    "error_schema",
    "with_error",
]

ERROR_CODES = (
    "not_found",
    "read_only",
    "conflict",
    "invalid",
    "not_ready",
    "config",
    "git",
    "write_failed",
    "daemon",
    "index",
    "model",
    "document",
    "internal",
)

_OPEN = ConfigDict(extra="allow")

Id = Annotated[
    str,
    Field(
        description="The entry's id: a slug for personal KB entries, "
        "<kb>:<slug> for another KB's (team:use-uv), <label>/<path> for "
        "read-only project docs."
    ),
]
Commit = Annotated[str, Field(description="The git commit that holds the write.")]
Generation = Annotated[str | None, Field(description="The index generation that serves the write.")]
Preview = Annotated[
    dict[str, str],
    Field(description="Every file exactly as it would be written: {path: full text}."),
]


@with_config(_OPEN)
class Hit(TypedDict):
    id: Id
    title: str
    type: Annotated[
        str,
        Field(
            description="principle, correction, decision, guideline, "
            "pitfall, process, model, fact, preference or note"
        ),
    ]
    status: Annotated[str, Field(description="active or archived (superseded never shows)")]
    score: Annotated[
        float,
        Field(
            description="Relevance plus the ranking signals; relative: the best hit of any "
            "search scores about 1, whether it answers it or not."
        ),
    ]
    similarity: NotRequired[
        Annotated[
            float | None,
            Field(
                description="Absolute: the cosine of the query and the hit's closest passage "
                "(MiniLM: unrelated text near 0, a close paraphrase above 0.5); null while the "
                "model loads."
            ),
        ]
    ]
    snippet: Annotated[str, Field(description="The best matching passage, shortened.")]
    source: Annotated[
        str | None,
        Field(description="kb (personal), kb:<name> (another KB), or a project docs label"),
    ]
    kb: NotRequired[
        Annotated[
            str | None,
            Field(
                description="The KB the hit belongs to (personal, team); null for project "
                "docs and episodes."
            ),
        ]
    ]
    writable: Annotated[
        bool, Field(description="False for read-only project docs and KBs added read-only.")
    ]
    scope: Annotated[
        str, Field(description="global, or the project it belongs to (a name or an identity)")
    ]
    why: NotRequired[
        Annotated[dict[str, Any], Field(description="With explain: every channel and signal.")]
    ]


@with_config(_OPEN)
class SearchReply(TypedDict):
    hits: list[Hit]
    generation: Generation
    degraded: NotRequired[
        Annotated[
            str,
            Field(
                description="Set while the model loads, or while its embedding server does "
                "not answer (the reason follows): keyword matching only."
            ),
        ]
    ]
    elsewhere: NotRequired[
        Annotated[
            list[str],
            Field(
                description="Nothing in this project's scope matched well, but entries of these "
                "other projects do: search again with scope all (or a project's name)."
            ),
        ]
    ]


@with_config(_OPEN)
class EntryReply(TypedDict):
    id: Id
    title: str
    type: str
    status: Annotated[str, Field(description="active, superseded or archived")]
    tags: list[str]
    body: Annotated[str, Field(description="The full Markdown text.")]
    path: Annotated[str, Field(description="The file on disk.")]
    writable: bool
    kb: NotRequired[Annotated[str, Field(description="The KB it belongs to (personal, team).")]]
    supersedes: Annotated[list[str], Field(description="Ids this entry replaced.")]
    superseded_by: Annotated[
        str | list[str] | None,
        Field(description="The entry that replaced this one (a list: a fork a sync left)."),
    ]
    created: str | None
    scope: NotRequired[Annotated[str, Field(description="global, or the project it belongs to.")]]
    links: NotRequired[
        Annotated[
            dict[str, list[str]],
            Field(
                description="Authored links by kind: the frontmatter's references, "
                "derived_from, contained_in, contradicts, and the body's [[wikilink]]s."
            ),
        ]
    ]
    superseded_at: NotRequired[str]
    archived_at: NotRequired[str]
    archive_reason: NotRequired[str]


@with_config(_OPEN)
class AddReply(TypedDict):
    status: Annotated[
        Literal["created", "duplicate"],
        Field(description="created: written, committed, indexed. duplicate: nothing written."),
    ]
    id: Annotated[str, Field(description="The new entry, or the existing one it duplicates.")]
    path: NotRequired[str]
    scope: NotRequired[
        Annotated[str, Field(description="global, or the name of the project it belongs to.")]
    ]
    kb: NotRequired[Annotated[str, Field(description="The KB written to (personal, team).")]]
    commit: NotRequired[Commit]
    generation: NotRequired[Generation]
    duplicate_of: NotRequired[str]
    score: NotRequired[Annotated[float, Field(description="Similarity to duplicate_of.")]]
    match: NotRequired[Literal["exact", "near"]]
    forced_past: NotRequired[
        Annotated[str, Field(description="The near-duplicate force=true went past.")]
    ]
    next: NotRequired[str]


@with_config(_OPEN)
class SupersedeReply(TypedDict):
    status: Literal["preview", "superseded", "duplicate"]
    id: Annotated[str, Field(description="The new entry (or, for duplicate, the existing one).")]
    old_id: str
    preview: NotRequired[Preview]
    next: NotRequired[str]
    path: NotRequired[str]
    commit: NotRequired[Commit]
    generation: NotRequired[Generation]
    duplicate_of: NotRequired[str]
    score: NotRequired[float]
    match: NotRequired[Literal["exact", "near"]]
    forced_past: NotRequired[str]


@with_config(_OPEN)
class ArchiveReply(TypedDict):
    status: Literal["preview", "archived"]
    id: Id
    preview: NotRequired[Preview]
    next: NotRequired[str]
    path: NotRequired[str]
    commit: NotRequired[Commit]
    generation: NotRequired[Generation]


@with_config(_OPEN)
class ResolveReply(TypedDict):
    status: Annotated[
        Literal["preview", "resolved", "duplicate"],
        Field(description="preview: nothing written yet. resolved: one commit written."),
    ]
    id: Annotated[str, Field(description="The entry that was forked.")]
    kept: NotRequired[Annotated[str, Field(description="The successor kept (keep).")]]
    merged_into: NotRequired[Annotated[str, Field(description="The new entry (merge).")]]
    archived: Annotated[list[str], Field(description="Successors archived, naming the fork.")]
    superseded: Annotated[list[str], Field(description="Successors the merge supersedes.")]
    preview: NotRequired[Preview]
    next: NotRequired[str]
    commit: NotRequired[Commit]
    generation: NotRequired[Generation]
    duplicate_of: NotRequired[str]
    score: NotRequired[float]
    match: NotRequired[Literal["exact", "near"]]


@with_config(_OPEN)
class ImportanceReply(TypedDict):
    id: Id
    importance: Annotated[int, Field(ge=1, le=10)]
    note: str | None


@with_config(_OPEN)
class HistoryStep(TypedDict):
    id: Id
    title: str
    type: str
    status: str
    created: str
    supersedes: NotRequired[Annotated[list[str], Field(description="Ids this step replaced.")]]
    superseded_by: NotRequired[str | list[str]]
    superseded_at: NotRequired[str]
    archived_at: NotRequired[str]
    archive_reason: NotRequired[str]
    reason: NotRequired[Annotated[str, Field(description="Why the step ended.")]]
    branch: NotRequired[
        Annotated[
            bool,
            Field(description="Off the line from the first entry to the current one (a fork)."),
        ]
    ]


@with_config(_OPEN)
class HistoryReply(TypedDict):
    id: Id
    chain: Annotated[
        list[HistoryStep],
        Field(description="Every entry of the supersede graph through it, oldest first."),
    ]


@with_config(_OPEN)
class SourceInfo(TypedDict):
    label: str
    entries: int
    writable: bool
    available: Annotated[bool, Field(description="False: the folder is missing right now.")]
    path: str
    problems: NotRequired[list[str]]


@with_config(_OPEN)
class StatusReply(TypedDict):
    generation: str | None
    consistent: Annotated[bool, Field(description="The index matches the files.")]
    entries: int
    points: int
    manifest_points: int
    embedder: str | None
    sources: list[SourceInfo]
    pending: Annotated[int, Field(description="Writes a killed process left unfinished.")]
    last_refresh: str | None
    indexed_commit: NotRequired[
        Annotated[str | None, Field(description="The KB commit the index reflects.")]
    ]
    problems: NotRequired[list[str]]
    degraded: NotRequired[str]
    embedding_url: NotRequired[
        Annotated[str, Field(description="The openai embedder's server (embedding_url).")]
    ]
    embedding_model: NotRequired[
        Annotated[str, Field(description="The model asked of that server (embedding_model).")]
    ]
    readers: NotRequired[
        Annotated[
            list[dict[str, Any]],
            Field(
                description="The daemon's reader processes (read_processes): each one's slot, "
                "pid, state, searches answered and the index change it holds (seen)."
            ),
        ]
    ]


@with_config(_OPEN)
class Proposal(TypedDict):
    id: Annotated[str, Field(description="The proposal's id (pass it to memory_accept).")]
    title: str
    body: str
    type: str
    episodes: Annotated[list[str], Field(description="The episodes that are its evidence.")]
    sessions: list[str]


@with_config(_OPEN)
class ProposalsReply(TypedDict):
    proposals: list[Proposal]


@with_config(_OPEN)
class RejectReply(TypedDict):
    id: str
    status: Literal["rejected"]
    reason: str


class ErrorBody(TypedDict):
    code: Annotated[str, Field(json_schema_extra={"enum": list(ERROR_CODES)})]
    message: Annotated[str, Field(description="What went wrong.")]
    fix: Annotated[str, Field(description="What to do next.")]


class ErrorReply(TypedDict):
    error: ErrorBody


def error_schema() -> dict[str, Any]:
    return TypeAdapter(ErrorReply).json_schema()


def with_error(success: dict[str, Any]) -> dict[str, Any]:
    """The published output schema: the tool's reply or the error reply."""
    success = copy.deepcopy(success)
    error = error_schema()
    defs = {**success.pop("$defs", {}), **error.pop("$defs", {})}
    schema: dict[str, Any] = {"type": "object", "anyOf": [success, error]}
    if defs:
        schema["$defs"] = defs
    return schema
