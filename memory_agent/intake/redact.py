"""Secrets out before anything is stored: what an agent captures (prompts, commands, tool
output) is redacted before it reaches the journal, and so are the usage events.

Two views of the same rule:

- On the STRUCTURE (`redact_value`): a dict key that names a secret (`password`, `api_key`,
  `token`, `AWS_SECRET_ACCESS_KEY`, `client_secret`, `auth`, `cookie`, ...) redacts its whole
  value, whatever it is (a string, a number, a nested object). `{"name": "DB_PASSWORD",
  "value": ...}` pairs too. A string that is a JSON text is read as JSON and redacted the
  same way. A list is read as an argv or a pair (`redact_items`): `["--password", X]`,
  `["curl", "-u", "bob:X"]`, `["mysql", "-pX"]`, `-p X` after sshpass or `docker login`,
  `["X-Api-Key", X]`.
- On the TEXT (`redact`): known token shapes (cloud keys, API keys, personal access tokens,
  Hugging Face and Slack tokens, Slack webhooks, JWTs, private key blocks, credentials in
  URLs, `Authorization` headers, Azure `AccountKey=`), `NAME=value` / `NAME: value` /
  `"name": "value"` where the name says secret, command-line secrets (`--password X`,
  `curl -u user:pass`, `mysql -pPASS`) and prose (`... with password X`, `.netrc`'s
  `password X`) become `[REDACTED:<kind>]`.

False positives cost a word; a missed secret would sit in a file on disk - so the patterns
lean wide. Every pattern runs in linear time: each starts only at the boundary of its own
character class (a look-behind) and its repeats are possessive, so no input (a megabyte of
hex, a run of `token=token=...`) makes the engine backtrack. Callers that keep only part of a
long text cut it first, with a margin, then redact, then cut exactly
(`memory_agent.intake.journal`).

Standard library only, cheap to import: the hook command imports it.
"""

from __future__ import annotations

import functools
import json
import re

__all__ = [
    "REDACTED",
    "pair_names_secret",
    "redact",
    "redact_items",
    "redact_value",
    "secret_name",
    "secret_value",
]

REDACTED = "[REDACTED:secret]"

# -- names that say secret ----------------------------------------------------------------
_WORDS = re.compile(r"[A-Z]++(?![a-z])|[A-Z]?[a-z]++|[0-9]++")
_SECRET_WORDS = frozenset(
    "password passwd passphrase pwd secret secrets token auth authorization credential "
    "credentials cookie cookies apikey privatekey accesskey secretkey accountkey sessionid "
    "sessiontoken jwt bearer sas connectionstring".split()
)
_SECRET_ENDINGS = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "secretkey",
    "accountkey",
    "credentials",
)
_KEY_PREFIXES = frozenset(
    "api access private secret account signing encryption master shared client app "
    "subscription storage session service".split()
)
# `token_count`, `password_file`, `auth_type`: about the secret, not the secret
_BENIGN_LAST = frozenset(
    "count counts type types limit limits length len size url uri urls endpoint file files "
    "path paths dir name names env var field method methods mode enabled required hint "
    "prompt provider providers scheme expiry expires expiration ttl policy format header "
    "min max budget usage kind error errors message help used remaining pattern regex version "
    "strategy level flow helper manager rotation changed updated created valid".split()
)


@functools.lru_cache(maxsize=8192)  # names repeat (`-p`, `token=`, the keys of every record)
def secret_name(name: str) -> bool:
    """Whether a key or variable name says its value is a secret (`DB_PASSWORD`, `apiKey`,
    `client_secret`, `X-Auth-Token`; not `max_tokens`, `tokenizer` or `password_file`)."""
    if not name or len(name) > 120:
        return False
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or words[-1] in _BENIGN_LAST:
        return False
    for i, word in enumerate(words):
        if word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS):
            return True
        if word == "key" and i and words[i - 1] in _KEY_PREFIXES:
            return True
    return words[-1] == "pass" or (words[-1] == "sig" and len(words) == 1)


_PLACEHOLDER = re.compile(
    r"(?i)[\"']?(?:\[REDACTED(?::[a-z-]+)?\]|\*++|<[^<>\n]{0,80}>|\$\{?\w{1,80}\}?|x++|"
    r"none|null|nil|true|false|undefined|redacted|)[\"']?"
)


def _placeholder(value: str) -> bool:
    return len(value) <= 90 and _PLACEHOLDER.fullmatch(value.strip()) is not None


# -- token shapes -------------------------------------------------------------------------
def _at_start(prefix: str, width: int, cls: str = "A-Za-z0-9_-") -> str:
    """`prefix` (`width` characters) where a token-like run starts. The look-behind comes
    after the literal, so the engine scans for the literal (fast) instead of trying the
    look-behind at every position."""
    return f"{prefix}(?<![{cls}]{'.' * width})"


# A pattern with a group `keep` keeps it and redacts the rest of the match. Unformatted
# (fmt: skip): each rule is a name and its regex on one or two lines, in columns; formatted,
# every regex concatenation is split across five lines and the list is hard to scan.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)"
        r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)")),
    ("aws-key", re.compile(_at_start("(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)", 4, "A-Za-z0-9")
                           + r"[0-9A-Z]{16}(?![A-Za-z0-9])")),
    ("github-token", re.compile(_at_start("gh[pousr]_", 4) + r"[A-Za-z0-9]{30,}+|"
                                + _at_start("github_pat_", 11) + r"[A-Za-z0-9_]{40,}+")),
    ("gitlab-token", re.compile(_at_start("glpat-", 6) + r"[A-Za-z0-9_-]{20,}+")),
    ("slack-token", re.compile(_at_start("xox[abposre]-", 5) + r"[A-Za-z0-9-]{10,}+")),
    ("slack-webhook", re.compile(r"(?P<keep>hooks\.slack\.com/)(?:services|workflows|triggers)"
                                 r"/[A-Za-z0-9/_-]++")),
    ("discord-webhook", re.compile(r"(?P<keep>/api/webhooks/)[0-9]++/[A-Za-z0-9_-]++")),
    ("hf-token", re.compile(_at_start("hf_", 3) + r"[A-Za-z0-9]{30,}+")),
    ("api-key", re.compile(_at_start("sk-", 3) + r"[A-Za-z0-9_-]{20,}+")),
    ("stripe-key", re.compile(_at_start("[rsp]k_(?:live|test)_", 8) + r"[A-Za-z0-9]{16,}+")),
    ("google-key", re.compile(_at_start("AIza", 4) + r"[0-9A-Za-z_-]{35}+")),
    ("npm-token", re.compile(_at_start("npm_", 4) + r"[A-Za-z0-9]{36,}+")),
    ("jwt", re.compile(_at_start("eyJ", 3)
                       + r"[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+")),
    ("url-credentials", re.compile(r"(?P<keep>://)[^/\s:@]++:[^/\s@]++(?=@)")),
    ("sas-signature", re.compile(r"(?P<keep>[?&]sig=)[^&\s\"']++")),
    ("bearer", re.compile(
        "(?i)(?:" + _at_start("bearer", 6, "A-Za-z0-9_") + "|" + _at_start("basic", 5, "A-Za-z0-9_")
        + r")[ \t]++[A-Za-z0-9._~+/=-]{8,}+|" + _at_start("token", 5, "A-Za-z0-9_")
        + r"[ \t]++[A-Za-z0-9._~+/=-]{16,}+")),
]  # fmt: skip
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]*+")

# NAME=value / NAME: value / "name": "value" (the name is checked by `secret_name`)
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.\-])\\?[\"']?(?P<name>[A-Za-z][A-Za-z0-9_.\-]{0,119}+)\\?[\"']?"
    r"(?P<sep>[ \t]*+[:=][ \t]*+)"
)
# --password X, --password=X, --api-key X, -u user:pass (curl), --user user:pass
_FLAG = re.compile(r"-(?<![A-Za-z0-9_-]-)-?(?P<name>[A-Za-z][A-Za-z0-9_-]{0,60}+)(?:=|[ \t]++)")
# `with password X`, `.netrc`: `login bob password X`, `password is X`
_PROSE = re.compile(
    r"(?i)(?:"
    + _at_start("password", 8, "A-Za-z0-9_.-")
    + "|"
    + _at_start("passwd", 6, "A-Za-z0-9_.-")
    + "|"
    + _at_start("passphrase", 10, "A-Za-z0-9_.-")
    + r")(?:[ \t]++(?:is|was|of))?[ \t]++"
    r"(?!(?:for|to|is|and|or|the|a|an|of|in|on|was|not|with|authentication|failed|required|"
    r"incorrect|invalid|must|should)(?![A-Za-z0-9_]))(?P<value>[^\s\"',;]{3,}+)"
)
# mysql -pPASS, sshpass -p PASS, docker login -p PASS (only on a line that runs one of them:
# `ssh -p2222` keeps its port)
_CLI_P = re.compile(
    r"-p(?<![A-Za-z0-9_-]..)(?:[ \t]++(?P<quoted>\"[^\"\n]{1,200}+\"|'[^'\n]{1,200}+')|"
    r"[ \t]*+(?P<value>[^\s\"'-][^\s\"']*+))"
)
_CLI_P_CONTEXT = re.compile(
    r"(?i)\b(?:mysql|mariadb|sshpass|(?:docker|podman|nerdctl)[ \t]++login)(?![A-Za-z0-9_])|"
    r"\bmysql(?:dump|admin|import|sh)\b"
)
_AUTH_SCHEMES = frozenset(
    "bearer basic token digest negotiate ntlm apikey aws4-hmac-sha256".split()
)


_CLOSERS = {")": "(", "]": "[", "}": "{"}


def _value_end(text: str, start: int) -> int:
    """Where the value that starts at `start` ends: a quoted string (on its line, at most
    2,000 characters; `\\"...\\"` inside escaped JSON too), else the bare token up to a space
    or a quote (`hun,ter22pw` whole), without the `,;})]` that close what holds it."""
    n = len(text)
    if start >= n:
        return start
    quote = text[start]
    if quote == "\\" and text[start + 1 : start + 2] in ('"', "'"):
        quote = text[start : start + 2]  # escaped JSON: \"value\"
    if quote in ('"', "'", '\\"', "\\'"):
        limit = min(n, start + 2000)
        eol = text.find("\n", start + 1, limit)
        stop = eol if eol != -1 else limit
        close = text.find(quote, start + len(quote), stop)
        while len(quote) == 1 and close != -1 and text[close - 1] == "\\":  # escaped quote
            close = text.find(quote, close + 1, stop)
        if close != -1:
            return close + len(quote)
        start += len(quote)
    end = start
    limit = min(n, start + 2000)
    while end < limit and text[end] not in " \t\r\n\"'":
        end += 1
    opened = {c for c in "([{" if c in text[start:end]}  # once: no slice per character
    while end > start and (
        text[end - 1] in ",;\\"
        or (text[end - 1] in _CLOSERS and _CLOSERS[text[end - 1]] not in opened)
    ):
        end -= 1
    return end


def _substitute_values(text: str, pattern: re.Pattern[str], decide, kind: str) -> str:
    """Replace the value after each match of `pattern` that `decide(match)` accepts."""
    out: list[str] = []
    pos = 0
    search_from = 0
    n = len(text)
    while search_from < n:
        m = pattern.search(text, search_from)
        if m is None:
            break
        start = m.end()
        if not decide(m, text):
            search_from = m.end() if m.end() > m.start() else m.start() + 1
            continue
        end = _value_end(text, start)
        value = text[start:end]
        bare = value.strip("\"'\\")
        if bare.lower() in _AUTH_SCHEMES and end < n and text[end] in " \t":
            end = _value_end(text, end + 1)  # `Authorization: Bearer <token>`
        elif m.groupdict().get("name", "").lower().replace("-", "") in ("cookie", "setcookie"):
            eol = text.find("\n", start, min(n, start + 4000))
            end = eol if eol != -1 else min(n, start + 4000)
        value = text[start:end]
        if (
            len(bare) < 4
            or _placeholder(value)
            or (m.group("name").lower() == "pwd" and bare.startswith(("/", "~")))
        ):
            search_from = max(end, m.end())
            continue
        quote = value[:2] if value[:2] in ('\\"', "\\'") else value[:1]
        quote = quote if quote in ('"', "'", '\\"', "\\'") and value.endswith(quote) else ""
        out.append(text[pos:start])
        out.append(f"{quote}[REDACTED:{kind}]{quote}")
        pos = search_from = end
    out.append(text[pos:])
    return "".join(out)


def _orphan_pem_ends(text: str) -> str:
    """The tail of a private key whose BEGIN line was cut off: the base64 lines before an
    END line with no BEGIN (what is left of the block after a cut)."""
    if "-----END" not in text:
        return text
    out: list[str] = []
    pos = 0
    for m in _PEM_END.finditer(text):
        start = m.start()
        for _ in range(200):  # walk back over the base64 lines, one at a time
            if start <= pos or text[start - 1] != "\n":
                break
            line_start = max(text.rfind("\n", pos, start - 1) + 1, pos)
            line = text[line_start : start - 1].strip()
            if not line or _BASE64_LINE.fullmatch(line) is None:
                break
            start = line_start
        out.append(text[pos:start] + "[REDACTED:private-key]")
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def redact(text: str) -> str:
    """`text` with every secret it seems to hold replaced by `[REDACTED:<kind>]`. A text that
    is a JSON object or array is redacted on its structure too (`redact_value`)."""
    if len(text) < 4:  # too short to hold a secret
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
    for kind, pattern in _PATTERNS:
        keep = "\\g<keep>" if "keep" in pattern.groupindex else ""
        text = pattern.sub(f"{keep}[REDACTED:{kind}]", text)
    text = _orphan_pem_ends(text)
    text = _substitute_values(
        text, _ASSIGNMENT, lambda m, _: secret_name(m.group("name").strip(".-")), "secret"
    )
    if "-" in text:
        text = _substitute_values(text, _FLAG, _flag_names_secret, "secret")
    if "ass" in text or "ASS" in text:
        text = _PROSE.sub(lambda m: _prose_password(m, text), text)
    if "-p" in text:
        text = _cli_passwords(text)
    return text


_PROSE_LEAD = re.compile(r"(?i)(?:\b(?:with|using|login[ \t]++\S{1,100}+)[ \t]++)$")


def _prose_password(m: re.Match[str], text: str) -> str:
    """`password X` in prose: X is taken for a password when it does not read like a word
    (a digit, a capital, a symbol), or when `with`/`using`/netrc's `login NAME` leads in."""
    value = m.group("value")
    lead = text[max(0, m.start() - 120) : m.start()]
    if value.isalpha() and value.islower() and not _PROSE_LEAD.search(lead):
        return m.group(0)  # `the password prompt`, `password reset`
    return m.group(0)[: m.start("value") - m.start()] + "[REDACTED:password]"


def _flag_names_secret(m: re.Match[str], text: str) -> bool:
    name = m.group("name")
    if name in ("u", "user"):  # curl -u user:pass
        end = _value_end(text, m.end())
        return ":" in text[m.end() : end]
    return secret_name(name)


def _cli_passwords(text: str) -> str:
    """`-pPASS` / `-p PASS` where mysql, sshpass or docker login runs before it on its line
    (within 500 characters). The programs are found once per line, each `-p` looks its
    nearest one up (a bisection): linear in the text, however many `-p` it holds."""
    import bisect

    out: list[str] = []
    for line in text.splitlines(keepends=True):
        if "-p" not in line:
            out.append(line)
            continue
        ends = [m.end() for m in _CLI_P_CONTEXT.finditer(line)]
        if not ends:
            out.append(line)
            continue

        def sub(m: re.Match[str], ends: list[int] = ends) -> str:
            i = bisect.bisect_right(ends, m.start())
            if not i or m.start() - ends[i - 1] > 500:
                return m.group(0)
            value = m.group("quoted") or m.group("value")
            if _placeholder(value):
                return m.group(0)
            return (
                m.group(0)[: m.start("quoted" if m.group("quoted") else "value") - m.start()]
                + "[REDACTED:password]"
            )

        out.append(_CLI_P.sub(sub, line))
    return "".join(out)


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
        _placeholder(value) or (key.lower() == "pwd" and value.startswith(("/", "~")))
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
    "mysql mysqldump mysqladmin mysqlimport mysqlsh mariadb sshpass".split()
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
        if context and text.startswith("-p") and len(text) > 2 and not _placeholder(text[2:]):
            out[i] = item[: item.index("-p") + 2] + "[REDACTED:password]"
        elif m is not None and nxt is not None and not _placeholder(nxt):
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
