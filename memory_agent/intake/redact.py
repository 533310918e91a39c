"""Secrets out before anything is stored: what an agent captures (prompts, commands, tool
output), what `import` reads and the usage events are redacted before they are written. This is
the eager strength of the one rule set: false positives cost a word, a missed secret would sit
in a file on disk. The push check and the write gateway judge the same findings with a second,
stricter strength (`memory_agent.intake.secrets`: is this a real-looking value?).

Two views of the same rule:

- On the STRUCTURE (`redact_value`): a dict key that names a secret (`password`, `api_key`,
  `token`, `AWS_SECRET_ACCESS_KEY`, `client_secret`, `auth`, `cookie`, ...) redacts its whole
  value, whatever it is (a string, a number, a nested object). `{"name": "DB_PASSWORD",
  "value": ...}` pairs too. A string that is a JSON text is read as JSON and redacted the
  same way. A list is read as an argv or a pair (`redact_items`): `["--password", X]`,
  `["curl", "-u", "bob:X"]`, `["mysql", "-pX"]`, `-p X` after sshpass, twine or `docker
  login`, `["X-Api-Key", X]`.
- On the TEXT (`redact`, from `findings`): the hand-written shapes (`intake.shapes`: known
  tokens, names that say secret, command lines, prose), the rules of a maintained source
  (`intake.rules`: gitleaks' rules, kept in a data file), a secret beside an AWS key id or in
  a CSV column named like one (`intake.pairs`), and the same detectors on the text with its
  wrapped lines joined and on its base64, hex and URL-encoded runs decoded
  (`intake.encoded`). Each finding becomes `[REDACTED:<kind>]`.

Every pattern runs in linear time (no pattern backtracks; each rule of the data file was
checked on adversarial input). Callers that keep only part of a long text cut it first, with a
margin, then redact, then cut exactly (`memory_agent.intake.journal`).

Standard library only, cheap to import: the hook command imports it.
"""

from __future__ import annotations

import functools
import json
import re

from memory_agent.intake import rules
from memory_agent.intake.encoded import crossing, encoded_runs, folded
from memory_agent.intake.findings import Finding, substitute
from memory_agent.intake.pairs import csv_columns, key_pairs
from memory_agent.intake.shapes import assignments, placeholder, secret_name, tokens

__all__ = [
    "REDACTED",
    "findings",
    "pair_names_secret",
    "redact",
    "redact_items",
    "redact_value",
    "secret_name",
    "secret_value",
]

REDACTED = "[REDACTED:secret]"


def _scan(
    text: str, depth: int, view: bool = False, joined: frozenset[int] = frozenset()
) -> list[Finding]:
    out = tokens(text)
    out.extend(rules.findings(text))
    out.extend(key_pairs(text))
    named = assignments(text) + csv_columns(text)
    if view:  # a name's value across a line break: redacted, no evidence for the push check
        named = [f._replace(eager_only=True) for f in named]
    out.extend(named)
    out.extend(encoded_runs(text, findings, depth, joined))
    return out


def findings(text: str, depth: int = 0) -> list[Finding]:
    """Every secret the text seems to hold, as found (`intake.findings.Finding`), in the
    order of the detectors; `depth`: how many encodings deep `text` was found."""
    if len(text) < 4:  # too short to hold a secret
        return []
    view = folded(text)
    if view is None:
        return _scan(text, depth)
    found = _scan(text, depth, joined=view.joined)
    for start, end in view.windows():
        part = _scan(view.text[start:end], depth, view=True)
        part = [f._replace(start=f.start + start, end=f.end + start) for f in part]
        found.extend(crossing(part, view))
    return found


def redact(text: str) -> str:
    """`text` with every secret it seems to hold replaced by `[REDACTED:<kind>]`. A text that
    is a JSON object or array is redacted on its structure too (`redact_value`)."""
    if len(text) < 4:
        return text
    stripped = text.lstrip()
    if stripped[:1] in ("{", "[") and len(text) <= 1_000_000:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, (dict, list)):
            clean = redact_value(data)
            if clean != data:
                return json.dumps(clean, ensure_ascii=False)
    return substitute(text, findings(text))


# -- structures ---------------------------------------------------------------------------
def pair_names_secret(item: dict) -> bool:
    """`{"name": "DB_PASSWORD", "value": ...}` (Kubernetes, GitHub Actions, ECS env lists)."""
    for key in ("name", "key", "Name", "Key"):
        name = item.get(key)
        if isinstance(name, str) and secret_name(name):
            return True
    return False


@functools.lru_cache(maxsize=4096)
def _redact_key(key: str) -> str:
    return redact(key)  # keys repeat (every record of a list has the same ones)


def secret_value(key: str, value):
    """What is kept of the value of a key that names a secret: a placeholder, null, a bool,
    or `$PWD`'s path stay; anything else (a string, a number, a nested object) is redacted."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and (
        placeholder(value) or (key.lower() == "pwd" and value.startswith(("/", "~")))
    ):
        return value  # a placeholder, or $PWD (the working directory)
    return REDACTED


def redact_value(value, depth: int = 0):
    """A JSON-like value with its secrets redacted: the whole value of a key that names a
    secret, and every string by `redact`. Nesting deeper than 64 levels is cut."""
    if isinstance(value, str):
        return redact(value)
    if depth > 64:
        return "[cut: nested deeper than 64 levels]" if isinstance(value, (dict, list)) else value
    if isinstance(value, dict):
        pair = pair_names_secret(value)
        out = {}
        for k, v in value.items():
            key = _redact_key(k) if isinstance(k, str) else k
            if (isinstance(k, str) and secret_name(k)) or (pair and k in ("value", "Value")):
                out[key] = secret_value(str(k), v)
            else:
                out[key] = redact_value(v, depth + 1)
        return out
    if isinstance(value, list):
        return [redact_value(v, depth + 1) for v in redact_items(value)]
    return value


_ARG_FLAG = re.compile(r"--?+(?P<name>[A-Za-z][A-Za-z0-9_-]{0,60}+)")
_PROGRAMS_P = frozenset(  # programs whose `-p` is a password
    "mysql mysqldump mysqladmin mysqlimport mysqlsh mariadb sshpass twine".split()
)


def _names_p_program(text: str) -> bool:
    """An argv element naming such a program (`mysql`, `/usr/bin/sshpass`, `mysql.exe`); a
    look at its last 40 characters only."""
    base = text[-40:].replace("\\", "/").rsplit("/", 1)[-1].lower()
    return base.removesuffix(".exe") in _PROGRAMS_P


def redact_items(items: list) -> list:
    """A list's strings read together, as an argv or a pair: the element after a flag that
    names a secret (`["--password", "X"]`, `["-u", "bob:X"]` as curl's `user:pass`, `-p X`
    after mysql, sshpass or `docker login`), `["mysql", "-pX"]`, and the value of a
    two-element `[name, value]` whose name says secret (`["X-Api-Key", "..."]`). Other
    elements are returned as they are (`redact` still reads each)."""
    n = len(items)
    if not n or not any(isinstance(v, str) for v in items):
        return items
    out = list(items)
    if n == 2 and isinstance(items[0], str) and isinstance(items[1], str):
        if secret_name(items[0].strip().rstrip(":=").strip()):
            out[1] = secret_value(items[0], items[1])
            return out
    context, prev = False, ""
    for i, item in enumerate(items):
        if not isinstance(item, str):
            prev = ""
            continue
        text = item.strip()
        nxt = items[i + 1] if i + 1 < n and isinstance(items[i + 1], str) else None
        m = _ARG_FLAG.fullmatch(text)
        if context and text.startswith("-p") and len(text) > 2 and not placeholder(text[2:]):
            out[i] = item[: item.index("-p") + 2] + "[REDACTED:password]"
        elif m is not None and nxt is not None and not placeholder(nxt):
            name = m.group("name")
            if name in ("u", "user"):
                if ":" in nxt.strip(":"):
                    out[i + 1] = nxt.split(":", 1)[0] + ":" + REDACTED
            elif text == "-p":
                if context:
                    out[i + 1] = "[REDACTED:password]"
            elif (text.startswith("--") or len(name) > 1) and secret_name(name):
                out[i + 1] = REDACTED
        if _names_p_program(text) or (text == "login" and prev.endswith(("docker", "podman"))):
            context = True
        prev = text
    return out
