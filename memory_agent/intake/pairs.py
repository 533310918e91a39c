"""Secrets that nothing labels but what travels with them (issue 32): the 40-character secret
beside an AWS access key id, and the columns of a CSV whose header names them.

- **Key pairs** (`key_pairs`): a 40-character run of base64 characters with letters and digits
  (an AWS secret access key's shape) within 160 characters of an access key id (`AKIA...`,
  `ASIA...`), with no blank line between: `AKIA... wJalr...`, `AKIA...,wJalr...`, the two on
  adjacent lines, the row of the credentials CSV the AWS console downloads.
- **CSV columns** (`csv_columns`): a header line of comma- or tab-separated names (each a
  name of five words or fewer: a sentence with a comma is no header), one of which says
  secret (`Password`, `Secret access key`, `api_token`: `shapes.secret_name`), and the rows
  under it (the same number of fields, up to a blank line; a row wrapped over up to four
  lines read joined, and a line that is one run of token characters taken for the wrapped
  end of the last field): the values of those columns.

Both are linear: one pass of a regex each for the key ids, the candidate secrets and the
header words, a bisection to pair them, and each line read at most once.

Standard library only: the hook command imports it.
"""

from __future__ import annotations

import bisect
import re

from memory_agent.intake.findings import Finding
from memory_agent.intake.shapes import AWS_KEY_ID, placeholder, secret_name

__all__ = ["csv_columns", "key_pairs"]

_CANDIDATE = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_NEAR = 160  # characters between a key id and its secret
_MIXED = (re.compile(r"[a-z]"), re.compile(r"[A-Z0-9]"))


def key_pairs(text: str) -> list[Finding]:
    """The 40-character secrets beside an AWS access key id."""
    if "A" not in text:
        return []
    ids = [(m.start(), m.end()) for m in AWS_KEY_ID.finditer(text)]
    if not ids:
        return []
    starts = [s for s, _ in ids]
    out: list[Finding] = []
    for m in _CANDIDATE.finditer(text):
        value = m.group()
        if not all(p.search(value) for p in _MIXED):
            continue  # a hex digest or a word run, not a key's shape
        i = bisect.bisect_left(starts, m.start())
        near = []
        if i:
            near.append((ids[i - 1][1], m.start()))  # an id before it
        if i < len(ids):
            near.append((m.end(), ids[i][0]))  # an id after it
        for a, b in near:
            if 0 <= b - a <= _NEAR and "\n\n" not in text[a:b]:
                out.append(Finding(m.start(), m.end(), "aws-secret-key", value))
                break
    return out


_HEADER_WORD = re.compile(
    r"(?i)pass(?:word|wd|phrase)?|secret|token|api.?key|access.?key|private.?key|credential"
)
_MAX_FIELDS = 50
_COLUMN_NAME = re.compile(r"[A-Za-z][\w.()/-]*+(?: [\w.()/-]++){0,4}")  # five words or fewer
_WRAPPED_TAIL = re.compile(r"[A-Za-z0-9+/=_.-]{1,200}")  # one run, no separator or space
_MAX_ROWS = 10_000


def _fields(line: str) -> list[tuple[int, int]] | None:
    """The (start, end) of each field of a CSV line (quotes kept out of the span), or None
    when it is not one: no separator, or a quote left open."""
    sep = "\t" if "\t" in line else ","
    if sep not in line:
        return None
    spans: list[tuple[int, int]] = []
    i, n = 0, len(line)
    while True:
        if i < n and line[i] == '"':
            j = i + 1
            while True:
                j = line.find('"', j)
                if j == -1:
                    return None
                if line[j + 1 : j + 2] == '"':
                    j += 2
                    continue
                break
            spans.append((i + 1, j))
            i = j + 1
            if i < n and line[i] != sep:
                return None
        else:
            j = line.find(sep, i)
            j = n if j == -1 else j
            spans.append((i, j))
            i = j
        if len(spans) > _MAX_FIELDS:
            return None
        if i >= n:
            return spans
        i += 1  # past the separator


def _row(text: str, pos: int, width: int) -> tuple[str, list | None, list[tuple[int, int]], int]:
    """The row of `width` fields that starts at `pos`: one line, or up to four when a field
    was wrapped (the line has fewer fields, or a quote left open). (row, its fields' spans or
    None, where each line starts in the row and in the text, where the next row starts)."""
    row, lines, cells = "", [], None
    for _ in range(4):
        if pos >= len(text):
            break
        eol = text.find("\n", pos)
        eol = len(text) if eol == -1 else eol
        lines.append((len(row), pos))
        row += text[pos:eol].rstrip("\r")
        pos = eol + 1
        if not row.strip():
            return row, None, lines, pos
        cells = _fields(row)
        if cells is not None and len(cells) >= width:
            break
    if cells is None or len(cells) != width:
        return row, None, lines, pos
    eol = text.find("\n", pos)
    eol = len(text) if eol == -1 else eol
    tail = text[pos:eol].rstrip("\r")
    if _WRAPPED_TAIL.fullmatch(tail) and cells[-1][1] > cells[-1][0]:  # the last field wrapped
        lines.append((len(row), pos))
        row, pos = row + tail, eol + 1
        cells[-1] = (cells[-1][0], len(row))
    return row, cells, lines, pos


def _in_text(lines: list[tuple[int, int]], offset: int) -> int:
    """Where the row's character at `offset` is in the text."""
    i = bisect.bisect_right([r for r, _ in lines], offset) - 1
    return lines[i][1] + offset - lines[i][0]


def csv_columns(text: str) -> list[Finding]:
    """The values of the columns a CSV header names as secrets, in the rows under it."""
    if "," not in text and "\t" not in text:
        return []
    out: list[Finding] = []
    done = 0  # every line before this offset was read
    for m in _HEADER_WORD.finditer(text):
        if m.start() < done:
            continue
        start = text.rfind("\n", done, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end == -1 else end
        done = end
        line = text[start:end].rstrip("\r")
        spans = _fields(line)
        if spans is None or len(spans) < 2:
            continue
        names = [line[a:b].strip() for a, b in spans]
        if not all(_COLUMN_NAME.fullmatch(name) for name in names):
            continue  # a sentence with a comma, not a header
        secret_columns = [i for i, name in enumerate(names) if secret_name(name)]
        if not secret_columns:
            continue
        pos = end + 1
        for _ in range(_MAX_ROWS):  # the rows under it
            row, cells, lines, pos = _row(text, pos, len(spans))
            if cells is None:
                break
            for i in secret_columns:
                a, b = cells[i]
                value = row[a:b]
                if value.strip() and not placeholder(value):
                    start, stop = _in_text(lines, a), _in_text(lines, b - 1) + 1
                    out.append(Finding(start, stop, "secret", value))
        done = max(done, pos)
    return out
