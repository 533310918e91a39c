"""The tools' shared parameters, each described and bounded once: the model reads the
descriptions in the input schemas, and the SDK refuses what is out of bounds before a tool
runs (the input side of `serve.schemas`, which holds the replies). Also the annotation of the
tools that only read.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp_types import ToolAnnotations
from pydantic import Field

from memory_agent import limits
from memory_agent.kb.entries import ENTRY_TYPES

__all__ = [
    "ADDS",
    "READ",
    "RETIRES",
    "SETS",
    "BodyArg",
    "ConfirmArg",
    "EntryType",
    "ForceArg",
    "IdArg",
    "LinksArg",
    "RequestIdArg",
    "ScopeArg",
    "TagsArg",
    "TitleArg",
]

EntryType = Literal[ENTRY_TYPES]  # type: ignore[valid-type]


def hints(*, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """What a tool does, for the client's permission prompts. Every tool acts on this home
    only (`open_world_hint=False`)."""
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


READ = hints(read_only=True, destructive=False, idempotent=True)
ADDS = hints(read_only=False, destructive=False, idempotent=False)  # a new entry or record a call
RETIRES = hints(read_only=False, destructive=True, idempotent=False)  # an entry leaves search
SETS = hints(read_only=False, destructive=False, idempotent=True)  # twice changes nothing more

IdArg = Annotated[
    str,
    Field(
        description="An entry id exactly as memory_search returned it (a slug for personal KB "
        "entries, <kb>:<slug> for another KB's, <label>/<path> for project docs).",
        min_length=1,
        max_length=limits.MAX_ID,
    ),
]
TitleArg = Annotated[
    str,
    Field(
        description="One line saying the point, e.g. 'Lock dependencies with uv'.",
        min_length=1,
        max_length=limits.MAX_TITLE,
    ),
]
BodyArg = Annotated[
    str,
    Field(
        description="Self-contained Markdown: what, why, and how to apply it. [[id]] links "
        "another entry.",
        min_length=1,
        max_length=limits.MAX_BODY,
    ),
]
TagsArg = Annotated[
    list[Annotated[str, Field(max_length=limits.MAX_TAG)]] | None,
    Field(
        description="Short words to filter by, e.g. ['ci', 'python'].", max_length=limits.MAX_TAGS
    ),
]
RequestIdArg = Annotated[
    str | None,
    Field(
        description="Any unique string. Retrying the same call with the same request_id after a "
        "timeout returns the first reply instead of writing twice; reusing it for a different "
        "call is refused. Kept for a day.",
        max_length=limits.MAX_REQUEST_ID,
    ),
]
ConfirmArg = Annotated[
    bool,
    Field(
        description="false (default): only preview the files, write nothing. true: write.",
        strict=True,
    ),
]
LinksArg = Annotated[
    dict[
        Literal["references", "derived_from", "contained_in", "contradicts"],
        Annotated[list[Annotated[str, Field(max_length=80)]], Field(min_length=1, max_length=20)],
    ]
    | None,
    Field(
        description="Typed links to existing entries, e.g. {'derived_from': ['old-id'], "
        "'contradicts': ['other-id']}. Searches follow them to related entries (contradicts is "
        "shown, never boosts)."
    ),
]
ForceArg = Annotated[
    bool,
    Field(
        description="true: write even though a near-duplicate exists (it is named in the commit "
        "message). Use only when the near-duplicate says something different.",
        strict=True,
    ),
]

ScopeArg = Annotated[
    str | None,
    Field(
        description="Which project the entry belongs to: `project` (default: the project this "
        "session works in - its repository - or global outside one), `global` (true in every "
        "project: a user preference, a tool's pitfall), or a project's name or identity.",
        min_length=1,
        max_length=limits.MAX_ID,
    ),
]
