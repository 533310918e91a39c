"""The secret rules of a maintained source: gitleaks' default rules (MIT), converted by
`scripts/secret_rules.py` into `secret_rules.json` beside this module. Its header names the
release and commit they come from and carries gitleaks' licence; it lists the rules left out and
why (a rule for file names, or one that is not linear in Python's `re` even rewritten), and says
what was changed in each rule kept. Convert again to take a newer release; never edit by hand.

A rule runs only on a text that holds one of its keywords (gitleaks' own prefilter, case
aside), so a text pays for the few rules it could match. Its regex is compiled the first time
it runs (a hook that sees no keyword compiles nothing). Each rule was checked at conversion on
adversarial inputs of a megabyte (each keyword repeated, long runs of its characters): linear,
and under half a second; `tests/memory_agent/intake/test_secret_rules.py` runs the same check.

`findings` reports every match (capture's eager redaction); `allowed` is the rest of the rule
for the push check (`intake.secrets`): the rule's minimum entropy, its allow-list and
gitleaks' global one (`${VAR}`, `{{ .Values.x }}`, `true`, a path...).

Standard library only: the hook command imports it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import NamedTuple

from memory_agent.intake.findings import Finding, entropy

__all__ = ["DATA", "Rule", "allowed", "findings", "rules"]

DATA = Path(__file__).with_name("secret_rules.json")


class Rule(NamedTuple):
    id: str
    regex: str
    keywords: tuple[str, ...]
    entropy: float
    group: int | None  # the group that holds the secret (None: the first that matched)
    allow: tuple[str, ...]  # regexes: a secret one of them finds is not a finding


@functools.lru_cache(maxsize=1)
def _loaded() -> tuple[tuple[Rule, ...], dict[str, tuple[int, ...]], tuple[str, ...]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    out = tuple(
        Rule(
            r["id"],
            r["regex"],
            tuple(r["keywords"]),
            float(r.get("entropy", 0.0)),
            r.get("secret_group"),
            tuple(x for a in r.get("allow", ()) if a["target"] == "secret" for x in a["regexes"]),
        )
        for r in data["rules"]
    )
    by_keyword: dict[str, list[int]] = {}
    for i, rule in enumerate(out):
        for keyword in rule.keywords:
            by_keyword.setdefault(keyword, []).append(i)
    return out, {k: tuple(v) for k, v in by_keyword.items()}, tuple(data["global_allow"])


@functools.lru_cache(maxsize=1)
def _by_pair() -> dict[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """The keywords by their first two characters (every keyword has two or more)."""
    out: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for keyword, ids in _loaded()[1].items():
        out.setdefault(keyword[:2], []).append((keyword, ids))
    return {k: tuple(v) for k, v in out.items()}


_SHORT = 2048  # below this, the text's pairs of characters pick the keywords to look for


def _wanted(lowered: str) -> list[int]:
    """The rules whose keyword `lowered` holds. A short text (a decoded run, a field) looks
    up its own pairs of characters; a long one looks for each keyword (a fast search each)."""
    if len(lowered) < _SHORT:
        by_pair = _by_pair()
        pairs = {lowered[i : i + 2] for i in range(len(lowered) - 1)}
        hits = (ids for p in pairs for kw, ids in by_pair.get(p, ()) if kw in lowered)
    else:
        hits = (ids for kw, ids in _loaded()[1].items() if kw in lowered)
    return sorted({i for ids in hits for i in ids})


def rules() -> tuple[Rule, ...]:
    """Every rule of the data file, in its order."""
    return _loaded()[0]


@functools.cache
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.ASCII)  # RE2's \w, \b and (?i) are ASCII


def findings(text: str) -> list[Finding]:
    """Each match of a rule whose keyword `text` holds: the span of its secret (the rule's
    group, else the first group that matched, else the whole match)."""
    every = _loaded()[0]
    out: list[Finding] = []
    for i in _wanted(text.lower()):
        rule = every[i]
        for m in _compiled(rule.regex).finditer(text):
            if rule.group is not None:
                start, end = m.span(rule.group)
            else:
                start, end = next(
                    (m.span(g) for g in range(1, (m.re.groups or 0) + 1) if m.start(g) != -1),
                    m.span(),
                )
            if end > start:
                out.append(Finding(start, end, rule.id, text[start:end], rule=rule.id))
    return out


@functools.lru_cache(maxsize=1)
def _by_id() -> dict[str, Rule]:
    return {r.id: r for r in rules()}


def allowed(rule_id: str, secret: str) -> bool:
    """Whether the rest of the rule lets `secret` go: under the rule's minimum entropy, or
    found by its allow-list or gitleaks' global one."""
    rule = _by_id().get(rule_id)
    if rule is None:
        return False
    if rule.entropy and entropy(secret) < rule.entropy:
        return True
    return any(_compiled(x).search(secret) for x in (*rule.allow, *_loaded()[2]))
