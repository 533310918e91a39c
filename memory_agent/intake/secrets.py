"""Is this a real secret? The strict strength of the one rule set, for the push check
(`memory_agent.sync.publish`) and the write gateway (`memory_agent.write.checks`): capture
redacts every finding (`intake.redact`: a false positive costs a word), but a write refused or a
push blocked for a word costs a person their afternoon. So a finding counts here only when its
value looks real (issue 33; docs/adr/0023-secrets-in-the-kb.md):

- not a placeholder: `<token>`, `${TOKEN}`, `$TOKEN`, `{{ secrets.X }}`, `%TOKEN%`, a third
  or more `xxxx` or `****`, `...`, `your-token-here`, `changeme`, `example`, a redaction mark;
  nor what the rule of the data file allows (gitleaks' global and per-rule allow-lists, its
  minimum entropy);
- a token of a known shape (a prefix, a key id, a JWT, a key block): random enough (entropy of
  3 bits a character; a private key's block holds 64 or more base64 characters);
- a value a name says is secret (`password: X`, `Authorization: Bearer X`, `--password X`, a
  URL's `user:X@`): 8 characters or more, entropy of 3 bits a character or more, and two kinds
  of character (lower, upper, digit, sign) unless 20 long - `permissions: id-token: write` and
  `token: required` are words, `Tr0ub4dor&3` is not;
- an encoded run counts when its decoded text holds a real secret; a value read across a line
  break by a name rule never counts (only capture redacts it).

Each finding has a **fingerprint**, `<kind>:<16 hex>` (sha256 of the value): the same value
has the same one in any file, commit or KB. A person releases a false positive by adding its
fingerprint to the KB's allow-list, `kb/.memory-agent-allow` (`memory-agent secrets allow FP
--reason ...`: a commit like any write, pushed and reviewed with the rest); a finding whose
fingerprint is listed there is not reported. Only the fingerprint is stored, never the value.

Standard library only.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from memory_agent.errors import Invalid
from memory_agent.intake import rules
from memory_agent.intake.findings import Finding, entropy
from memory_agent.intake.redact import findings as every_finding
from memory_agent.intake.shapes import placeholder

__all__ = [
    "ALLOW_FILE",
    "SecretFound",
    "allow_line",
    "allowed_in",
    "describe",
    "fingerprint",
    "found",
    "line_of",
    "new_in",
    "read_allowed",
    "real",
    "scannable",
]

ALLOW_FILE = ".memory-agent-allow"


class SecretFound(Invalid):
    """A write or a push refused: it holds what looks like a real secret."""


# -- real or not ---------------------------------------------------------------------------
_STANDS_FOR = re.compile(
    r"(?i)\.{3,}|<[^<>]{0,80}>|\$\{|\{\{|%[A-Z_]{2,}%|\$[A-Z_][A-Z0-9_]{2,}$|"
    r"\byour[-_ ]|^your|example|sample|placeholder|change[-_]?me|dummy|redacted|insert[-_ ]|"
    r"replace[-_ ]?me|[-_]here$|^(?:secret|password|token|apikey|api[-_]key)s?$"
)
_MASK = re.compile(r"[xX*]{4,}")  # `ghp_xxxx...`, `AKIA****`: masked when it is a third or more


def _masked(value: str) -> bool:
    return any(len(m.group()) * 3 >= len(value) for m in _MASK.finditer(value))


# kinds whose value is a name's value, not a token of a known shape
_NAMED = frozenset("secret password bearer url-credentials sas-signature".split())
# a name's value that names what goes there: `USER:TOKEN`, `base64(user:password)`
_NAMES_A_VALUE = re.compile(r"(?i)pass(?:word|wd)|secret|token|user(?:name)?\b|api[-_]?key")
_CLASSES = (re.compile(r"[a-z]"), re.compile(r"[A-Z]"), re.compile(r"[0-9]"), re.compile(r"\W|_"))
_WORDS_ONLY = re.compile(r"[a-z]+(?:[-_ .][a-z]+)*")
_BASE64_BODY = re.compile(r"[A-Za-z0-9+/=]")


def _looks_random(value: str) -> bool:
    """A name's value that reads like a password or a key, not a word or a setting."""
    if len(value) < 8 or entropy(value) < 3.0:
        return False
    if _WORDS_ONLY.fullmatch(value) and len(value) < 20:
        return False
    return len(value) >= 20 or sum(bool(p.search(value)) for p in _CLASSES) >= 2


def real(f: Finding) -> bool:
    """Whether a finding's value looks like a real secret (see the module's docstring)."""
    if f.eager_only:
        return False
    if f.inner:
        return any(real(i) for i in f.inner)
    value = f.value.strip().strip("\"'`")
    if not value or placeholder(value) or _STANDS_FOR.search(value) or _masked(value):
        return False
    if f.rule is not None and rules.allowed(f.rule, value):
        return False
    if f.kind == "private-key":
        body = "".join(
            line for line in value.splitlines() if "-----" not in line and "PRIVATE" not in line
        )
        body = "".join(_BASE64_BODY.findall(body))
        return len(body) >= 64 and entropy(body) >= 4.0
    if f.kind in _NAMED:
        return not _NAMES_A_VALUE.search(value) and _looks_random(value)
    return entropy(value) >= 3.0


def fingerprint(f: Finding) -> str:
    """`<kind>:<16 hex>`: the same value, the same fingerprint, wherever it is."""
    return f"{f.kind}:{hashlib.sha256(f.value.encode('utf-8', 'replace')).hexdigest()[:16]}"


def _digest(fp: str) -> str:
    return fp.rsplit(":", 1)[-1].strip().lower()


def found(text: str, allowed: frozenset[str] = frozenset()) -> list[Finding]:
    """The real secrets of `text`, one per group of overlapping findings (the earliest, then
    the longest), without those whose fingerprint is in `allowed` (digests, `allowed_in`)."""
    candidates = sorted(
        (f for f in every_finding(text) if real(f)), key=lambda f: (f.start, -f.end)
    )
    out: list[Finding] = []
    end = -1
    for f in candidates:
        if f.start < end:
            end = max(end, f.end)
            continue
        end = f.end
        if _digest(fingerprint(f)) not in allowed:
            out.append(f)
    return out


def new_in(text: str, before: str | None, allowed: frozenset[str]) -> list[Finding]:
    """The real secrets of `text` that `before` (the same file before the change) did not
    hold: a commit is answerable for what it adds, not for what it kept."""
    if not text:
        return []
    old = {fingerprint(f) for f in found(before, allowed)} if before else set()
    return [f for f in found(text, allowed) if fingerprint(f) not in old]


def describe(f: Finding) -> str:
    """What it is, never the value: `github-token; fingerprint github-token:...`."""
    what = f.kind
    if f.inner:
        inside = next((i for i in f.inner if real(i)), f.inner[0])
        what = f"a {f.kind.removesuffix('-secret')} run holding a {inside.kind}"
    return f"{what}; fingerprint {fingerprint(f)}"


def line_of(f: Finding, text: str) -> int:
    return text.count("\n", 0, f.start) + 1


# -- the allow-list ------------------------------------------------------------------------
def allowed_in(text: str | None) -> frozenset[str]:
    """The fingerprints (their digests) an allow-list's text releases: the first word of each
    line; `#` starts a comment."""
    out = set()
    for line in (text or "").splitlines():
        word = line.split("#", 1)[0].split()
        if word:
            out.add(_digest(word[0]))
    return frozenset(out)


_FINGERPRINT_COLUMN = re.compile(r"(?m)^[ \t]*+[^\s#]++")


def scannable(name: str, text: str | None) -> str | None:
    """What the check reads of the KB file `name` (relative to the KB): the allow-list
    without its fingerprints (a digest is no secret, though `jwt:3f2a...` reads like one),
    every other file whole."""
    if text is None or name != ALLOW_FILE:
        return text
    return _FINGERPRINT_COLUMN.sub(lambda m: " " * len(m.group()), text)


def read_allowed(kb_dir: Path) -> frozenset[str]:
    """The allow-list of the KB at `kb_dir`, as its working tree holds it."""
    try:
        return allowed_in((kb_dir / ALLOW_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()


ALLOW_HEADER = (
    "# Findings of memory-agent's secret check released as not secrets, one a line:\n"
    "# <fingerprint>  <why it is not a secret>. Written by `memory-agent secrets allow`;\n"
    "# reviewed like any commit (README, 'Secrets in the KB').\n"
)


def allow_line(fp: str, reason: str) -> str:
    """One line of the allow-list; `Invalid` for a malformed fingerprint or reason."""
    fp = fp.strip()
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,80}:[0-9a-f]{16}", fp):
        raise Invalid(
            f"fingerprint: {fp[:100]!r} is not one",
            "copy it from the error that named the finding: <kind>:<16 hex digits>",
        )
    reason = " ".join(reason.split())
    if not reason:
        raise Invalid("reason: missing", "say why it is not a secret (--reason ...)")
    return f"{fp}  {reason}\n"
