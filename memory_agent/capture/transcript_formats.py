"""Claude Code transcripts and Codex rollouts read as past sessions (`capture.past_sessions`),
line by line (a file is never loaded whole; a torn or foreign line is skipped).

**Claude Code** (`~/.claude/projects/<project>/<session>.jsonl`; read as 2.1.x writes it,
`tests/e2e` drives 2.1.332). A turn starts at a `user` record whose content is the person's
text (not a tool result, not `isMeta`, not a sidechain's, not a compaction summary, not
"[Request interrupted by user]"; a slash command's `<command-name>`/`<command-args>` is the
command as typed, one without arguments is not a turn; `!` shell input is not a turn). The
assistant's `tool_use` blocks are matched to the `tool_result` blocks that answer them, as
the hooks saw them: a result with `is_error` is a failure (`PostToolUseFailure`, its text the
error: "Exit code 1\\n..."), "[Request interrupted by user for tool use]" an interruption,
a result carrying `toolDenialKind` (or the user's "doesn't want to proceed") a denial; any
other result is the tool's response - the record's `toolUseResult` (what `PostToolUse`
carries: Bash's stdout and stderr, an edit's file and patch), else the result's text. The
answer is the turn's last assistant text. The session id is the file's name (Claude Code
names the file after it), else its records' `sessionId`; the cwd is the records' `cwd`.

**Codex** (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`; 0.171.0 in `tests/e2e`, and the
`response_item`/`event_msg` records of earlier versions). The session is `session_meta`'s
`id` and `cwd`. A turn starts at the person's message (`item_completed` of a `UserMessage`,
or an earlier version's `event_msg` `user_message`; the same text twice in a row is one). A
tool call is a `function_call` or `custom_tool_call`, journaled when its output arrives,
named as Codex's hooks name it: a shell command (`exec_command`, `shell`, `shell_command`,
`local_shell_call`) is `Bash` with `{"command": ...}`, `apply_patch` is `apply_patch` with
`{"command": <the patch>}`, an MCP tool is `mcp__<server>__<tool>` with its arguments and the
whole `CallToolResult` as response (a failed one is a failure with its text). A command's
output is its `aggregated_output` and its exit code is read from the rollout (the
`CommandExecution` item, `exec_command_end`, or "Process exited with code N" / "Exit code: N"
in the output). The answer is `task_complete`'s `last_agent_message`, else the turn's last
assistant message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_agent.capture.past_sessions import Call, PastSession, PastTurn
from memory_agent.clock import parse_time

__all__ = ["read_claude", "read_codex", "rows"]

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_COMMAND = re.compile(r"<command-name>\s*(?P<name>[^<]*?)\s*</command-name>", re.S)
_ARGS = re.compile(r"<command-args>(?P<args>.*?)</command-args>", re.S)
_NOT_PROMPTS = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
    "<user-memory-input>",
)
_INTERRUPTED = "[Request interrupted by user for tool use]"
_REJECTED = "The user doesn't want to proceed with this tool use"
SHELL_TOOLS = {"exec_command", "shell", "shell_command", "local_shell_call", "container.exec"}
_EXITED = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


def rows(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one line at a time; other lines are skipped."""
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


def _time(value: Any, fallback: float) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / (1000.0 if value > 1e11 else 1.0)
    try:
        return parse_time(value)
    except ValueError:
        return fallback


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") in ("text", "input_text"):
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, dict) and block.get("type") == "output_text":
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(p for p in parts if p)
    return ""


# -- Claude Code ---------------------------------------------------------------------------------
def claude_prompt(content: Any) -> str | None:
    """The person's prompt in a user record's content, or None when it is not one."""
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return None
    text = _text(content).strip()
    if not text or text.startswith(_NOT_PROMPTS):
        return None
    command = _COMMAND.search(text)
    if command and text.startswith(("<command-name>", "<command-message>")):
        args = _ARGS.search(text)
        args_text = args.group("args").strip() if args else ""
        return f"{command.group('name')} {args_text}".strip() if args_text else None
    return text


def _claude_result(
    block: dict[str, Any], row: dict[str, Any], tool: tuple[str, Any] | None, ts: float
) -> Call:
    call_id = str(block.get("tool_use_id") or "")
    name, tool_input = tool if tool is not None else ("tool", None)
    payload: dict[str, Any] = {"tool_name": name, "tool_input": tool_input}
    if call_id:
        payload["tool_use_id"] = call_id
    text = _text(block.get("content")) or str(block.get("content") or "")
    if row.get("toolDenialKind") or (block.get("is_error") and _REJECTED in text[:300]):
        return Call("denied", {**payload, "reason": text[:500] or "permission denied"}, ts)
    if block.get("is_error") and text.startswith(_INTERRUPTED):
        return Call("tool-failure", {**payload, "is_interrupt": True, "error": text}, ts)
    if block.get("is_error"):
        return Call("tool-failure", {**payload, "error": text or "failed"}, ts)
    response = row.get("toolUseResult")
    return Call(
        "tool", {**payload, "tool_response": response if response is not None else text}, ts
    )


def read_claude(path: Path) -> Iterator[PastSession]:
    """The session of one Claude Code transcript (none when it holds no prompt)."""
    session = PastSession("claude-code", path.stem if _UUID.match(path.stem) else "", path)
    asked: dict[str, tuple[str, Any]] = {}  # tool_use id -> (name, input)
    turn: PastTurn | None = None
    last = 0.0
    for row in rows(path):
        kind = row.get("type")
        if kind not in ("user", "assistant") or row.get("isSidechain") is True:
            continue
        if row.get("isMeta") is True or row.get("isCompactSummary") is True:
            continue
        if not session.session_id and isinstance(row.get("sessionId"), str):
            session.session_id = row["sessionId"]
        if not session.cwd and isinstance(row.get("cwd"), str):
            session.cwd = row["cwd"]
        last = ts = _time(row.get("timestamp"), last)
        message = row.get("message") if isinstance(row.get("message"), dict) else {}
        content = message.get("content")
        if kind == "user":
            prompt = claude_prompt(content)
            if prompt is not None:
                turn = PastTurn(prompt, ts)
                session.turns.append(turn)
                continue
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    if turn is not None:
                        tool = asked.pop(str(block.get("tool_use_id")), None)
                        turn.calls.append(_claude_result(block, row, tool, ts))
            continue
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                asked[str(block.get("id"))] = (str(block.get("name") or "tool"), block.get("input"))
            elif (
                block.get("type") == "text" and turn is not None and str(block.get("text")).strip()
            ):
                turn.answer, turn.answer_ts = str(block["text"]), ts
    if session.turns and session.session_id:
        yield session


# -- Codex ---------------------------------------------------------------------------------------
def _codex_tool(name: str, namespace: Any, arguments: Any) -> tuple[str, Any]:
    """The tool's name and input as Codex's hooks give them."""
    args: Any = arguments
    if isinstance(arguments, str):
        try:
            args = json.loads(arguments)
        except ValueError:
            args = arguments
    if name in SHELL_TOOLS:
        command = args.get("cmd", args.get("command")) if isinstance(args, dict) else args
        if isinstance(command, list):
            command = (
                command[-1]
                if len(command) == 3 and command[1] in ("-lc", "-c")
                else (" ".join(str(c) for c in command))
            )
        return "Bash", {"command": str(command or "")}
    if name == "apply_patch":
        patch = args.get("input", args.get("patch")) if isinstance(args, dict) else args
        return "apply_patch", {"command": str(patch or "")}
    if isinstance(namespace, str) and namespace:
        return f"{namespace}__{name}", args
    return name, args


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        try:
            data = json.loads(output)  # an earlier version: {"output": ..., "metadata": ...}
        except ValueError:
            return output
        if isinstance(data, dict) and "output" in data:
            return str(data.get("output") or "")
        return output
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or "")
    return _text(output)


def _exit_from(output: Any) -> int | None:
    if isinstance(output, str):
        try:
            data = json.loads(output)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("metadata"), dict):
            code = data["metadata"].get("exit_code")
            if isinstance(code, int):
                return code
        found = _EXITED.search(output[:400])
        return int(found.group(1)) if found else None
    return None


def _shell_output(text: str) -> str:
    """A unified exec's output without its header (`Chunk ID`, `Wall time`, ..., `Output:`)."""
    head, sep, rest = text.partition("\nOutput:\n")
    return rest if sep and len(head) < 400 else text


class _CodexTurns:
    """What one rollout tells, gathered record by record."""

    def __init__(self, session: PastSession):
        self.session = session
        self.turn: PastTurn | None = None
        self.calls: dict[str, dict[str, Any]] = {}  # call_id -> what is known of it
        self.last = 0.0

    def prompt(self, text: str, ts: float) -> None:
        text = text.strip()
        turn = self.turn
        if not text or text.startswith(("<environment_context>", "<user_instructions>")):
            return
        if turn is not None and turn.prompt == text and not turn.calls and not turn.answer:
            return  # the same message told twice (an item and an event)
        self.turn = PastTurn(text, ts)
        self.session.turns.append(self.turn)

    def known(self, call_id: Any) -> dict[str, Any]:
        return self.calls.setdefault(str(call_id), {})

    def output(self, call_id: Any, output: Any, ts: float) -> None:
        info = self.calls.pop(str(call_id), {})
        if self.turn is None or "name" not in info:
            return
        name, tool_input = _codex_tool(info["name"], info.get("namespace"), info.get("arguments"))
        payload: dict[str, Any] = {"tool_name": name, "tool_input": tool_input}
        payload["tool_use_id"] = str(call_id)
        item = info.get("item") if isinstance(info.get("item"), dict) else {}
        if item.get("type") == "McpToolCall" or name.startswith("mcp__"):
            result = item.get("result")
            if item.get("status") == "failed" or (
                isinstance(result, dict) and result.get("isError")
            ):
                texts = [
                    c.get("text")
                    for c in (result or {}).get("content") or []
                    if isinstance(c, dict)
                ]
                error = " ".join(str(t) for t in texts if t) or str(item.get("error") or "failed")
                self.turn.calls.append(Call("tool-failure", {**payload, "error": error}, ts))
                return
            response = result if isinstance(result, dict) else _output_text(output)
            self.turn.calls.append(Call("tool", {**payload, "tool_response": response}, ts))
            return
        code = info.get("exit_code")
        if name == "Bash":
            text = info.get("aggregated_output")
            if not isinstance(text, str):
                text = _shell_output(_output_text(output))
            code = code if isinstance(code, int) else _exit_from(output)
            call = Call("tool", {**payload, "tool_response": text}, ts, code)
        else:
            text = output if isinstance(output, str) else _output_text(output)
            call = Call("tool", {**payload, "tool_response": text}, ts)
        self.turn.calls.append(call)


def read_codex(path: Path) -> Iterator[PastSession]:
    """The session of one Codex rollout (none when it holds no prompt)."""
    session = PastSession("codex", "", path)
    seen = _CodexTurns(session)
    for row in rows(path):
        payload = row.get("payload") if isinstance(row.get("payload"), dict) else {}
        seen.last = ts = _time(row.get("timestamp"), seen.last)
        kind, what = row.get("type"), payload.get("type")
        if kind == "session_meta":
            session.session_id = session.session_id or str(payload.get("id") or "")
            session.cwd = session.cwd or str(payload.get("cwd") or "")
        elif kind == "turn_context" and not session.cwd:
            session.cwd = str(payload.get("cwd") or "")
        elif kind == "event_msg" and what == "user_message":
            seen.prompt(str(payload.get("message") or ""), ts)
        elif kind == "event_msg" and what == "item_completed":
            item = payload.get("item") if isinstance(payload.get("item"), dict) else {}
            if item.get("type") == "UserMessage":
                seen.prompt(_text(item.get("content")), ts)
            elif item.get("type") in ("CommandExecution", "McpToolCall", "FileChange"):
                known = seen.known(item.get("id"))
                known["item"] = item
                if isinstance(item.get("exit_code"), int):
                    known["exit_code"] = item["exit_code"]
                if isinstance(item.get("aggregated_output"), str):
                    known["aggregated_output"] = item["aggregated_output"]
        elif kind == "event_msg" and what == "exec_command_end":
            known = seen.known(payload.get("call_id"))
            if isinstance(payload.get("exit_code"), int):
                known.setdefault("exit_code", payload["exit_code"])
            out = payload.get("aggregated_output")
            if not isinstance(out, str) and isinstance(payload.get("stdout"), str):
                out = payload["stdout"] + str(payload.get("stderr") or "")
            if isinstance(out, str):
                known.setdefault("aggregated_output", out)
        elif kind == "event_msg" and what == "task_complete" and seen.turn is not None:
            if payload.get("last_agent_message"):
                seen.turn.answer, seen.turn.answer_ts = str(payload["last_agent_message"]), ts
        elif kind == "response_item" and what in ("function_call", "custom_tool_call"):
            known = seen.known(payload.get("call_id"))
            known["name"] = str(payload.get("name") or "tool")
            known["namespace"] = payload.get("namespace")
            known["arguments"] = payload.get("arguments", payload.get("input"))
            if what == "custom_tool_call":
                known["arguments"] = {"input": payload.get("input")}
        elif kind == "response_item" and what == "local_shell_call":
            known = seen.known(payload.get("call_id"))
            action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
            known.update(name="local_shell_call", arguments={"command": action.get("command")})
        elif kind == "response_item" and what in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            seen.output(payload.get("call_id"), payload.get("output"), ts)
        elif kind == "response_item" and what == "message" and payload.get("role") == "assistant":
            text = _text(payload.get("content"))
            if text.strip() and seen.turn is not None:
                seen.turn.answer, seen.turn.answer_ts = text, ts
    if session.turns and session.session_id:
        yield session
