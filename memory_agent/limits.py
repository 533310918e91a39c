"""The bounds of every input, in one place (the README's "Limits" table lists them; the tool
schemas carry them). Anything past a bound is refused as `invalid`, naming the bound.

Standard library only: the proxy and the CLI read these too.
"""

from __future__ import annotations

import re
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
    "MAX_TAG",
    "MAX_TAGS",
    "MAX_TITLE",
    "char_name",
    "check_importance",
    "check_text",
    "lone_surrogate",
    "not_one_line",
]

MAX_QUERY = 2_000  # characters of a search query (longer text is a document, not a question)
MAX_LIMIT = 50  # hits a search returns at most
MAX_TITLE = 200  # characters of an entry title (one line, no control characters)
MAX_BODY = 100_000  # characters of an entry body
MAX_TAGS = 20  # tags on one entry
MAX_TAG = 40  # characters of one tag (one line, no control characters)
MAX_REASON = 1_000  # characters of an archive reason
MAX_NOTE = 1_000  # characters of an importance note
MAX_REQUEST_ID = 200  # characters of a request id
MAX_ID = 500  # characters of an id (KB ids are slugs of at most 80; corpus ids are paths)
MAX_MESSAGE_BYTES = 1_000_000  # one JSON-RPC message through the proxy or the CLI
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(
    name: str, value: Any, limit: int, *, required: bool = False, one_line: bool = False
) -> None:
    """Refuse a value that is not text, is longer than `limit` characters, holds a lone
    surrogate, or (for one-line fields: titles, tags, ids, request ids, archive reasons) holds
    a control or invisible formatting character, named (`U+202E RIGHT-TO-LEFT OVERRIDE`)."""
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
    surrogate = _SURROGATE.search(value)
    if surrogate is not None:
        raise Invalid(
            f"{name}: contains a lone surrogate ({char_name(surrogate.group())}), which is not "
            "a character and cannot be stored as UTF-8",
            f"send {name} as valid Unicode text",
        )
    if one_line:
        bad = next((c for c in value if not_one_line(c)), None)
        if bad is not None:
            raise Invalid(
                f"{name}: contains control characters or invisible formatting: {char_name(bad)} "
                f"at position {value.index(bad) + 1}",
                f"remove it: make {name} one line of plain, visible text",
            )


def check_importance(value: Any) -> None:
    """Refuse an importance that is not a whole number from 1 to 10."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise Invalid(
            f"importance: {value!r} is out of range",
            "pass a whole number from 1 (minor) to 10 (must not be missed)",
        )


def lone_surrogate(value: Any, path: str = "") -> tuple[str, str] | None:
    """(where, character) of the first lone surrogate in a JSON value's strings and keys, or
    None. JSON may escape one (`"\\ud800"`); UTF-8 cannot carry it, so a message holding one
    is refused before it is forwarded, with its id."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return (path or "value", found.group()) if found else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            hit = lone_surrogate(key, where + " (the key)") or lone_surrogate(item, where)
            if hit:
                return hit
    elif isinstance(value, list):
        for i, item in enumerate(value):
            hit = lone_surrogate(item, f"{path}[{i}]")
            if hit:
                return hit
    return None


# Control characters without a name in the Unicode database (their common names). Unformatted
# (fmt: skip): a table of six pairs reads better in two lines than in eight.
_CONTROL_NAMES = {0x09: "CHARACTER TABULATION", 0x0A: "LINE FEED", 0x0D: "CARRIAGE RETURN",
                  0x1B: "ESCAPE", 0x7F: "DELETE", 0x85: "NEXT LINE (NEL)"}  # fmt: skip


def not_one_line(c: str) -> bool:
    """C0 and C1 controls, DEL, format characters (bidi controls such as U+202E, zero-width
    characters, the BOM) and the line and paragraph separators U+2028/U+2029: they break a
    line, hide or reorder text, or are rewritten on the way to the file (YAML turns NEL into a
    space), so a one-line field refuses them."""
    if c.isprintable():
        return False
    import unicodedata  # only for the rare character that is not printable

    return unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")


def char_name(c: str) -> str:
    """`U+202E RIGHT-TO-LEFT OVERRIDE`: a character named so a person can find it."""
    import unicodedata

    default = "SURROGATE" if 0xD800 <= ord(c) <= 0xDFFF else "CONTROL CHARACTER"
    name = unicodedata.name(c, "") or _CONTROL_NAMES.get(ord(c), default)
    return f"U+{ord(c):04X} {name}"
