"""Past sessions as the hook calls they would have been: the model every reader of an agent's
own records fills (`capture.transcript_formats` for Claude Code and Codex,
`capture.opencode_store`, `capture.aider_history`; found by `capture.session_sources`).

A `PastSession` is one session's id, client, working directory and turns; a `PastTurn` is
a prompt, the tool calls with their outcome (`Call`: the hook event and payload it would have
been), the final answer, each with the time the source gave it. `hook_calls` turns a session
into the hook calls (event, payload, time) the live hooks would have received, so the
importer (`capture.session_import`) writes the journal through the same record of a hook call
(`capture.records`) and the same redaction as a live capture.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Call", "PastSession", "PastTurn", "hook_calls"]


@dataclass
class Call:
    """One tool call as its hook would have carried it: `event` is `tool`, `tool-failure` or
    `denied`; `payload` holds tool_name, tool_input, tool_use_id and tool_response, error,
    reason or is_interrupt."""

    event: str
    payload: dict[str, Any]
    ts: float
    exit_code: int | None = None  # a Codex command's exit code, read from its rollout


@dataclass
class PastTurn:
    prompt: str
    ts: float
    calls: list[Call] = field(default_factory=list)
    answer: str = ""
    answer_ts: float = 0.0


@dataclass
class PastSession:
    client: str  # claude-code, codex, opencode, aider
    session_id: str
    source: Path  # the file it was read from
    cwd: str = ""
    turns: list[PastTurn] = field(default_factory=list)

    @property
    def started(self) -> float:
        return self.turns[0].ts if self.turns else 0.0

    @property
    def ended(self) -> float:
        if not self.turns:
            return 0.0
        last = self.turns[-1]
        return max([last.ts, last.answer_ts, *(c.ts for c in last.calls)])


def hook_calls(session: PastSession, turns: range) -> Iterator[tuple[int, str, dict, float, Any]]:
    """(turn index, event, payload, time, exit code) of the hook calls a live capture of
    `turns` would have made: a start before the first turn, then per turn its prompt, its
    tool calls and its Stop with the final answer (the order of a live session). The exit
    code is a Codex command's, read from its rollout (None otherwise)."""
    base: dict[str, Any] = {"session_id": session.session_id}
    if session.cwd:
        base["cwd"] = session.cwd
    for n in turns:
        turn = session.turns[n]
        if n == 0:
            yield n, "session-start", {**base, "source": "startup"}, turn.ts, None
        yield n, "prompt", {**base, "prompt": turn.prompt}, turn.ts, None
        for call in turn.calls:
            yield n, call.event, {**base, **call.payload}, call.ts, call.exit_code
        end = max([turn.ts, turn.answer_ts, *(c.ts for c in turn.calls)])
        yield n, "stop", {**base, "last_assistant_message": turn.answer}, end, None
