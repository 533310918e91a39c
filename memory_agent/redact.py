"""Secrets out before anything is stored: what an agent captures (prompts, commands, tool
output) is redacted before it reaches the journal.

Known token shapes (cloud keys, API keys, personal access tokens, JWTs, private key blocks,
credentials in URLs, `Authorization` headers) and `.env`-style assignments whose name says
secret (`*_TOKEN=`, `PASSWORD: ...`, `"api_key": "..."`) become `[REDACTED:<kind>]`. False
positives cost a word; a missed secret would sit in a file on disk - so the patterns lean wide.

Standard library only: the hook command imports it.
"""

from __future__ import annotations

import re

__all__ = ["redact"]

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY"
        r"( BLOCK)?-----|\Z)", re.S)),
    ("aws-key", re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})\b")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("api-key", re.compile(r"\bsk-(ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}\b")),
    ("stripe-key", re.compile(r"\b[rs]k_(live|test)_[A-Za-z0-9]{16,}\b")),
    ("google-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("url-credentials", re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
    ("bearer", re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{16,}")),
]  # fmt: skip

# NAME=value / NAME: value / "name": "value" where the name says secret.
_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:secret|passw(?:or)?d|passwd|pwd|token|api[_-]?key|apikey|" \
    r"access[_-]?key|private[_-]?key|credential)[A-Za-z0-9_.-]*"  # fmt: skip
_ASSIGNMENT = re.compile(
    rf"""(?ix)
    (?P<name>["']?{_SECRET_NAME}["']?)
    (?P<sep>\s*[:=]\s*)
    (?P<value>"[^"\\n]*"|'[^'\\n]*'|[^\s,;}}]+)
    """
)
_PLACEHOLDER = re.compile(r"^[\"']?(\[REDACTED:[a-z-]+\]|\*+|<[^>]*>|\$\{?\w+\}?|x+|)[\"']?$", re.I)


def redact(text: str) -> str:
    """`text` with every secret it seems to hold replaced by `[REDACTED:<kind>]`."""
    if not text:
        return text
    for kind, pattern in _PATTERNS:
        text = pattern.sub(f"[REDACTED:{kind}]", text)

    def assignment(m: re.Match[str]) -> str:
        value = m.group("value")
        bare = value.strip("\"'")
        if (
            _PLACEHOLDER.match(value)
            or len(bare) < 6
            or bare.replace(".", "").isdigit()
            or bare.lower() in ("true", "false", "null", "none")
        ):
            return m.group(0)  # a placeholder, a flag or a number such as max_tokens=256
        quote = value[0] if value[:1] in "\"'" else ""
        return f"{m.group('name')}{m.group('sep')}{quote}[REDACTED:secret]{quote}"

    return _ASSIGNMENT.sub(assignment, text)
