"""Aider's chat history (`.aider.chat.history.md`, in the folder Aider ran in) read as past
sessions (`capture.past_sessions`), from the markers Aider itself writes (`aider/io.py`:
`append_chat_history`, `user_input`, `ai_output`, the `tool_*` messages), line by line:

    # aider chat started at 2026-11-30 09:12:44     a session starts (local time)
    #### make the tests pass                        the person's input, one `#### ` per line
    > Applied edit to app/models.py                 Aider's own output, one `> ` per line
    > Running pytest -q                             a shell command it ran (asked first)
    > # Fix any errors below, if possible.          the linter's report on an edited file:
    > ## Running: flake8 ... app/models.py          the lint command, then its errors
    The model's reply ...                           any other line: the model's answer

What becomes of it:
- a session per `# aider chat started at`; its id is derived from the history file and that
  line (`aider-<hash>`), its folder is the history file's (project identity from there), and
  every record carries the session's start time: the file records no other time;
- a turn per input, the text after `#### ` (lines joined); `/ask`, `/code`, `/architect`
  and `/context` inputs are turns with their text; `/run CMD`, `!CMD` and `/test CMD` are
  shell steps of the turn (`Bash`); every other `/` command (`/add`, `/drop`, `/undo`, ...)
  is not a turn;
- `Applied edit to PATH` is an edit of PATH (`Edit`), `Failed to apply edit to PATH` a failed
  one; `Running CMD` a shell step (Aider logs no exit status: journaled as run, no output);
  a lint report a failed shell step `## Running: CMD` whose error is the report's first
  line; `/test CMD` followed by `Added N lines of output to the chat.` failed (Aider adds a
  test's output only when it exits non-zero);
- the answer is the model's last reply in the turn. Aider does not log a command's output,
  so none is journaled.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

from memory_agent.capture.past_sessions import Call, PastSession, PastTurn

__all__ = ["read_aider"]

_STARTED = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
_MODES = ("/ask", "/code", "/architect", "/context")
_SHELL = ("/run ", "/test ", "!")
_ENDS_REPORT = ("## Running: ", "Applied edit to ", "Failed to apply edit to ", "Attempt to fix ")
_ENDS_REPORT += ("Commit ", "Running ", "Added ")
_ADDED = re.compile(r"^Added \d+ lines? of output to the chat\.$")


def _started(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()  # local time


class _Reader:
    def __init__(self, path: Path):
        self.path = path
        self.session: PastSession | None = None
        self.turn: PastTurn | None = None
        self.asked: list[str] = []  # the input being read (consecutive `#### ` lines)
        self.reply: list[str] = []  # the model's reply being read
        self.lint: Call | None = None  # a lint report being read
        self.ts = 0.0
        self.calls = 0
        self.shell = ""  # how the last shell step was asked for (`/run `, `/test `, `!`)

    def new_session(self, when: str) -> PastSession | None:
        done = self.finish()
        digest = hashlib.sha256(f"{self.path.resolve()}\n{when}".encode()).hexdigest()[:24]
        self.ts = _started(when)
        self.session = PastSession("aider", f"aider-{digest}", self.path, str(self.path.parent))
        return done

    def finish(self) -> PastSession | None:
        self.end_input()
        self.end_reply()
        self.end_lint()
        done, self.session, self.turn = self.session, None, None
        return done if done is not None and done.turns else None

    def call(self, event: str, tool: str, tool_input: dict, **extra) -> Call | None:
        if self.turn is None:
            return None
        self.calls += 1
        payload = {"tool_name": tool, "tool_input": tool_input}
        payload["tool_use_id"] = f"aider-{self.calls}"
        call = Call(event, {**payload, **extra}, self.ts)
        self.turn.calls.append(call)
        return call

    def end_input(self) -> None:
        if not self.asked or self.session is None:
            self.asked = []
            return
        text = "\n".join(self.asked).strip()
        self.asked = []
        if text == "<blank>" or not text:
            return
        for prefix in _SHELL:
            if text.startswith(prefix):
                command = text[len(prefix) :].strip()
                if self.turn is None:  # a command before any prompt: a turn of its own
                    self.turn = PastTurn(text, self.ts)
                    self.session.turns.append(self.turn)
                self.call("tool", "Bash", {"command": command}, tool_response=None)
                self.shell = prefix
                return
        for mode in _MODES:
            if text == mode or text.startswith(mode + " "):
                text = text[len(mode) :].strip()
                break
        else:
            if text.startswith("/"):
                return  # /add, /drop, /undo, ...: not a turn
        if text:
            self.turn = PastTurn(text, self.ts)
            self.session.turns.append(self.turn)

    def end_reply(self) -> None:
        text = "\n".join(self.reply).strip()
        self.reply = []
        if text and self.turn is not None:
            self.turn.answer, self.turn.answer_ts = text, self.ts

    def end_lint(self) -> None:
        self.lint = None

    def said(self, text: str) -> None:
        """One of Aider's own lines (`> `)."""
        if self.lint is not None and not text.startswith(_ENDS_REPORT):
            if text and self.lint.payload.get("error") == "failed":
                self.lint.payload["error"] = text  # the report's first line
            return  # the rest of the report
        self.lint = None
        if text.startswith("Applied edit to "):
            path = text[len("Applied edit to ") :]
            self.call("tool", "Edit", {"file_path": path}, tool_response=None)
        elif text.startswith("Failed to apply edit to "):
            path = text[len("Failed to apply edit to ") :]
            self.call("tool-failure", "Edit", {"file_path": path}, error=text)
        elif text.startswith("## Running: "):
            command = {"command": text[len("## Running: ") :]}
            self.lint = self.call("tool-failure", "Bash", command, error="failed")
        elif text.startswith("Running "):
            self.call("tool", "Bash", {"command": text[len("Running ") :]}, tool_response=None)
        elif _ADDED.match(text) and self.turn is not None and self.turn.calls:
            last = self.turn.calls[-1]
            if self.shell == "/test " and last.event == "tool":
                last.event = "tool-failure"
                last.payload.pop("tool_response", None)
                last.payload["error"] = "the test command exited non-zero"


def read_aider(path: Path) -> Iterator[PastSession]:
    """The sessions of one Aider chat history, oldest first."""
    reader = _Reader(path)
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            line = raw.rstrip("\n")
            started = _STARTED.match(line)
            if started:
                done = reader.new_session(started.group(1))
                if done is not None:
                    yield done
                continue
            if reader.session is None:
                continue
            if line.startswith("#### ") or line == "####":
                reader.end_reply()
                reader.end_lint()
                reader.asked.append(line[5:].rstrip())
                continue
            reader.end_input()
            if line.startswith("> ") or line == ">":
                reader.end_reply()
                reader.said(line[2:].rstrip())
            elif line.strip():
                reader.end_lint()
                reader.reply.append(line.rstrip())
            elif reader.reply:
                reader.reply.append("")
    done = reader.finish()
    if done is not None:
        yield done
