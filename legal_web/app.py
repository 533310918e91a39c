"""The web app: a page and a JSON API over `LegalEngine` (Starlette).

GET  /            the page (choose a knowledge base, ask, read the answer and its sources)
GET  /static/...  its script and style
GET  /api/kbs     [{name, title, docs, language, description}]
POST /api/ask     {kb, question, limit?} -> {answer, passages: [{doc, title, heading, snippet, score}]}
GET  /healthz     {status: ok, kbs, docs}
"""

from __future__ import annotations

from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from legal_web.engine import LegalEngine, UnknownKnowledgeBase

__all__ = ["create_app"]

STATIC = Path(__file__).parent / "static"
MAX_QUESTION = 2000


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


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
        ]
    )
