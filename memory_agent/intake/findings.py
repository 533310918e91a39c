"""What the secret detectors report, and how a text is redacted from it.

A detector (`intake.shapes`, `intake.rules`, `intake.pairs`, `intake.encoded`) reports
`Finding`s: the span of a text that holds a secret, its kind (`github-token`, `secret`, a rule
of the data file), the value as found (for a secret found across a line break, the joined
value) and, for an encoded run, the findings of its decoded text. Findings may overlap (a
token inside a `TOKEN=...` line is found by two detectors): `merged` joins overlapping spans,
the kind of the first (earliest start, then the detector that ran first); `substitute` puts
`[REDACTED:<kind>]` in place of each merged span.

Standard library only, cheap to import: the hook command imports it.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import NamedTuple

__all__ = ["Finding", "entropy", "merged", "substitute"]


class Finding(NamedTuple):
    start: int
    end: int
    kind: str
    value: str
    rule: str | None = None  # the data file's rule that found it (`intake.rules`)
    inner: tuple = ()  # an encoded run: the findings of its decoded text
    eager_only: bool = False  # redacted, but no evidence of a real secret (`intake.secrets`)


def merged(findings: list[Finding]) -> list[tuple[int, int, str]]:
    """The findings' spans with overlapping ones joined, in order: (start, end, kind), the
    kind of the first finding of each group (the list's order breaks a tie in start)."""
    order = sorted(range(len(findings)), key=lambda i: (findings[i].start, i))
    out: list[tuple[int, int, str]] = []
    for i in order:
        f = findings[i]
        if f.end <= f.start:
            continue
        if out and f.start < out[-1][1]:
            start, end, kind = out[-1]
            out[-1] = (start, max(end, f.end), kind)
        else:
            out.append((f.start, f.end, f.kind))
    return out


def substitute(text: str, findings: list[Finding]) -> str:
    """`text` with each merged span of `findings` replaced by `[REDACTED:<kind>]`."""
    if not findings:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in merged(findings):
        out.append(text[pos:start])
        out.append(f"[REDACTED:{kind}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def entropy(value: str) -> float:
    """Shannon entropy of `value`, in bits per character (0.0 for an empty string)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())
