"""The web app: a page and a JSON API over `LegalEngine` (Starlette).

GET  /            the page (choose a knowledge base, ask, read the answer and its sources)
GET  /static/...  its script and style
GET  /api/kbs     [{name, title, docs, language, description}]
POST /api/ask     {kb, question, limit?} -> {answer, passages: [{doc, title, heading, snippet, score}]}
GET  /healthz     {status: ok, kbs, docs}

It serves on loopback only, and it answers only requests addressed to loopback (the Host header
is checked: a DNS-rebinding page cannot reach it) and writes only for its own page (a POST
must be JSON, and a cross-origin one is refused: a form or `text/plain` fetch from another
site cannot ask it anything).
"""

from __future__ import annotations

from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from legal_web.engine import LegalEngine, UnknownKnowledgeBase

__all__ = ["create_app"]

STATIC = Path(__file__).parent / "static"
MAX_QUESTION = 2000


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LoopbackOnly:
    """Refuse requests whose Host is not loopback (DNS rebinding) and state-changing requests
    that are cross-origin or not JSON (CSRF through forms or simple `text/plain` requests)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_name(headers.get("host", ""))
        problem = None
        if host not in LOOPBACK_HOSTS:
            problem = (
                421,
                f"Host {headers.get('host')!r} is not this server; open it as 127.0.0.1",
            )
        elif scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            if origin is not None and _host_name(origin.split("://", 1)[-1]) not in LOOPBACK_HOSTS:
                problem = (403, "cross-origin requests may not ask this server anything")
            elif not headers.get("content-type", "").startswith("application/json"):
                problem = (415, "send the request as JSON (Content-Type: application/json)")
        if problem is not None:
            await _error(problem[1], problem[0])(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(engine: LegalEngine) -> Starlette:
    lock = anyio.Lock()  # the index is not thread-safe: one question at a time

    async def page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def kbs(request: Request) -> JSONResponse:
        return JSONResponse(engine.list_kbs())

    async def ask(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error('the body must be JSON: {"kb": ..., "question": ...}', 400)
        if not isinstance(body, dict):
            return _error("the body must be a JSON object", 400)
        kb, question = body.get("kb"), body.get("question")
        if not isinstance(kb, str):
            return _error(f"kb: choose one of {', '.join(engine.kbs)}", 400)
        if not isinstance(question, str) or not question.strip():
            return _error("question: empty; type a question", 400)
        if len(question) > MAX_QUESTION:
            return _error(f"question: longer than {MAX_QUESTION} characters", 400)
        limit = body.get("limit", 5)
        if not isinstance(limit, int) or not 1 <= limit <= 20:
            return _error("limit: a whole number from 1 to 20", 400)
        try:
            async with lock:
                reply = await anyio.to_thread.run_sync(engine.ask, kb, question.strip(), limit)
        except UnknownKnowledgeBase:
            names = ", ".join(engine.kbs)
            return _error(f"kb: {kb!r} is not a knowledge base; choose one of {names}", 404)
        return JSONResponse(reply)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "kbs": len(engine.kbs),
                "docs": sum(kb.docs for kb in engine.kbs.values()),
            }
        )

    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/kbs", kbs),
            Route("/api/ask", ask, methods=["POST"]),
            Route("/healthz", healthz),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(LoopbackOnly)],
    )
