"""Read-only tool calls answered in one exchange, without the SDK's per-request session.

The daemon serves MCP statelessly: for every POST the SDK's session manager builds a fresh
transport, its memory streams and message router, a JSON-RPC dispatcher and a connection, runs
them as tasks and tears them down (`StreamableHTTPSessionManager._handle_stateless_request`).
Under ten clients a profile put more of the daemon's GIL time there than in the search itself
(experiments/concurrency, round 3). `SingleExchangeReads` sits in front of the SDK's ASGI app
and answers a `tools/call` of a read-only tool (`readOnlyHint`: search, get, history, status,
proposals) itself, the way the SDK's own single-exchange entry serves the 2026 protocol
(`mcp.server._streamable_http_modern`): it hands the request to the same kernel
(`mcp.server.runner.serve_one`: the spec's params check, the middleware, `MemoryServer`'s tool
call with its argument validation and error contract, the result's wire shape) and writes the
reply the SDK's dispatcher and transport would write, byte for byte
(`tests/memory_agent/serve/test_single_exchange.py` compares the two paths call by call).

Everything else goes to the SDK unchanged: writes, `initialize`, `tools/list`, notifications,
batches, anything that fails a header check, the body limit or JSON parsing (the SDK then
answers with its own error), and every request of the 2026 protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["PRIVATE_LIFESPAN_STATE", "SingleExchangeReads"]

# The one private attribute of the SDK read here: the lifespan state its session manager entered
# at start (`StreamableHTTPSessionManager.run`), which the SDK hands every request it serves and
# exposes no other way. pyproject bounds `mcp` to the versions tested (2.3.x);
# tests/memory_agent/serve/test_sdk_internals.py fails, naming it, if a release drops it.
PRIVATE_LIFESPAN_STATE = "_lifespan_state"

# The SDK's dispatcher logs a handler's crash under its own name; so do we.
dispatch_log = logging.getLogger("mcp.shared.jsonrpc_dispatcher")
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)


@dataclass
class _DispatchContext:
    """The per-request `DispatchContext` the stateless SDK path gives a handler in JSON-response
    mode: no back-channel (a server request raises `NoBackChannelError`), and notifications
    (progress, logging) have no wire - the SDK drops them (a JSON body carries only the
    response), so they are dropped here."""

    request_id: RequestId
    message_metadata: ServerMessageMetadata
    transport: TransportContext = _TRANSPORT
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        return None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


class SingleExchangeReads:
    """ASGI app: read-only `tools/call`s on `path` answered here, the rest passed to `app`.

    `mcp`: the server whose kernel answers (the one `app` serves). `security`: the transport
    security the SDK applies; a request it would refuse goes to the SDK, which refuses it.
    `served` counts the calls answered here."""

    def __init__(
        self,
        app: ASGIApp,
        mcp: MCPServer,
        security: TransportSecuritySettings,
        *,
        path: str = "/mcp",
        max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ):
        self.app = app
        self.mcp = mcp
        self.security = security
        self.path = path
        self.max_body = max_body
        self.served = 0
        self._read_only: frozenset[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if not self._headers_pass(request):
            await self.app(scope, receive, send)
            return
        received, body = await self._read_body(receive)
        message = await self._read_only_call(body) if body is not None else None
        if message is None:
            await self.app(scope, _replay(received, receive), send)
            return
        version = request.headers.get("mcp-protocol-version")
        request = Request(scope, _replay(received, receive))
        reply = await self._answer(message, request, version or DEFAULT_NEGOTIATED_VERSION)
        self.served += 1
        # what the SDK's transport writes for a reply (`_create_json_response`)
        text = reply.model_dump_json(by_alias=True, exclude_unset=True)
        await Response(text, headers={"Content-Type": "application/json"})(scope, receive, send)

    def _headers_pass(self, request: Request) -> bool:
        """Whether the SDK would take this POST to its stateless JSON path: a body within the
        limit, a handshake-era protocol version (or none), the transport's Content-Type and
        DNS-rebinding checks, an Accept that admits JSON. Stricter is safe: a request that
        fails here is the SDK's to answer."""
        headers = request.headers
        length = headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > self.max_body:
            return False
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False
        if headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return False
        if self.security.enable_dns_rebinding_protection:
            if not _allowed(headers.get("host"), self.security.allowed_hosts):
                return False
            origin = headers.get("origin")
            if origin and not _allowed(origin, self.security.allowed_origins):
                return False
        return check_accept_headers(request)[0]

    async def _read_body(self, receive: Receive) -> tuple[list[Message], bytes | None]:
        """The messages received, and the body if it is whole and within the limit (None
        otherwise: the SDK's body limit, or the disconnect, is then the SDK's to handle)."""
        received: list[Message] = []
        size = 0
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                return received, None
            size += len(message.get("body", b""))
            if size > self.max_body:
                return received, None
            if not message.get("more_body", False):
                return received, b"".join(m.get("body", b"") for m in received)

    async def _read_only_call(self, body: bytes) -> JSONRPCRequest | None:
        """The request, if it is one `tools/call` of a read-only tool; parsed as the SDK's
        transport parses it (anything it would refuse is left to it)."""
        try:
            raw = pydantic_core.from_json(body)
        except ValueError:
            return None
        if not isinstance(raw, dict) or raw.get("method") != "tools/call":
            return None
        params = raw.get("params")
        if not isinstance(params, dict) or params.get("name") not in await self._read_only_tools():
            return None
        try:
            message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError:
            return None
        return message if isinstance(message, JSONRPCRequest) else None

    async def _read_only_tools(self) -> frozenset[str]:
        """The tools annotated `readOnlyHint` (read once: tools are registered at build)."""
        if self._read_only is None:
            self._read_only = frozenset(
                t.name
                for t in await self.mcp.list_tools()
                if t.annotations is not None and t.annotations.read_only_hint
            )
        return self._read_only

    async def _answer(
        self, message: JSONRPCRequest, request: Request, version: str
    ) -> JSONRPCResponse | JSONRPCError:
        """Run the SDK's kernel on the request, as its stateless transport does (a born-ready
        connection at the header's version), and wrap the outcome as its dispatcher does."""
        manager = self.mcp.session_manager
        lowlevel = manager.app  # the server the SDK's session manager drives
        metadata = ServerMessageMetadata(request_context=request, can_send_request=False)
        dctx = _DispatchContext(request_id=message.id, message_metadata=metadata)
        connection = Connection.from_envelope(version, None, None)
        lifespan_state = getattr(manager, PRIVATE_LIFESPAN_STATE)  # entered once, at start
        try:
            result = await serve_one(
                lowlevel,
                dctx,
                message.method,
                message.params,
                connection=connection,
                lifespan_state=lifespan_state,
            )
        except Exception as exc:  # the dispatcher's one exception-to-wire boundary
            error = handler_exception_to_error_data(exc)
            if error is None:
                dispatch_log.exception("handler for %r raised", message.method)
                error = ErrorData(code=0, message=str(exc))
            return JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        return JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)


def _allowed(value: str | None, allowed: list[str]) -> bool:
    """The transport security's match: exact, or `base:*` for any port of `base`."""
    if not value:
        return False
    if value in allowed:
        return True
    return any(a.endswith(":*") and value.startswith(a[:-2] + ":") for a in allowed)


def _replay(received: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out the messages already read, then the rest of the request."""
    pending = list(reversed(received))

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay
