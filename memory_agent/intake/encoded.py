"""Secrets behind a line break or an encoding (issue 32): what the detectors would find if the
text were unwrapped or decoded.

- **The folded view** (`folded`, `crossing`): a line of 8 characters or more that ends in
  a token character, followed by a line that starts with one (no indent, not a `NAME=`/`key:`
  line of its own, not a list item, not the next row of a table: both with a comma or a
  tab), when the two lines' runs of non-space characters make 16 or more together, is read
  joined to it - a token hard-wrapped by a
  terminal, an editor or `fold`, or base64 wrapped at 76 columns, is seen whole. A finding in
  the view that spans a removed line break is mapped back to the text (its span then covers
  both lines; its value is the joined one).
- **Encoded runs** (`encoded_runs`): a run of 20 or more base64 (or base64url) characters, of
  32 or more hex digits, or of URL-encoded text (two `%XX` or more) is decoded; when the
  result is text, the detectors read it (`scan`), and when they find a secret the whole run
  is a finding (`base64-secret`, `hex-secret`, `urlencoded-secret`) that carries what was
  found inside it.

Bounded like the rest: the view is read only around its joins (2 KB either side); each run is
found by one linear pass, decoded once (a wrapped one once, joined, in the view), and its
decoded text (at most three quarters of it) scanned once, two levels deep at most (base64
inside base64), so a text costs at most about three times its own scan.

Standard library only: the hook command imports it.
"""

from __future__ import annotations

import binascii
import bisect
import re
from collections.abc import Callable
from typing import NamedTuple

from memory_agent.intake.findings import Finding

__all__ = ["View", "crossing", "encoded_runs", "folded"]

_TOKEN = "A-Za-z0-9+/=_.-"
_JOIN = re.compile(rf"\n(?<=[^\n]{{7}}[{_TOKEN}]\n)(?=[A-Za-z0-9+/_.-])")
# a line of its own: `NAME=value`, `key:`, a list item (base64's last line `...Yi4=` is not)
_NEW_ITEM = re.compile(
    r"[A-Za-z_][\w.-]{0,100}+[ \t]*+(?::|=(?=[^=\s]))|[-*+#>][ \t]|\d++[.)][ \t]"
)


class View(NamedTuple):
    text: str
    cuts: list[int]  # the view's offsets where a line break was taken out
    joined: frozenset[int]  # the text's offsets of those line breaks

    def windows(self, margin: int = 2048) -> list[tuple[int, int]]:
        """The parts of the view around its joins (`margin` characters either side, merged):
        all a finding across a join can be in, so the rest is not read twice."""
        out: list[tuple[int, int]] = []
        for cut in self.cuts:
            start, end = max(0, cut - margin), min(len(self.text), cut + margin)
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
        return out


_HEAD = re.compile(r"\S{0,64}")


def _runs(text: str, cut: int) -> int:
    """How long the run of non-space characters across the line break at `cut` would be:
    a wrapped token makes a long one (`AKIA2XLTEN|C76E2GZJFK`), wrapped prose a word."""
    before = max(text.rfind(" ", max(0, cut - 64), cut), text.rfind("\t", max(0, cut - 64), cut))
    before = max(before, text.rfind("\n", max(0, cut - 64), cut), cut - 65)
    return cut - before - 1 + _HEAD.match(text, cut + 1).end() - cut - 1


def _two_rows(text: str, cut: int) -> bool:
    """Two lines of one table (a separator in both): rows, not a row wrapped."""
    before = text.rfind("\n", 0, cut) + 1
    after = text.find("\n", cut + 1)
    after = len(text) if after == -1 else after
    return any(
        text.find(sep, before, cut) != -1 and text.find(sep, cut + 1, after) != -1
        for sep in (",", "\t")
    )


def folded(text: str) -> View | None:
    """The text with its wrapped lines joined, or None when no line looks wrapped."""
    if "\n" not in text:
        return None
    cuts = [
        m.start()
        for m in _JOIN.finditer(text)
        if not _NEW_ITEM.match(text, m.end())
        and _runs(text, m.start()) >= 16
        and not _two_rows(text, m.start())
    ]
    if not cuts:
        return None
    pieces, prev = [], 0
    for cut in cuts:
        pieces.append(text[prev:cut])
        prev = cut + 1
    pieces.append(text[prev:])
    return View("".join(pieces), [cut - i for i, cut in enumerate(cuts)], frozenset(cuts))


# What the next line adds to a secret is taken for more of it when it looks like more of a
# token (a digit, a capital inside, a base64 sign), not a word (`after`, `and`)
_LIKE_TOKEN = re.compile(r"[0-9+/=_]|(?<=[A-Za-z])[A-Z]")


def crossing(findings: list[Finding], view: View) -> list[Finding]:
    """The view's findings that span a removed line break, with their spans in the text: a
    finding ends at a break after which it only took a word, and one left on one line is
    dropped (the text's own scan sees it)."""
    cuts = view.cuts
    out: list[Finding] = []
    for f in findings:
        i = bisect.bisect_right(cuts, f.start)
        j = bisect.bisect_left(cuts, f.end)  # cuts[i:j]: the breaks inside the finding
        while j > i and not _LIKE_TOKEN.search(view.text, cuts[j - 1], f.end):
            f = f._replace(end=cuts[j - 1], value=view.text[f.start : cuts[j - 1]])
            j -= 1
        if j == i:
            continue
        start = f.start + i
        end = f.end + bisect.bisect_right(cuts, f.end - 1)
        out.append(f._replace(start=start, end=end))
    return out


_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{20,}+={0,2}+")
_HEX = re.compile(r"[0-9A-Fa-f]{32,}+")
_URLENCODED = re.compile(
    r"(?<![A-Za-z0-9%._~+=&-])[A-Za-z0-9._~+=&-]*+%[0-9A-Fa-f]{2}[A-Za-z0-9%._~+=&-]*+"
)
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_LETTERS = re.compile(r"[A-Za-z]{2}")
_MAX_DEPTH = 2


def _as_text(data: bytes) -> str | None:
    """`data` as text when it reads as text (at most 5 % control or invalid characters)."""
    if len(data) < 8:
        return None
    text = data.decode("utf-8", "replace")
    bad = len(_BINARY.findall(text))
    if bad * 20 > len(text) or not _LETTERS.search(text):
        return None
    return text


def _decode(run: str, kind: str) -> str | None:
    if kind == "hex":
        return _as_text(binascii.unhexlify(run[: len(run) // 2 * 2]))
    if kind == "urlencoded":
        from urllib.parse import unquote_plus  # here: most texts hold none

        decoded = unquote_plus(run)
        return decoded if decoded != run else None
    body = run.rstrip("=").translate(str.maketrans("-_", "+/"))
    if len(body) % 4 == 1:
        body = body[:-1]
    try:
        return _as_text(binascii.a2b_base64(body + "=" * (-len(body) % 4)))
    except binascii.Error:
        return None


def encoded_runs(
    text: str,
    scan: Callable[[str, int], list[Finding]],
    depth: int = 0,
    joined: frozenset[int] = frozenset(),
) -> list[Finding]:
    """The encoded runs of `text` whose decoded text holds a secret (`scan(decoded, depth)`
    finds one), each a finding carrying what was found inside. A run that ends or starts at a
    line break in `joined` is left to the folded view, which reads it with its other lines."""
    if depth >= _MAX_DEPTH:
        return []
    out: list[Finding] = []
    for pattern, kind in ((_BASE64, "base64"), (_URLENCODED, "urlencoded")):
        if kind == "urlencoded" and "%" not in text:
            continue
        for m in pattern.finditer(text):
            if joined and (m.end() in joined or m.start() - 1 in joined):
                continue
            run = m.group()
            kinds = [kind]
            if kind == "base64" and len(run) % 2 == 0 and _HEX.fullmatch(run):
                kinds = ["hex", "base64"]  # hex digits are base64 characters too
            for k in kinds:
                decoded = _decode(run, k)
                inner = scan(decoded, depth + 1) if decoded else []
                if inner:
                    out.append(Finding(m.start(), m.end(), f"{k}-secret", run, inner=tuple(inner)))
                    break
    return out
