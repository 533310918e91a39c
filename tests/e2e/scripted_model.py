"""Scripted model servers on 127.0.0.1 for driving the real agent CLIs offline.

Each server answers the wire protocol of one model API with Server-Sent Events:

- `AnthropicServer`: the Messages API (`POST /v1/messages`, streamed) that Claude Code talks to.
- `ResponsesServer`: the OpenAI Responses API (`POST /v1/responses`, streamed) that Codex talks to.
- `ChatServer`: OpenAI chat completions (`POST /v1/chat/completions`, streamed), for opencode.

A server is a script, not a model: for each request it decides the next model turn with
`play(request, calls) -> Step` (`calls`: how many tool calls the conversation in the request
already holds), or a list of steps indexed by that count (so a client that retries a request gets the
same answer). Every request is recorded (method, path, headers, parsed body) for assertions.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    """One model turn: a tool call (`tool` + `input`) or a final text answer (`text`)."""

    text: str | None = None
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None  # Responses API: MCP tools live in a namespace tool
    custom: bool = False  # Responses API: a freeform custom tool call (apply_patch)

    @classmethod
    def say(cls, text: str) -> Step:
        return cls(text=text)

    @classmethod
    def call(cls, tool: str, namespace: str | None = None, custom: bool = False, **input: Any):
        return cls(tool=tool, input=input, namespace=namespace, custom=custom)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep test output clean
        pass

    def _record(self, body: bytes) -> Request:
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        req = Request(self.command, self.path, dict(self.headers.items()), parsed, body)
        with self.server.lock:
            self.server.requests.append(req)
        return req

    def _plain(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self):  # noqa: N802 - Claude Code probes the base URL first
        self._record(b"")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802
        self._record(b"")
        self.server.owner.on_get(self)

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = self._record(body)
        try:
            self.server.owner.on_post(self, req)
        except Exception as exc:  # the test sees the failure, the client gets a 500
            with self.server.lock:
                self.server.errors.append(repr(exc))
            self._plain(500, {"error": {"type": "api_error", "message": repr(exc)}})

    def sse(self, events: list[tuple[str | None, dict]]) -> None:
        chunks = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            chunks.append(f"{head}data: {json.dumps(data)}\n\n".encode())
        payload = b"".join(chunks)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class ScriptedServer:
    """Base: a thread serving 127.0.0.1 on a free port; `url` and `requests` for the test."""

    def __init__(self, play: list[Step] | Callable[[Request, int], Step]):
        self.play = play
        self._ids = itertools.count(1)
        self.http = _Server(("127.0.0.1", 0), _Handler)
        self.http.owner = self
        self.http.requests = []
        self.http.errors = []
        self.http.lock = threading.Lock()
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[Request]:
        with self.http.lock:
            return list(self.http.requests)

    @property
    def errors(self) -> list[str]:
        with self.http.lock:
            return list(self.http.errors)

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(timeout=10)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"

    def decide(self, req: Request, done_calls: int) -> Step:
        if callable(self.play):
            return self.play(req, done_calls)
        if done_calls < len(self.play):
            return self.play[done_calls]
        return Step.say("done")

    def on_get(self, handler: _Handler) -> None:
        handler._plain(404, {"error": {"type": "not_found_error", "message": handler.path}})

    def on_post(self, handler: _Handler, req: Request) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class AnthropicServer(ScriptedServer):
    """The Anthropic Messages API, streamed, as Claude Code calls it."""

    def on_post(self, handler: _Handler, req: Request) -> None:
        path = req.path.split("?")[0]
        body = req.body or {}
        if path.endswith("/count_tokens"):
            handler._plain(200, {"input_tokens": 100})
            return
        if not path.endswith("/v1/messages"):
            handler._plain(404, {"type": "error", "error": {"type": "not_found_error"}})
            return
        if not body.get("tools"):  # a side request (title, summary): answer plainly
            step = Step.say("ok")
        else:
            calls = sum(
                1
                for m in body.get("messages", [])
                if m.get("role") == "assistant"
                for b in (m.get("content") if isinstance(m.get("content"), list) else [])
                if b.get("type") == "tool_use"
            )
            step = self.decide(req, calls)
        msg_id = self.next_id("msg")
        model = body.get("model", "claude-scripted")
        usage = {"input_tokens": 100, "output_tokens": 10}
        if step.tool:
            block = {
                "type": "tool_use",
                "id": self.next_id("toolu"),
                "name": step.tool,
                "input": {},
            }
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step.input)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": step.text or ""}
            stop = "end_turn"
        message = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            full = dict(block)
            if step.tool:
                full["input"] = step.input
            else:
                full["text"] = step.text or ""
            handler._plain(200, dict(message, content=[full], stop_reason=stop))
            return
        handler.sse(
            [
                ("message_start", {"type": "message_start", "message": message}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": block},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 10},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )


class ResponsesServer(ScriptedServer):
    """The OpenAI Responses API, streamed, as Codex calls it (`wire_api = "responses"`)."""

    def on_get(self, handler: _Handler) -> None:
        if handler.path.split("?")[0].endswith("/models"):
            handler._plain(200, {"object": "list", "data": [], "models": []})
            return
        super().on_get(handler)

    def on_post(self, handler: _Handler, req: Request) -> None:
        path = req.path.split("?")[0]
        if not path.endswith("/responses"):
            handler._plain(404, {"error": {"message": f"no route {path}"}})
            return
        body = req.body or {}
        items = body.get("input") or []
        calls = sum(
            1
            for i in items
            if isinstance(i, dict) and i.get("type") in ("function_call", "custom_tool_call")
        )
        step = self.decide(req, calls) if body.get("tools") else Step.say("ok")
        resp_id = self.next_id("resp")
        if step.tool and step.custom:
            item = {
                "type": "custom_tool_call",
                "id": self.next_id("ctc"),
                "call_id": self.next_id("call"),
                "name": step.tool,
                "input": step.input["input"],
                "status": "completed",
            }
        elif step.tool:
            item = {
                "type": "function_call",
                "id": self.next_id("fc"),
                "call_id": self.next_id("call"),
                "name": step.tool,
                "arguments": json.dumps(step.input),
                "status": "completed",
            }
            if step.namespace:
                item["namespace"] = step.namespace
        else:
            item = {
                "type": "message",
                "id": self.next_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step.text or "", "annotations": []}],
            }
        response = {"id": resp_id, "object": "response", "status": "in_progress", "output": []}
        usage = {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 110,
        }
        events: list[tuple[str | None, dict]] = [
            ("response.created", {"type": "response.created", "response": response}),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
        ]
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": step.text or "",
                    },
                )
            )
        events += [
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": dict(response, status="completed", output=[item], usage=usage),
                },
            ),
        ]
        handler.sse(events)


class ChatServer(ScriptedServer):
    """OpenAI chat completions, streamed (the OpenAI-compatible endpoint opencode can use)."""

    def on_get(self, handler: _Handler) -> None:
        if handler.path.split("?")[0].endswith("/models"):
            handler._plain(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return
        super().on_get(handler)

    def on_post(self, handler: _Handler, req: Request) -> None:
        path = req.path.split("?")[0]
        if not path.endswith("/chat/completions"):
            handler._plain(404, {"error": {"message": f"no route {path}"}})
            return
        body = req.body or {}
        calls = sum(len(m.get("tool_calls") or []) for m in body.get("messages", []))
        step = self.decide(req, calls) if body.get("tools") else Step.say("ok")
        cid = self.next_id("chatcmpl")
        base = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": "scripted"}
        if step.tool:
            delta = {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": self.next_id("call"),
                        "type": "function",
                        "function": {"name": step.tool, "arguments": json.dumps(step.input)},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": step.text or ""}
            finish = "stop"
        chunks = [
            dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
            dict(
                base,
                choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                usage={"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            ),
        ]
        data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
