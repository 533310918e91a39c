"""The secret shapes written by hand: known token shapes, names that say secret, command lines
and prose. Each detector reports `Finding`s (`intake.findings`); `intake.redact` runs them with
the rules of the data file (`intake.rules`), the key pairs (`intake.pairs`) and the encoded
runs (`intake.encoded`).

- Tokens (`tokens`): cloud keys, API keys, personal access tokens, Hugging Face and Slack
  tokens, Slack webhooks, JWTs, private key blocks (and the tail of one whose BEGIN line was
  cut off), credentials in URLs, `Authorization` headers, Azure `AccountKey=`.
- Names (`assignments`): `NAME=value` / `NAME: value` / `"name": "value"` where the name says
  secret (`secret_name`), command-line secrets (`--password X`, `curl -u user:pass`, `mysql
  -pPASS`, `twine upload -p X`) and prose (`... with password X`, `.netrc`'s `password X`).

Every pattern runs in linear time: each starts only at the boundary of its own character class
(a look-behind) and its repeats are possessive, so no input (a megabyte of hex, a run of
`token=token=...`) makes the engine backtrack.

Standard library only, cheap to import: the hook command imports it.
"""

from __future__ import annotations

import bisect
import functools
import re

from memory_agent.intake.findings import Finding

__all__ = ["assignments", "placeholder", "secret_name", "tokens", "AWS_KEY_ID", "CLI_P_CONTEXT"]

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
    r"(?i)[\"']?(?:\[REDACTED(?::[a-z0-9-]+)?\]|\*++|<[^<>\n]{0,80}>|\$\{?\w{1,80}\}?|x++|"
    r"none|null|nil|true|false|undefined|redacted|)[\"']?"
)


def placeholder(value: str) -> bool:
    """A value that stands for a secret without being one: `<token>`, `${TOKEN}`, `****`,
    `xxxx`, null, a bool, what redaction already put there."""
    return len(value) <= 90 and _PLACEHOLDER.fullmatch(value.strip()) is not None


# -- token shapes -------------------------------------------------------------------------
def _at_start(prefix: str, width: int, cls: str = "A-Za-z0-9_-") -> str:
    """`prefix` (`width` characters) where a token-like run starts. The look-behind comes
    after the literal, so the engine scans for the literal (fast) instead of trying the
    look-behind at every position."""
    return f"{prefix}(?<![{cls}]{'.' * width})"


AWS_KEY_ID = re.compile(
    _at_start("(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)", 4, "A-Za-z0-9") + r"[0-9A-Z]{16}(?![A-Za-z0-9])"
)

# A pattern with a group `keep` keeps it and redacts the rest of the match. Unformatted
# (fmt: skip): each rule is a name and its regex on one or two lines, in columns; formatted,
# every regex concatenation is split across five lines and the list is hard to scan.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)"
        r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)")),
    ("aws-key", AWS_KEY_ID),
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
    ("url-credentials", re.compile(r"(?P<keep>://[^/\s:@]++:)[^/\s@]++(?=@)")),
    ("sas-signature", re.compile(r"(?P<keep>[?&]sig=)[^&\s\"']++")),
    ("bearer", re.compile("(?i)(?P<keep>(?:" + _at_start("bearer", 6, "A-Za-z0-9_") + "|"
                          + _at_start("basic", 5, "A-Za-z0-9_") + r")[ \t]++)"
                          + r"[A-Za-z0-9._~+/=-]{8,}+")),
    ("bearer", re.compile("(?i)(?P<keep>" + _at_start("token", 5, "A-Za-z0-9_")
                          + r"[ \t]++)[A-Za-z0-9._~+/=-]{16,}+")),
]  # fmt: skip
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/=]*+")


def tokens(text: str) -> list[Finding]:
    """The known token shapes in `text`, and the tail of a private key cut off its BEGIN."""
    out: list[Finding] = []
    for kind, pattern in _PATTERNS:
        keep = "keep" in pattern.groupindex
        for m in pattern.finditer(text):
            start = m.end("keep") if keep else m.start()
            out.append(Finding(start, m.end(), kind, text[start : m.end()]))
    if "-----END" in text:
        out.extend(_orphan_pem_ends(text))
    return out


def _orphan_pem_ends(text: str) -> list[Finding]:
    """The tail of a private key whose BEGIN line was cut off: the base64 lines before an
    END line (what is left of the block after a cut)."""
    out: list[Finding] = []
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
        out.append(Finding(start, m.end(), "private-key", text[start : m.end()]))
        pos = m.end()
    return out


# -- names, flags, prose, command lines ---------------------------------------------------
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
_PROSE_LEAD = re.compile(r"(?i)(?:\b(?:with|using|login[ \t]++\S{1,100}+)[ \t]++)$")
# mysql -pPASS, sshpass -p PASS, docker login -p PASS, twine upload -p PASS (only on a line
# that runs one of them: `ssh -p2222` keeps its port)
_CLI_P = re.compile(
    r"-p(?<![A-Za-z0-9_-]..)(?:[ \t]++(?P<quoted>\"[^\"\n]{1,200}+\"|'[^'\n]{1,200}+')|"
    r"[ \t]*+(?P<value>[^\s\"'-][^\s\"']*+))"
)
CLI_P_CONTEXT = re.compile(
    r"(?i)\b(?:mysql|mariadb|sshpass|twine|(?:docker|podman|nerdctl)[ \t]++login)"
    r"(?![A-Za-z0-9_])|\bmysql(?:dump|admin|import|sh)\b"
)
_AUTH_SCHEMES = frozenset(
    "bearer basic token digest negotiate ntlm apikey aws4-hmac-sha256".split()
)
_CLOSERS = {")": "(", "]": "[", "}": "{"}


def assignments(text: str) -> list[Finding]:
    """Secrets named by what comes before them: `NAME=value` where the name says secret,
    `--password X`, `curl -u user:X`, `password X` in prose, `mysql -pX`."""
    out = _values(
        text,
        _ASSIGNMENT,
        lambda m, _: secret_name(m.group("name").strip(".-")) and not _go_test_verdict(m, text),
    )
    if "-" in text:
        out.extend(_values(text, _FLAG, _flag_names_secret))
    if "ass" in text or "ASS" in text:
        for m in _PROSE.finditer(text):
            if _prose_password(m, text):
                out.append(Finding(m.start("value"), m.end(), "password", m.group("value")))
    if "-p" in text:
        out.extend(_cli_passwords(text))
    return out


def _go_test_verdict(m: re.Match[str], text: str) -> bool:
    """`--- PASS: TestName (0.00s)`: `go test -v`'s verdict on a test, not a password (on
    real sessions, 2,028 of 2,090 redactions an import counted were test names)."""
    return m.group("name") == "PASS" and text[max(0, m.start() - 4) : m.start()] == "--- "


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


def _values(text: str, pattern: re.Pattern[str], decide) -> list[Finding]:
    """The value after each match of `pattern` that `decide(match, text)` accepts (inside
    its quotes, if it has them), unless it is a placeholder."""
    out: list[Finding] = []
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
        bare = text[start:end].strip("\"'\\")
        if bare.lower() in _AUTH_SCHEMES and end < n and text[end] in " \t":
            end = _value_end(text, end + 1)  # `Authorization: Bearer <token>`
        elif m.groupdict().get("name", "").lower().replace("-", "") in ("cookie", "setcookie"):
            eol = text.find("\n", start, min(n, start + 4000))
            end = eol if eol != -1 else min(n, start + 4000)
        value = text[start:end]
        if (
            len(bare) < 4
            or placeholder(value)
            or (m.group("name").lower() == "pwd" and bare.startswith(("/", "~")))
        ):
            search_from = max(end, m.end())
            continue
        quote = value[:2] if value[:2] in ('\\"', "\\'") else value[:1]
        quote = quote if quote in ('"', "'", '\\"', "\\'") and value.endswith(quote) else ""
        if quote and len(value) > 2 * len(quote):
            start, end = start + len(quote), end - len(quote)
        out.append(Finding(start, end, "secret", text[start:end]))
        search_from = max(end, m.end())
    return out


def _prose_password(m: re.Match[str], text: str) -> bool:
    """`password X` in prose: X is taken for a password when it does not read like a word
    (a digit, a capital, a symbol), or when `with`/`using`/netrc's `login NAME` leads in."""
    value = m.group("value")
    lead = text[max(0, m.start() - 120) : m.start()]
    return not (value.isalpha() and value.islower() and not _PROSE_LEAD.search(lead))


def _flag_names_secret(m: re.Match[str], text: str) -> bool:
    name = m.group("name")
    if name in ("u", "user"):  # curl -u user:pass
        end = _value_end(text, m.end())
        return ":" in text[m.end() : end]
    return secret_name(name)


def _cli_passwords(text: str) -> list[Finding]:
    """`-pPASS` / `-p PASS` where mysql, sshpass, twine or docker login runs before it on its
    line (within 500 characters). The programs are found once per line, each `-p` looks its
    nearest one up (a bisection): linear in the text, however many `-p` it holds."""
    out: list[Finding] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        base, pos = pos, pos + len(line)
        if "-p" not in line:
            continue
        ends = [m.end() for m in CLI_P_CONTEXT.finditer(line)]
        if not ends:
            continue
        for m in _CLI_P.finditer(line):
            i = bisect.bisect_right(ends, m.start())
            if not i or m.start() - ends[i - 1] > 500:
                continue
            group = "quoted" if m.group("quoted") else "value"
            if placeholder(m.group(group)):
                continue
            start, end = m.span(group)
            out.append(Finding(base + start, base + end, "password", m.group(group)))
    return out
