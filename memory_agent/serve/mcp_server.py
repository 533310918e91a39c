"""`MemoryServer`: the MCP SDK's server with one error contract (ADR 0007).

A tool never returns an error message as a result. Whatever goes wrong - a refusal of ours, an
argument the schema refuses, a bug - reaches the client as one shape (`is_error` true): text
that starts with the code (`invalid: limit: 100000 is out of range`, then `fix: ...`) and the
same as structured content, `{"error": {"code", "message", "fix"}}`. The mapping is
`memory_agent.errors.describe`, shared with the admin routes and the CLI; every tool's output
schema admits that reply.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from memory_agent.client import CALLER_HEADER, WHERE_HEADER
from memory_agent.errors import ErrorInfo, describe
from memory_agent.serve import schemas

__all__ = ["MemoryServer", "caller_of", "error_info", "error_result", "where_of"]

log = logging.getLogger("memory_agent.tools")  # the daemon log's name for it, unchanged


def _validation_info(exc: ValidationError) -> ErrorInfo:
    """A schema refusal as our `invalid`, naming each argument and its bound."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "arguments") or "arguments"
        if err.get("type") == "missing":
            parts.append(f"{loc}: missing; it is required")
            continue
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        parts.append(f"{loc}: {err.get('msg', 'invalid').lower()} (got {got})")
    return ErrorInfo(
        "invalid",
        "; ".join(parts),
        "correct the arguments named above; the tool's input schema lists every bound",
    )


def error_info(exc: BaseException, tool_names: Sequence[str]) -> ErrorInfo:
    """Unwrap the SDK's `ToolError` to what was raised, then describe it. A pydantic error is
    the caller's only when the SDK says so (a plain `ToolError`: the arguments failed the input
    schema); under `UnexpectedToolError` it is a reply that failed its own output schema - a
    bug, `internal`. An unknown tool's fix names the `tool_names` there are."""
    seen = exc
    while isinstance(seen, ToolError) and seen.__cause__ is not None:
        seen = seen.__cause__
    if isinstance(seen, ValidationError) and not isinstance(exc, UnexpectedToolError):
        return _validation_info(seen)
    if isinstance(seen, ToolError):  # the SDK's own refusal (an unknown tool)
        text = str(seen).removeprefix("Error executing tool ").strip()
        return ErrorInfo("invalid", text, f"call one of {', '.join(tool_names)}")
    return describe(seen)


def error_result(info: ErrorInfo) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=info.text)],
        structured_content={"error": info.as_json()},
        is_error=True,
    )


class MemoryServer(MCPServer):
    """MCPServer with one error contract and output schemas that admit the error reply.
    `tool_names`: the tools it serves, in the order an unknown tool's fix lists them."""

    def __init__(self, *args: Any, tool_names: Sequence[str] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.tool_names = tuple(tool_names)

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            info = error_info(exc, self.tool_names)
            if info.code == "internal":
                log.error("tool %s crashed", name, exc_info=exc.__cause__ or exc)
            else:
                log.info("tool %s refused: %s", name, info.code)
            return error_result(info)

    async def list_tools(self):
        tools = await super().list_tools()
        return [
            t.model_copy(update={"output_schema": schemas.with_error(t.output_schema)})
            if t.output_schema
            else t
            for t in tools
        ]


def _header(ctx: Context | None, name: str) -> str | None:
    try:
        request = ctx.request_context.request if ctx is not None else None
    except ValueError:  # no request (an in-process call)
        return None
    headers = getattr(request, "headers", None)
    return headers.get(name) if headers is not None else None


def caller_of(ctx: Context | None) -> str | None:
    """The calling client, as the proxy or the CLI names it in a request header."""
    return _header(ctx, CALLER_HEADER)


def where_of(ctx: Context | None) -> str | None:
    """The folder the calling session works in (the proxy's MCP roots or working directory,
    the CLI's), or a project the CLI named: the daemon finds the session's project there."""
    from urllib.parse import unquote

    where = _header(ctx, WHERE_HEADER)
    return unquote(where) if where else None
