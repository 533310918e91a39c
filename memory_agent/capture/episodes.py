"""Episodes (layer L1): the turns of the journal as documents the memory can search.

An episode is one turn of one agent session: the user's prompt, the tools the agent called
(what, on what, and whether it worked - with the error's first line when it did not), and its
final answer. Its id is `episodes/<session>/<n>` (n counts the session's prompts from 1).
Episodes are a read-only source (`source: episodes`): searchable with `include_episodes`,
injected by the hooks, never written into the git knowledge base - lessons reach it only
through the gate (`memory_agent.capture.gate`).

Retention: an episode older than `journal_retention_days` leaves the index; its journal lines
stay on disk (compacted), so nothing is lost.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.clock import iso
from memory_agent.intake.journal import read_session
from ragcore import Document

__all__ = [
    "EPISODES",
    "Episode",
    "Step",
    "command_key",
    "episodes_of",
    "error_signature",
    "is_bare",
    "step_lines",
    "step_of",
]

EPISODES = "episodes"
MAX_STEPS = 40  # step lines an episode shows
# Tools whose input is bookkeeping (a to-do list, a plan, a task's status): shown by name only
NOTE_TOOLS = {"TodoWrite", "TaskCreate", "TaskUpdate", "TaskGet", "TaskList", "TaskOutput"}
NOTE_TOOLS |= {"TaskStop", "ExitPlanMode", "EnterPlanMode", "update_plan", "todowrite", "todoread"}
EDIT_TOOLS = {"Edit", "MultiEdit", "Write", "NotebookEdit", "apply_patch", "edit", "write", "patch"}
_NOISE = re.compile(r"^(exit code \d+|command failed|error:?)$", re.I)
_ERRORISH = re.compile(
    r"(error|failed|failure|exception|cannot|can't|not found|no such|denied|"
    r"invalid|unable|refused|fatal|traceback)",
    re.I,
)


@dataclass
class Step:
    tool: str
    target: str  # the command, the file or a short form of the input
    ok: bool
    error: str = ""  # the first line that says what went wrong

    @property
    def is_edit(self) -> bool:
        return self.tool in EDIT_TOOLS

    def line(self, root: str = "") -> str:
        """The step as an episode shows it: paths under `root` (the session's folder) relative
        to it, a bookkeeping tool's input (a to-do list, a task update) left out."""
        target = "" if self.tool in NOTE_TOOLS else self.target
        if root and root != "/" and root in target:
            target = target.replace(root.rstrip("/") + "/", "").replace(root, ".")
        what = f"{self.tool}: {target}" if target else self.tool
        return f"- {what} → {'ok' if self.ok else 'failed: ' + (self.error or 'error')}"


@dataclass
class Episode:
    session: str  # the journal's session name
    n: int
    started: float
    prompt: str = ""
    steps: list[Step] = field(default_factory=list)
    answer: str = ""
    cwd: str = ""
    client: str = ""
    project: str = ""  # the identity of the project it was captured in ("": none, global)

    @property
    def id(self) -> str:
        return f"{EPISODES}/{self.session}/{self.n}"

    def to_document(self, path: Path | None = None) -> Document:
        title = (self.prompt.strip().splitlines() or ["(tools without a prompt)"])[0]
        title = title if len(title) <= 120 else title[:119] + "…"
        parts = [self.prompt.strip()]
        if self.steps:
            parts.append("Steps:\n" + "\n".join(step_lines(self.steps, self.cwd)[:MAX_STEPS]))
        if self.answer.strip():
            answer = self.answer.strip()
            parts.append("Answer: " + (answer if len(answer) <= 1500 else answer[:1499] + "…"))
        meta = {
            "type": "episode",
            "status": "active",
            "created": iso(self.started),
            "session": self.session,
            "turn": self.n,
            "bare": not self.steps and not self.answer.strip(),  # a question, nothing more
            "work": bool(self.steps),  # the agent used tools: a record of work, not a chat
        }
        if self.cwd:
            meta["cwd"] = self.cwd
        if self.project:
            meta["scope"] = self.project  # another project's episodes are never injected
        return Document(
            self.id,
            title,
            "\n\n".join(p for p in parts if p),
            meta,
            EPISODES,
            str(path) if path else None,
        )


def step_lines(steps: list[Step], root: str = "") -> list[str]:
    """An episode's steps, one line each; a line that comes again (the same edit of the same
    file, the same search) is shown once, where it first came, with how many times (`×3`):
    failures with another error line stay lines of their own, in order."""
    counts: dict[str, int] = {}
    for step in steps:
        line = step.line(root)
        counts[line] = counts.get(line, 0) + 1
    return [f"{line} (×{n})" if n > 1 else line for line, n in counts.items()]


def is_bare(text: str) -> bool:
    """Is an episode's text a prompt alone (no steps, no answer)? For episodes indexed before
    their metadata said so (`bare`)."""
    return "\n\nSteps:\n" not in text and "\n\nAnswer: " not in text


def error_signature(text: str) -> str:
    """The line of an error message that says what went wrong (not "Exit code 1")."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    meaningful = [ln for ln in lines if not _NOISE.match(ln)]
    for ln in meaningful:
        if _ERRORISH.search(ln):
            return ln[:200]
    return (meaningful[0] if meaningful else (lines[0] if lines else ""))[:200]


def command_key(command: str) -> str:
    """The command without its arguments: `npm test`, `pytest`, `cargo build`."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    key: list[str] = []
    for token in tokens:
        if token.startswith("-") or "/" in token or "." in token or "=" in token or len(key) == 3:
            break
        key.append(token)
    return " ".join(key) or command.strip()[:40]


def _target(tool: str, data: Any) -> str:
    if not isinstance(data, dict):
        return str(data or "")[:200]
    for key in (
        "command",
        "cmd",
        "file_path",
        "filePath",
        "path",
        "notebook_path",
        "url",
        "pattern",
        "query",
    ):
        value = data.get(key)
        if isinstance(value, str) and value:
            return " ".join(value.split())[:200]
    return json.dumps(data, ensure_ascii=False)[:200]


def _failed(record: dict[str, Any]) -> tuple[bool, str]:
    """(ok, error) of a tool record: the hook's verdict, else an exit code in the response."""
    if record.get("ok") is False or record.get("error"):
        return False, error_signature(str(record.get("error") or record.get("output") or ""))
    output = record.get("output")
    if isinstance(output, dict):
        code = output.get("exit_code", output.get("exitCode", output.get("returncode")))
        if isinstance(code, int) and code != 0:
            return False, error_signature(str(output.get("stderr") or output.get("output") or ""))
    return True, ""


def step_of(record: dict[str, Any]) -> Step:
    """The step a tool record is in an episode: the tool, its target, whether it worked and
    the line that says what went wrong."""
    ok, error = _failed(record)
    tool = str(record.get("tool") or "tool")
    return Step(tool, _target(tool, record.get("input")), ok, error)


def episodes_of(session: str, records: list[dict[str, Any]]) -> list[Episode]:
    """The turns of one session's records, in order."""
    out: list[Episode] = []
    current: Episode | None = None
    for record in records:
        event = record.get("event")
        ts = record.get("ts") if isinstance(record.get("ts"), (int, float)) else 0.0
        if event == "prompt":
            current = Episode(
                session,
                len([e for e in out if e.n > 0]) + 1,
                ts,
                str(record.get("prompt") or ""),
                cwd=str(record.get("cwd") or ""),
                client=str(record.get("client") or ""),
                project=str(record.get("project") or ""),
            )
            out.append(current)
        elif event == "tool":
            if current is None:
                current = Episode(session, 0, ts)
                out.append(current)
            current.steps.append(step_of(record))
        elif event == "stop" and current is not None:
            current.answer = str(record.get("answer") or "")
    return out


def load_session(paths: list[Path], session: str) -> list[Episode]:
    return episodes_of(session, list(read_session(paths)))
