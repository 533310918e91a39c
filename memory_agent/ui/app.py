"""The memory browser: what the agents know, why a search ranked what it did, how an entry
came to be. A Starlette app; it reads through the daemon and writes only through the gateway
(preview, then confirm - exactly like the tools).

It is a web server on a machine with secrets, so:
- it listens on 127.0.0.1 only, and answers only requests addressed to it (the Host header
  must be 127.0.0.1 or localhost with its port: a DNS-rebinding page cannot reach it);
- every request needs the random token printed at start (in the URL once; then an HttpOnly,
  SameSite=Strict cookie), else 403;
- every state-changing request is a POST carrying the CSRF token of the page it came from,
  and no cross-origin Origin, else 403 (the Referrer-Policy is same-origin, not no-referrer:
  under no-referrer a browser sends `Origin: null` even on its own form posts);
- a strict Content-Security-Policy (no inline script or style, nothing from other origins);
  entry text is untrusted: Markdown is rendered with raw HTML escaped and unsafe links dropped.
"""

from __future__ import annotations

import hmac
import logging
import math
import secrets
import time
import urllib.parse
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_agent.errors import Invalid, MemoryAgentError, describe
from memory_agent.kb.entries import ENTRY_TYPES
from memory_agent.ui.data import UIData
from memory_agent.ui.render import Pages, for_page

__all__ = ["create_app"]

log = logging.getLogger("memory_agent.ui")

STATIC = Path(__file__).parent / "static"
COOKIE = "memory_agent_ui"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE = 50


class Guard:
    """Host, token and CSRF checks, and the security headers, for every request."""

    def __init__(self, app: ASGIApp, token: str, port_of: Any):
        self.app = app
        self.token = token
        self.port_of = port_of  # -> the bound port (known once listening)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        port = self.port_of()
        allowed = {f"127.0.0.1:{port}", f"localhost:{port}"}
        if request.headers.get("host", "") not in allowed:
            await self._refuse(scope, receive, send, 421, "wrong Host: open the URL it printed")
            return
        given = request.query_params.get("token") or request.cookies.get(COOKIE, "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            await self._refuse(
                scope, receive, send, 403, "forbidden: open the URL `memory-agent ui` printed"
            )
            return
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            if origin is not None and urllib.parse.urlsplit(origin).netloc not in allowed:
                await self._refuse(scope, receive, send, 403, "cross-origin requests refused")
                return
        if "token" in request.query_params and request.method == "GET":  # token -> cookie
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urllib.parse.urlencode(query) if query else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            await self._send(response, scope, receive, send)
            return

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)

    async def _refuse(self, scope, receive, send, status: int, text: str) -> None:
        await self._send(PlainTextResponse(text, status_code=status), scope, receive, send)

    async def _send(self, response: Response, scope, receive, send) -> None:
        response.headers["content-security-policy"] = CSP
        await response(scope, receive, send)


def _importance(value: str) -> int:
    """The form's importance as a number, or a clear `invalid` (never a 500)."""
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        raise Invalid(
            f"importance {value[:40]!r} is not a whole number",
            "give a whole number from 1 (minor) to 10 (must not be missed)",
        )
    return int(text)


def create_app(home: Path, *, token: str | None = None, port_of=lambda: 0) -> Starlette:
    token = token or secrets.token_urlsafe(24)
    csrf = hmac.new(token.encode(), b"csrf", "sha256").hexdigest()
    data = UIData(home)
    pages = Pages(csrf)

    def page(html: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(html, status_code=status)

    def failure(exc: Exception) -> HTMLResponse:
        info = for_page(describe(exc, log_hint="the terminal that runs `memory-agent ui`"))
        if info.code == "internal":
            log.error("page failed", exc_info=exc)
        status = (
            404 if info.code == "not_found" else 400 if isinstance(exc, MemoryAgentError) else 500
        )
        return page(pages.error(info), status)

    async def form_of(request: Request) -> dict[str, str]:
        form = await request.form()
        values = {k: str(v) for k, v in form.items()}
        if not hmac.compare_digest(values.get("csrf", "").encode(), csrf.encode()):
            raise PermissionError("missing or wrong CSRF token")
        return values

    async def run(fn, *args, **kwargs):
        import functools

        import anyio

        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def overview(request: Request) -> Response:
        try:
            status = await run(data.tool, "memory_index_status")
            counts = await run(data.overview)
            writes = await run(data.recent_writes)
            activity = await run(data.activity)
            health = await run(data.health)
            remote = await run(data.remote)
        except Exception as exc:  # noqa: BLE001 - shown, not raised
            return failure(exc)
        return page(pages.overview(status, counts, writes, activity, health or {}, remote))

    async def search(request: Request) -> Response:
        q = request.query_params
        query = q.get("q", "").strip()
        if not query:
            return page(pages.search(q, None, ENTRY_TYPES))
        sources = q.getlist("source") or ["kb", "docs"]
        try:
            reply = await run(
                lambda: data.tool(
                    "memory_search",
                    query=query,
                    limit=min(50, max(1, int(q.get("limit") or 20))),
                    types=[t for t in q.getlist("type") if t] or None,
                    tags=[t for t in q.get("tag", "").split(",") if t.strip()] or None,
                    include_readonly="docs" in sources,
                    include_episodes="episodes" in sources,
                    include_archived=q.get("archived") == "1",
                    as_of=q.get("as_of") or None,
                    scope=q.get("scope") or "all",  # a person browsing sees every project
                    kb=q.get("kb") or None,  # one KB (personal, team), or every KB
                    explain=True,
                )
            )
        except Exception as exc:  # noqa: BLE001
            info = for_page(describe(exc, log_hint="the terminal that runs `memory-agent ui`"))
            if info.code == "internal":
                log.error("search failed", exc_info=exc)
            return page(pages.search(q, None, ENTRY_TYPES, error=info), 400)
        return page(pages.search(q, reply, ENTRY_TYPES))

    async def entries(request: Request) -> Response:
        q = request.query_params
        number = max(1, int(q.get("page") or 1)) if (q.get("page") or "1").isdigit() else 1
        filters = {k: q.get(k, "") for k in ("type", "status", "source", "scope")}
        try:
            listing = await run(data.entries, (number - 1) * PAGE, PAGE, **filters)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        pages_total = max(1, math.ceil(listing["total"] / PAGE))
        return page(pages.entries(listing, filters, number, pages_total, ENTRY_TYPES))

    async def entry(request: Request) -> Response:
        entry_id = request.query_params.get("id", "")
        try:
            got = await run(data.tool, "memory_get", id=entry_id)
            context = await run(data.entry_context, entry_id)
            history = (
                await run(data.tool, "memory_history", id=entry_id) if got["writable"] else None
            )
            commits = await run(data.file_history, got["path"]) if got["writable"] else []
            activity = await run(data.activity, 30, entry_id)
            later = got.get("superseded_by")
            forked = later if isinstance(later, list) and len(later) > 1 else []
            successors = [await run(data.tool, "memory_get", id=s) for s in forked]
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        return page(pages.entry(got, context, history, commits, activity, successors))

    async def add_form(request: Request) -> Response:
        try:
            kbs = await run(data.kbs)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        return page(pages.add(kbs, ENTRY_TYPES))

    async def write(request: Request) -> Response:
        """Importance, supersede and archive: a preview first, then the confirmed write. Add
        (no preview: the gateway's dedup answers first) into the KB the form picked."""
        action = request.path_params["action"]
        try:
            form = await form_of(request)
        except PermissionError as exc:
            return PlainTextResponse(f"forbidden: {exc}", status_code=403)
        entry_id = form.get("id", "")
        confirm = form.get("confirm") == "1"
        try:
            if action == "importance":
                reply = await run(
                    lambda: data.tool(
                        "memory_set_importance",
                        id=entry_id,
                        importance=_importance(form.get("importance", "")),
                        note=form.get("note") or None,
                    )
                )
                return RedirectResponse(f"/entry?{urllib.parse.urlencode({'id': entry_id})}", 303)
            if action == "add":
                reply = await run(
                    lambda: data.tool(
                        "memory_add",
                        title=form.get("title", ""),
                        body=form.get("body", ""),
                        type=form.get("type") or "note",
                        tags=[t.strip() for t in form.get("tags", "").split(",") if t.strip()],
                        kb=form.get("kb") or None,
                    )
                )
            elif action == "supersede":
                reply = await run(
                    lambda: data.tool(
                        "memory_supersede",
                        old_id=entry_id,
                        title=form.get("title", ""),
                        body=form.get("body", ""),
                        confirm=confirm,
                    )
                )
            elif action == "resolve":  # a fork: keep one successor, or merge both
                keep = form.get("keep") or None
                reply = await run(
                    lambda: data.tool(
                        "memory_resolve_fork",
                        id=entry_id,
                        keep=keep,
                        title=None if keep else form.get("title", ""),
                        body=None if keep else form.get("body", ""),
                        confirm=confirm,
                    )
                )
            elif action == "archive":
                reply = await run(
                    lambda: data.tool(
                        "memory_archive",
                        id=entry_id,
                        reason=form.get("reason", ""),
                        confirm=confirm,
                    )
                )
            else:
                return PlainTextResponse("unknown action", status_code=404)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        return page(pages.write_result(action, form, reply))

    async def episodes(request: Request) -> Response:
        q = request.query_params
        number = max(1, int(q.get("page") or 1)) if (q.get("page") or "1").isdigit() else 1
        name = q.get("session")
        try:
            if name:
                turns = await run(data.session, name)
                state = await run(data.gate_state)
                return page(pages.session(name, turns, state))
            total, rows = await run(data.sessions, (number - 1) * PAGE, PAGE)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        return page(pages.sessions(total, rows, number, max(1, math.ceil(total / PAGE))))

    async def inbox(request: Request) -> Response:
        try:
            proposals = await run(data.tool, "memory_proposals")
            state = await run(data.gate_state)
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        return page(pages.inbox(proposals["proposals"], state))

    async def decide(request: Request) -> Response:
        try:
            form = await form_of(request)
        except PermissionError as exc:
            return PlainTextResponse(f"forbidden: {exc}", status_code=403)
        try:
            if request.path_params["action"] == "accept":
                await run(data.tool, "memory_accept", id=form.get("id", ""))
            else:
                await run(
                    lambda: data.tool(
                        "memory_reject",
                        id=form.get("id", ""),
                        reason=form.get("reason") or "rejected in the browser",
                    )
                )
        except Exception as exc:  # noqa: BLE001
            return failure(exc)
        return RedirectResponse("/inbox", status_code=303)

    app = Starlette(
        routes=[
            Route("/", overview),
            Route("/search", search),
            Route("/entries", entries),
            Route("/entry", entry),
            Route("/add", add_form),
            Route("/entry/{action}", write, methods=["POST"]),
            Route("/episodes", episodes),
            Route("/inbox", inbox),
            Route("/inbox/{action}", decide, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )
    app.state.token = token
    app.state.started = time.time()
    guarded = Guard(app, token, port_of)
    return guarded  # type: ignore[return-value]
