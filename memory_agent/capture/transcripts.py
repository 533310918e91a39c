"""What an agent's transcript tells that its hooks do not (read by the hook command at the
end of the agent's files, never whole):

- Codex reports a shell command's output as a plain string with no exit code: the code is read
  from the end of the session's rollout file (`transcript_path`, matched by `tool_use_id`);
- Codex fires no hook for an MCP tool call that fails: at Stop, the turn's failed MCP calls
  are read from the rollout (`codex_failed_mcp`);
- Claude Code fires PermissionDenied only in auto mode: at Stop, the calls `claude -p` refused
  are read from the end of its transcript (`claude_denials`).

The missed calls come back as the hook calls they would have been (`(event, payload)`), less
those the journal already holds (by tool_use_id). Standard library only (the hook command).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["claude_denials", "codex_exit_code", "codex_failed_mcp", "rollout_exit_code"]

ROLLOUT_TAIL = 512_000  # bytes of a Codex rollout read from its end, then once 8 times more
_EXITED = re.compile(r"Process exited with code (-?\d+)")


def rollout_exit_code(transcript: Any, call_id: Any) -> int | None:
    """The exit code Codex recorded for command `call_id` in its rollout file, read from the
    end (the last ROLLOUT_TAIL bytes, then once eight times that); None when not found."""
    if not isinstance(transcript, str) or not isinstance(call_id, str) or not call_id:
        return None
    if not transcript.endswith(".jsonl"):
        return None
    needle = json.dumps(call_id).encode()
    try:
        fd = os.open(transcript, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        for window in (ROLLOUT_TAIL, ROLLOUT_TAIL * 8):
            start = max(0, size - window)
            data = os.pread(fd, size - start, start)
            if start:
                data = data[data.find(b"\n") + 1 :]  # the first line may be cut
            for line in reversed(data.splitlines()):
                if needle not in line:
                    continue
                code = _exit_code_of(line, call_id)
                if code is not None:
                    return code
            if not start:
                break
    finally:
        os.close(fd)
    return None


def _exit_code_of(line: bytes, call_id: str) -> int | None:
    try:
        payload = json.loads(line).get("payload") or {}
    except (ValueError, AttributeError):
        return None
    if not isinstance(payload, dict):
        return None
    item = payload.get("item")
    if payload.get("type") == "item_completed" and isinstance(item, dict):
        if item.get("id") == call_id and isinstance(item.get("exit_code"), int):
            return item["exit_code"]
    if payload.get("type") == "exec_command_end" and payload.get("call_id") == call_id:
        code = payload.get("exit_code")
        return code if isinstance(code, int) else None
    if payload.get("type") == "function_call_output" and payload.get("call_id") == call_id:
        m = _EXITED.search(str(payload.get("output") or "")[:400])
        return int(m.group(1)) if m else None
    return None


def codex_exit_code(payload: dict[str, Any]) -> int | None:
    """A Codex command's exit code from its rollout. Codex records the command's completion
    before it runs PostToolUse; should the write lag, look twice more for a shell command
    (`Bash`), 20 ms apart (another tool may simply have no exit code)."""
    if not isinstance(payload.get("transcript_path"), str):
        return None  # no rollout named (an imported call): nothing to wait for
    tries = 3 if payload.get("tool_name") == "Bash" else 1
    for attempt in range(tries):
        code = rollout_exit_code(payload.get("transcript_path"), payload.get("tool_use_id"))
        if code is not None or attempt == tries - 1:
            return code
        time.sleep(0.02)
    return None


def _tail_lines(path: Any, size: int, needle: bytes) -> list[bytes]:
    """The whole lines holding `needle` among the last `size` bytes of `path`, oldest first."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return []
    try:
        end = os.fstat(fd).st_size
        start = max(0, end - size)
        data = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    if needle not in data:
        return []
    if start:
        data = data[data.find(b"\n") + 1 :]
    return [line for line in data.splitlines() if needle in line]


def claude_denials(payload: dict[str, Any], folder: Path, session: str) -> list[tuple[str, dict]]:
    """Tool calls Claude Code denied without a PermissionDenied hook (2.1.332 fires that event
    only for its auto-mode classifier; `claude -p` denies a tool no rule allows silently), read
    at Stop from the end of its transcript (`toolDenialKind` on the tool result), less those
    the journal already holds (by tool_use_id): each as the `denied` hook call it would have
    been, `(event, payload)`."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript.endswith(".jsonl"):
        return []
    denied: dict[str, str] = {}
    for line in _tail_lines(transcript, ROLLOUT_TAIL, b'"toolDenialKind"'):
        try:
            content = (json.loads(line).get("message") or {}).get("content")
        except (ValueError, AttributeError):
            continue
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = block.get("content")
                if isinstance(text, list):
                    text = " ".join(str(t.get("text", "")) for t in text if isinstance(t, dict))
                denied[str(block.get("tool_use_id"))] = str(text or "permission denied")[:500]
    if not denied:
        return []
    _drop_journaled(denied, folder, session)
    out: list[tuple[str, dict]] = []
    for line in _tail_lines(transcript, ROLLOUT_TAIL, b'"tool_use"'):
        try:
            content = (json.loads(line).get("message") or {}).get("content")
        except (ValueError, AttributeError):
            continue
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                reason = denied.pop(str(block.get("id")), None)
                if reason is not None:
                    fake = {
                        **payload,
                        "tool_name": block.get("name"),
                        "reason": reason,
                        "tool_input": block.get("input"),
                        "tool_use_id": block.get("id"),
                    }
                    out.append(("denied", fake))
    return out


def _drop_journaled(calls: dict[str, Any], folder: Path, session: str) -> None:
    """Remove from `calls` the tool_use_ids the session's journal already holds (its end)."""
    from memory_agent.intake.journal import session_name

    journal = folder / f"{session_name(session)}.jsonl"
    for line in _tail_lines(journal, 256_000, b'"call"'):
        try:
            calls.pop(str(json.loads(line).get("call")), None)
        except (ValueError, AttributeError):
            continue


def codex_failed_mcp(payload: dict[str, Any], folder: Path, session: str) -> list[tuple[str, dict]]:
    """MCP tool calls that failed in this Codex turn, read at Stop from the end of its rollout
    (Codex 0.171.0 fires no PostToolUse for them), less those the journal already holds: each
    as the `tool-failure` hook call it would have been, `(event, payload)`."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript.endswith(".jsonl"):
        return []
    failed: dict[str, dict[str, Any]] = {}
    for line in _tail_lines(transcript, ROLLOUT_TAIL, b'"McpToolCall"'):
        try:
            event = json.loads(line).get("payload") or {}
            item = event.get("item") or {}
        except (ValueError, AttributeError):
            continue
        if not (event.get("type") == "item_completed" and isinstance(item, dict)):
            continue
        if item.get("type") != "McpToolCall" or item.get("status") != "failed":
            continue
        if payload.get("turn_id") and event.get("turn_id") not in (None, payload["turn_id"]):
            continue
        failed[str(item.get("id"))] = item
    _drop_journaled(failed, folder, session)
    out: list[tuple[str, dict]] = []
    for call, item in failed.items():
        result = item.get("result") if isinstance(item.get("result"), dict) else {}
        texts = [c.get("text") for c in result.get("content") or [] if isinstance(c, dict)]
        error = " ".join(str(t) for t in texts if t) or str(item.get("error") or "failed")
        fake = {
            **payload,
            "tool_name": f"mcp__{item.get('server')}__{item.get('tool')}",
            "tool_input": item.get("arguments"),
            "tool_use_id": call,
            "error": error,
        }
        out.append(("tool-failure", fake))
    return out
