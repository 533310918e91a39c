"""The judgments of `benchmarks/sessions.py`, derived from the sessions themselves (never
written by hand): at each prompt, which EARLIER sessions a memory should bring back.

The input is the journal a replay wrote (every turn through the hook path), read back as
turns: a prompt, its time, and the steps of its turn (each tool record with its time). A
prompt P of session S at time t has these relevant sessions (S' != S):

(a) failure   P's turn hits a failure - a shell step that failed - with signature F, and S'
              hit F before t and then resolved it before t (a later shell step of S' with
              the same command succeeded). F is the linter's rule when the failure's text
              names one (`file.go:12:3: ... (errcheck)`: `lint errcheck`; `app.py:3:1: F401
              ...`: `lint F401`), else the normalised command (`command_key`: `go test`, `cd
              DIR &&`, `timeout N`, `VAR=value` prefixes dropped) plus the first error line
              (`error_signature`) with numbers, hex ids and temporary paths masked.
(b) files     P's turn edits a file (Edit, MultiEdit, Write, NotebookEdit, apply_patch, ...)
              that S' edited before t; paths are taken relative to each session's own working
              folder, so clones and worktrees of the repository agree.
(c) instruction  P is near-identical to a prompt of S' made before t: both at least 6 words,
              and their word sets overlap by Jaccard >= 0.8. Dropped first: a prompt
              near-identical to an earlier prompt of its own session (a duplicate within a
              session), system-generated text (starting with `<`, "Operation stopped by hook",
              "Stop hook feedback", "Caveat:", "This session is being continued"), and
              automated loops: prompts whose near-identical copies span more than 5 sessions.

A prompt is judged under a rule when that rule gives it at least one relevant session; a
prompt's overall relevant set is the union of its rules'. A system's answer at P (the
injected context, a search, a baseline) counts as a hit when it holds an episode of a
relevant session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.capture.episodes import EDIT_TOOLS, Step, command_key, step_of
from memory_agent.intake.journal import read_session, sessions

SHELL_TOOLS = {"Bash", "bash", "shell", "exec_command", "local_shell", "run_command"}
RULES = ("failure", "files", "instruction")
MIN_WORDS = 6
NEAR = 0.8
LOOP_SESSIONS = 5
SYSTEM_PROMPTS = (
    "<",
    "operation stopped by hook",
    "stop hook feedback",
    "caveat:",
    "this session is being continued",
)
_LINT_LOCATION = re.compile(r"^\S+\.\w+:\d+(?::\d+)?:")
_LINT_NAMED = re.compile(r"\(([a-z][a-z0-9_-]{2,30})\)\s*$")  # golangci-lint: (errcheck)
_LINT_CODE = re.compile(r"\b([A-Z]{1,3}\d{3,4})\b")  # ruff, flake8, pylint, eslint-ish codes
_NUM = re.compile(r"\d+")
_HEX = re.compile(r"\b[0-9a-f]{7,}\b", re.I)
_TMP = re.compile(r"(/tmp|/var/folders|/private/var)/\S*")
_WORDS = re.compile(r"[\w./-]+")
_PREFIX = re.compile(
    r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*|timeout\s+\S+\s+|env\s+|[A-Z_][A-Z0-9_]*=\S*\s+)"
)


@dataclass
class Turn:
    session: str  # the journal's session name
    n: int
    ts: float
    prompt: str
    cwd: str = ""  # the session's own working folder (before the replay's mapping)
    steps: list[tuple[float, Step, dict[str, Any]]] = field(default_factory=list)


def read_turns(journal_dir: Path, cwds: dict[str, str]) -> list[Turn]:
    """Every turn of the journal, in time order. `cwds`: session name -> its own folder."""
    turns: list[Turn] = []
    for name, paths in sessions(journal_dir).items():
        current: Turn | None = None
        n = 0
        for record in read_session(paths):
            ts = float(record.get("ts") or 0.0)
            if record.get("event") == "prompt":
                n += 1
                current = Turn(name, n, ts, str(record.get("prompt") or ""), cwds.get(name, ""))
                turns.append(current)
            elif record.get("event") == "tool" and current is not None:
                current.steps.append((ts, step_of(record), record))
    turns.sort(key=lambda t: (t.ts, t.session, t.n))
    return turns


def shell_command(command: str) -> str:
    """The command without `cd DIR &&`, `timeout N`, `VAR=value` in front."""
    text = command.strip()
    while True:
        stripped = _PREFIX.sub("", text, count=1)
        if stripped == text:
            return text
        text = stripped


def lint_rule(text: str) -> str | None:
    """The linter rule a failure's text names on a `file:line:col:` line, if any."""
    for line in text.splitlines()[:200]:
        line = line.strip()
        if not _LINT_LOCATION.match(line):
            continue
        named = _LINT_NAMED.search(line)
        if named:
            return named.group(1)
        code = _LINT_CODE.search(line[line.index(": ") + 2 :] if ": " in line else line)
        if code:
            return code.group(1)
    return None


def mask(line: str) -> str:
    return _NUM.sub("N", _HEX.sub("H", _TMP.sub("TMP", line.strip().lower())))[:160]


def failure_signature(step: Step, record: dict[str, Any]) -> str | None:
    if step.ok or step.tool not in SHELL_TOOLS:
        return None
    text = str(record.get("error") or "")
    output = record.get("output")
    text += "\n" + (output if isinstance(output, str) else str(output or ""))
    rule = lint_rule(text)
    if rule:
        return f"lint {rule}"
    return f"{command_key(shell_command(step.target))} | {mask(step.error)}"


def command_of(step: Step) -> str:
    return command_key(shell_command(step.target))


def edited_files(step: Step, record: dict[str, Any], cwd: str) -> list[str]:
    if not step.is_edit and step.tool not in EDIT_TOOLS:
        return []
    data = record.get("input")
    paths: list[str] = []
    if isinstance(data, dict):
        for key in ("file_path", "filePath", "path", "notebook_path"):
            if isinstance(data.get(key), str):
                paths.append(data[key])
        patch = data.get("command") or data.get("patch") or data.get("input")
        if isinstance(patch, str) and "*** " in patch:
            paths += re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", patch, re.M)
    out = []
    for path in paths:
        path = path.strip()
        if cwd and path.startswith(cwd.rstrip("/") + "/"):
            path = path[len(cwd.rstrip("/")) + 1 :]
        out.append(path.lstrip("./") if not path.startswith("/") else path)
    return out


def words(prompt: str) -> frozenset[str]:
    return frozenset(w.lower().strip("./-") for w in _WORDS.findall(prompt) if w.strip("./-"))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


@dataclass
class Judgments:
    relevant: dict[tuple[str, int], dict[str, set[str]]]  # (session, n) -> rule -> sessions
    dropped: dict[str, int]  # prompts left out of rule (c), by reason


def derive(turns: list[Turn]) -> Judgments:
    """The relevant earlier sessions of every prompt, by rule."""
    relevant: dict[tuple[str, int], dict[str, set[str]]] = {}

    def add(turn: Turn, rule: str, found: set[str]) -> None:
        if found:
            relevant.setdefault((turn.session, turn.n), {})[rule] = found

    # (a) failures resolved: signature -> [(session, time resolved)]
    failures = _resolved_failures(turns)
    # (b) files: path -> [(session, time edited)]
    edits: dict[str, list[tuple[str, float]]] = {}
    for turn in turns:
        for ts, step, record in turn.steps:
            for path in edited_files(step, record, turn.cwd):
                edits.setdefault(path, []).append((turn.session, ts))
    kept, dropped = _instructions(turns)
    for turn in turns:
        signatures = {failure_signature(s, r) for _, s, r in turn.steps} - {None}
        earlier = [(s, when) for sig in signatures for s, when in failures.get(sig, [])]
        add(turn, "failure", {s for s, when in earlier if s != turn.session and when < turn.ts})
        files = {p for _, s, r in turn.steps for p in edited_files(s, r, turn.cwd)}
        earlier = [(s, when) for p in files for s, when in edits.get(p, [])]
        add(turn, "files", {s for s, when in earlier if s != turn.session and when < turn.ts})
        mine = kept.get((turn.session, turn.n))
        if mine is not None:
            alike = {
                other.session
                for other, w in kept.values()
                if other.session != turn.session
                and other.ts < turn.ts
                and jaccard(mine[1], w) >= NEAR
            }
            add(turn, "instruction", alike)
    return Judgments(relevant, dropped)


def _resolved_failures(turns: list[Turn]) -> dict[str, list[tuple[str, float]]]:
    """signature -> (session, when it was resolved) for each failure a session resolved: a
    later shell step of the same session with the same command that succeeded."""
    by_session: dict[str, list[tuple[float, Step, dict]]] = {}
    for turn in turns:
        by_session.setdefault(turn.session, []).extend(turn.steps)
    out: dict[str, list[tuple[str, float]]] = {}
    for session, steps in by_session.items():
        steps.sort(key=lambda x: x[0])
        for i, (_, step, record) in enumerate(steps):
            sig = failure_signature(step, record)
            if sig is None:
                continue
            command = command_of(step)
            for later_ts, later, _ in steps[i + 1 :]:
                if later.ok and later.tool in SHELL_TOOLS and command_of(later) == command:
                    out.setdefault(sig, []).append((session, later_ts))
                    break
    return out


def _instructions(turns: list[Turn]):
    """The prompts rule (c) keeps: {(session, n): (turn, words)}, and the drops by reason."""
    dropped = {"short": 0, "system": 0, "same_session": 0, "loop": 0}
    candidates: list[tuple[Turn, frozenset[str]]] = []
    seen_in: dict[str, list[frozenset[str]]] = {}
    for turn in turns:
        text = turn.prompt.strip().lower()
        if text.startswith(SYSTEM_PROMPTS):
            dropped["system"] += 1
            continue
        w = words(turn.prompt)
        if len(w) < MIN_WORDS:
            dropped["short"] += 1
            continue
        earlier = seen_in.setdefault(turn.session, [])
        if any(jaccard(w, e) >= NEAR for e in earlier):
            dropped["same_session"] += 1
            continue
        earlier.append(w)
        candidates.append((turn, w))
    kept: dict[tuple[str, int], tuple[Turn, frozenset[str]]] = {}
    for turn, w in candidates:
        spread = {t.session for t, x in candidates if jaccard(w, x) >= NEAR}
        if len(spread) > LOOP_SESSIONS:
            dropped["loop"] += 1
            continue
        kept[(turn.session, turn.n)] = (turn, w)
    return kept, dropped
