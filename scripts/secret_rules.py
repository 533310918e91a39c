"""Convert gitleaks' default rules (`config/gitleaks.toml`) into the data file memory-agent ships
(`memory_agent/intake/secret_rules.json`), checking that each rule runs in linear time in
Python's `re`.

    .venv/bin/python scripts/secret_rules.py GITLEAKS_TOML --version v8.30.1 --commit SHA \
        [--licence LICENSE] [--out memory_agent/intake/secret_rules.json] [--size 1000000]

gitleaks (MIT, https://github.com/gitleaks/gitleaks) writes its rules for Go's RE2, which never
backtracks; Python's `re` does. Each rule is translated (a flag group in mid-pattern such as
`SG\\.(?i)[a-z]...` scoped to the rest of its group, `\\z` as `\\Z`, a `[` inside a class
escaped, a POSIX class spelled out), the `[\\w.-]{0,50}?` that leads the keyword rules
dropped (it only widens the match to the whole variable name, and is tried at every position
of a text), the gap between a keyword and its `=` made possessive (the same matches: the
operator is in neither class), a rule that cannot be made linear that way rewritten by hand
(`REWRITTEN`, each with why), and compiled with `re.ASCII` (RE2's `\\w`, `\\b` and `(?i)` are
ASCII). A shape gitleaks has no rule for is added from `SUPPLEMENT`, marked with where its
format is documented. Then every rule runs on adversarial
inputs - each keyword repeated, each keyword followed by `=` or by a long run of the secret's
characters, long runs of letters, digits and token characters - at `--size` characters, and at
a quarter and a half of it: a rule slower than `--limit` seconds at the full size, or whose time
more than triples at each doubling of the input (linear doubles, quadratic quadruples), is
dropped with the input that showed it. The dropped rules and the reasons are written into the
data file, beside the rules kept.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "memory_agent" / "intake" / "secret_rules.json"

# Rules left out on purpose, with why (the adversarial check adds its own).
DROPPED = {
    "generic-api-key": "a name that says secret followed by a value: intake's own name rule "
    "(`secret_name`, with its placeholders) covers it; gitleaks' stopwords are tuned for code",
    "curl-auth-header": "`.*?` over up to five lines is not linear in Python's re; the hand "
    "rules (`Authorization:` values, Bearer/Basic/Token) cover the header",
    "curl-auth-user": "`.*` over up to five lines is not linear in Python's re; the hand rule "
    "`curl -u user:pass` covers it",
}
# Shapes gitleaks has no rule for, each with where its format is documented: kept in the data
# file beside gitleaks' rules, through the same linear check, marked with their origin.
SUPPLEMENT = [
    {
        "id": "docker-hub-pat",
        "regex": r"\b(dckr_pat_[\w-]{27})(?![\w-])",
        "keywords": ["dckr_pat_"],
        "entropy": 3.0,
        "origin": "not in gitleaks v8.30.1: Docker Hub's personal access tokens, `dckr_pat_` "
        "and 27 characters (Docker's documentation; SonarSource's rule S6782 matches the same)",
    },
]
_POSIX = {
    "alnum": "A-Za-z0-9",
    "alpha": "A-Za-z",
    "digit": "0-9",
    "xdigit": "0-9A-Fa-f",
    "upper": "A-Z",
    "lower": "a-z",
    "space": "\\s",
    "word": "\\w",
}
_LEAD = "[\\w.-]{0,50}?"
# between the keyword and its `=`/`:`: tried from every keyword, it backtracks 20 x 3 ways
_GAP = "(?:[ \\t\\w.-]{0,20})[\\s'\"]{0,3}"
_GAP_POSSESSIVE = "(?:[ \\t\\w.-]{0,20}+)[\\s'\"]{0,3}+"
# Rules rewritten by hand, with why: each stays what gitleaks matches, in a linear form.
REWRITTEN = {
    "hashicorp-tf-api-token": (
        r"(?i)(?<![a-z0-9])[a-z0-9]{14}\.(?-i:atlasv1)\.[a-z0-9\-_=]{60,70}",
        "the 14 characters before `.atlasv1.` start at a token boundary (a look-behind): "
        "tried at every position of a long run of letters, the rule took 2 s a megabyte",
    ),
}


def translate(regex: str) -> str:
    """An RE2 pattern as Python's `re` reads it the same way (see the module's docstring)."""
    out: list[str] = []
    stack: list[str] = []  # per open group: the flags scoped from a mid-group `(?i)`, or ""
    scoped = ""  # the flags scoped at the top level
    i, n = 0, len(regex)
    in_class = False
    while i < n:
        c = regex[i]
        if c == "\\":
            esc = regex[i : i + 2]
            out.append("\\Z" if esc == "\\z" else esc)
            i += 2
            continue
        if in_class:
            if c == "]" and out[-1] not in ("[", "[^"):
                in_class = False
            elif c == "[" and regex[i + 1 : i + 2] == ":":
                end = regex.index(":]", i + 2)
                c = _POSIX[regex[i + 2 : end]]
                i = end + 1
            elif c == "[":
                c = "\\["
            elif c in "&~|-" and regex[i + 1 : i + 2] == c and c != "-":
                c = "\\" + c
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "^":
                out.append("[^")
                i += 2
                if regex[i : i + 1] == "]":
                    out.append("\\]")
                    i += 1
                continue
            out.append("[")
            if regex[i + 1 : i + 2] == "]":
                out.append("\\]")
                i += 1
            i += 1
            continue
        m = re.match(r"\(\?([imsU-]+)\)", regex[i:])
        if m and (i > 0):
            flags = m.group(1)
            out.append(f"(?{flags}:")
            if stack:
                stack[-1] += "|" + flags if stack[-1] else flags
            else:
                scoped = (scoped + "|" + flags) if scoped else flags
            i += m.end()
            continue
        if c == "(":
            stack.append("")
            out.append(c)
        elif c == ")":
            flags = stack.pop() if stack else ""
            out.append(")" * len(flags.split("|")) if flags else "")
            out.append(")")
        elif c == "|":
            flags = stack[-1] if stack else scoped
            if flags:
                opened = flags.split("|")
                out.append(")" * len(opened) + "|" + "".join(f"(?{f}:" for f in opened))
            else:
                out.append("|")
        else:
            out.append(c)
        i += 1
    if scoped:
        out.append(")" * len(scoped.split("|")))
    return "".join(out)


def convert(rule: dict) -> tuple[dict | None, str | None]:
    """The rule as the data file holds it, or None and why it is left out."""
    rid = rule["id"]
    if rid in DROPPED:
        return None, DROPPED[rid]
    if "regex" not in rule:
        return None, "a file-name rule (no pattern for a text)"
    if "path" in rule:
        return None, f"applies only to files named like {rule['path']!r}; KB entries are Markdown"
    regex, changed = rule["regex"], []
    if rid in REWRITTEN:
        regex, why = REWRITTEN[rid]
        changed.append("rewritten: " + why)
    if _GAP in regex:
        regex = regex.replace(_GAP, _GAP_POSSESSIVE)
        changed.append(
            "the gap after the keyword possessive (the same matches: the operator after it "
            "is in neither class)"
        )
    if _LEAD in regex:
        regex = regex.replace(_LEAD, "")
        changed.append("the [\\w.-]{0,50}? before the keyword dropped")
    python = translate(regex)
    if python != regex:
        changed.append("translated from RE2")
    re.compile(python, re.ASCII)
    allow = []
    for item in rule.get("allowlists", []):
        target = item.get("regexTarget", "secret")
        if item.get("regexes") and target in ("secret", "match") and not item.get("paths"):
            allow.append({"target": target, "regexes": [translate(r) for r in item["regexes"]]})
    out = {"id": rid, "regex": python, "keywords": [k.lower() for k in rule["keywords"]]}
    if "entropy" in rule:
        out["entropy"] = rule["entropy"]
    if "secretGroup" in rule:
        out["secret_group"] = rule["secretGroup"]
    if allow:
        out["allow"] = allow
    if changed:
        out["changed"] = "; ".join(changed)
    if "origin" in rule:
        out["origin"] = rule["origin"]
    return out, None


def adversarial(rule: dict, size: int) -> dict[str, str]:
    """Inputs of `size` characters built to make a backtracking engine slow on `rule`."""
    units = {
        "letters": "a",
        "digits": "0",
        "hex": "0123456789abcdef",
        "token characters": "aZ0_-",
        "base64": "aZ0+/",
    }
    for kw in rule["keywords"][:4]:
        units[f"{kw!r} repeated"] = kw
        units[f"{kw!r}= repeated"] = kw + "="
        units[f"{kw!r}: repeated"] = kw + ": "
        units[f"{kw!r}.a repeated"] = kw + "aZ0_-.a"
    out = {name: (unit * (size // len(unit) + 1))[:size] for name, unit in units.items()}
    for kw in rule["keywords"][:4]:
        out[f"{kw!r} then a long run"] = (kw + "=" + "aZ0x" * size)[:size]
    return out


def timed(pattern: re.Pattern[str], text: str) -> float:
    start = time.perf_counter()
    for _ in pattern.finditer(text):
        pass
    return time.perf_counter() - start


def check(rule: dict, size: int, limit: float) -> str | None:
    """None when the rule is linear and fast enough on every adversarial input, else why.
    An input that takes 0.1 s or more at `size` is timed again at a quarter and a half of it,
    interleaved (best of 3 each: a loaded machine stalls at times); the rule is not linear when
    both doublings cost more than 3x (linear is 2x, quadratic 4x)."""
    pattern = re.compile(rule["regex"], re.ASCII)
    sizes = (size // 4, size // 2, size)
    inputs = [adversarial(rule, n) for n in sizes]
    for name, text in inputs[-1].items():
        if timed(pattern, text) < 0.1:
            continue
        best = [float("inf")] * 3
        for _ in range(3):
            for k in range(3):
                best[k] = min(best[k], timed(pattern, inputs[k][name]))
        if best[2] > limit or (best[1] / best[0] > 3 and best[2] / best[1] > 3):
            return (
                f"not linear in Python's re: {name} took "
                + ", ".join(f"{t:.3f} s at {n:,}" for t, n in zip(best, sizes, strict=True))
                + " characters"
            )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("toml", type=Path, help="gitleaks' config/gitleaks.toml")
    parser.add_argument("--version", required=True, help="the gitleaks release it comes from")
    parser.add_argument("--commit", required=True, help="the commit of that release")
    parser.add_argument("--licence", type=Path, help="gitleaks' LICENSE (its text is kept)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--size", type=int, default=1_000_000, help="adversarial input size")
    parser.add_argument("--limit", type=float, default=2.0, help="seconds allowed at --size")
    args = parser.parse_args(argv)
    config = tomllib.loads(args.toml.read_text())
    rules, dropped = [], []
    for rule in [*config["rules"], *SUPPLEMENT]:
        out, why = convert(rule)
        if out is not None:
            why = check(out, args.size, args.limit)
        if why is None:
            rules.append(out)
        else:
            dropped.append({"id": rule["id"], "reason": why})
        print(f"{rule['id']:48s} {'kept' if why is None else 'dropped: ' + why}", file=sys.stderr)
    glob = config.get("allowlist", {})
    data = {
        "about": (
            "Secret rules for memory-agent's redaction and push check (memory_agent.intake."
            "rules), converted from gitleaks' default configuration by scripts/secret_rules.py; "
            "do not edit by hand, convert again."
        ),
        "source": f"https://github.com/gitleaks/gitleaks/blob/{args.version}/config/gitleaks.toml",
        "version": args.version,
        "commit": args.commit,
        "licence": "MIT",
        "licence_text": args.licence.read_text() if args.licence else "MIT License",
        "linear_check": f"each rule on adversarial inputs of {args.size:,} characters: at most "
        f"{args.limit} s, and not more than 3x the time at each doubling of the input",
        "global_allow": [translate(r) for r in glob.get("regexes", [])],
        "rules": rules,
        "dropped": dropped,
    }
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(rules)} rules kept, {len(dropped)} dropped -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
