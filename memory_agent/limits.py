"""The bounds of every input, in one place (the README's "Limits" table lists them; the tool
schemas carry them). Anything past a bound is refused as `invalid`, naming the bound.

Standard library only: the proxy and the CLI read these too.
"""

from __future__ import annotations

from typing import Any

from memory_agent.errors import Invalid

__all__ = [
    "MAX_BODY",
    "MAX_ID",
    "MAX_LIMIT",
    "MAX_MESSAGE_BYTES",
    "MAX_NOTE",
    "MAX_QUERY",
    "MAX_REASON",
    "MAX_REQUEST_ID",
    "MAX_TAGS",
    "MAX_TITLE",
    "check_text",
]

MAX_QUERY = 2_000  # characters of a search query (longer text is a document, not a question)
MAX_LIMIT = 50  # hits a search returns at most
MAX_TITLE = 200  # characters of an entry title (one line, no control characters)
MAX_BODY = 100_000  # characters of an entry body
MAX_TAGS = 20  # tags on one entry (each a word of at most 40 characters)
MAX_REASON = 1_000  # characters of an archive reason
MAX_NOTE = 1_000  # characters of an importance note
MAX_REQUEST_ID = 200  # characters of a request id
MAX_ID = 500  # characters of an id (KB ids are slugs of at most 80; corpus ids are paths)
MAX_MESSAGE_BYTES = 1_000_000  # one JSON-RPC message through the proxy or the CLI


def check_text(
    name: str, value: Any, limit: int, *, required: bool = False, one_line: bool = False
) -> None:
    """Refuse a value that is not text, is longer than `limit` characters, or (for one-line
    fields) holds control characters."""
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise Invalid(f"{name}: must be text", f"pass {name} as a string")
    if required and not value.strip():
        raise Invalid(f"{name}: empty", f"pass a non-empty {name}")
    if len(value) > limit:
        raise Invalid(
            f"{name}: {len(value):,} characters is over the limit of {limit:,}",
            f"shorten {name} to at most {limit:,} characters",
        )
    if one_line and any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise Invalid(
            f"{name}: contains control characters (such as newlines or tabs)",
            f"make {name} one line of plain text",
        )
