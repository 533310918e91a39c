"""The journal record of one hook call: what an agent's hook payload (Claude Code's format;
Codex sends the same fields; the opencode plugin builds it) becomes in the journal.

Only a failed tool call or a failed command says what went wrong in `error` (what the gate
learns from); an interrupted call (`is_interrupt`) is `ok: false, interrupted: true`, a denied
one `ok: false, denied: <reason>`, neither with an `error`. An MCP result (`CallToolResult`) is
journaled once (its `structuredContent` when it has one) with `ok = not isError`. A Codex
command's exit code comes from its rollout (`memory_agent.capture.transcripts`). Standard
library only (the hook command).
"""

from __future__ import annotations

from memory_agent.capture.transcripts import codex_exit_code

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["record_for"]


def _tool_ok(response: Any) -> bool:
    """Whether a PostToolUse response says the tool worked (an exit code, when there is one)."""
    if isinstance(response, dict):
        code = response.get("exit_code", response.get("exitCode", response.get("returncode")))
        if isinstance(code, int):
            return code == 0
        if response.get("success") is False or response.get("is_error") is True:
            return False
        if response.get("isError") is True:  # an MCP CallToolResult (Codex sends it whole)
            return False
    return True


def _mcp_once(response: dict[str, Any]) -> dict[str, Any]:
    """An MCP CallToolResult with its text once: `structuredContent` is the same result as
    `content[].text` (the MCP spec asks servers to send both), so keep only the structure."""
    if "structuredContent" not in response or not isinstance(response.get("content"), list):
        return response
    rest = [c for c in response["content"] if not (isinstance(c, dict) and c.get("type") == "text")]
    out = {k: v for k, v in response.items() if k != "content"}
    if rest:  # images, resources: not a copy of the structure
        out["content"] = rest
    return out


def record_for(
    event: str, payload: dict[str, Any], now: float, client: str, exit_code: int | None = None
) -> dict[str, Any]:
    """The journal record of one hook call. `exit_code`: a Codex command's exit code when the
    caller already knows it (an import reads it from the rollout it imports); else it is read
    from the end of the rollout the payload names."""
    base: dict[str, Any] = {"ts": now, "event": event, "client": client}
    if payload.get("cwd"):
        base["cwd"] = str(payload["cwd"])
    if event == "session-start":
        return {**base, "event": "start", "source": payload.get("source")}
    if event == "prompt":
        return {**base, "prompt": str(payload.get("prompt") or "")}
    if event in ("tool", "tool-failure", "denied"):
        out = {
            **base,
            "event": "tool",
            "tool": str(payload.get("tool_name") or "tool"),
            "input": payload.get("tool_input"),
        }
        if payload.get("tool_use_id"):
            out["call"] = str(payload["tool_use_id"])[:100]
        if event == "denied":  # not run at all: nothing for the gate to learn from
            out.update(ok=False, denied=str(payload.get("reason") or "permission denied"))
        elif event == "tool-failure" and payload.get("is_interrupt") is True:
            out.update(ok=False, interrupted=True)  # the user pressed Esc: not a failure
            if payload.get("error"):
                out["note"] = str(payload["error"])
        elif event == "tool-failure":
            out.update(ok=False, error=str(payload.get("error") or "failed"))
        else:
            response = payload.get("tool_response")
            if isinstance(response, dict) and "isError" in response:
                response = _mcp_once(response)
            out.update(output=response, ok=_tool_ok(response))
            if client == "codex" and isinstance(response, str):
                code = exit_code if exit_code is not None else codex_exit_code(payload)
                if code is not None:
                    out.update(exit_code=code, ok=code == 0)
        return out
    if event == "stop":
        return {**base, "answer": str(payload.get("last_assistant_message") or "")}
    if event == "session-end":
        return {**base, "event": "end", "reason": payload.get("reason")}
    return base
