"""A stand-in OpenAI-compatible embeddings server on 127.0.0.1: real all-MiniLM-L6-v2 vectors
(ONNX Runtime, in this process) behind `POST /v1/embeddings`, for the tests and benchmarks of
the `openai` embedder (`ragcore.endpoint`). It is the only server that embedder was tested
against here: Ollama, LM Studio, llama.cpp's server, TEI and vLLM speak the same format.

    .venv/bin/python benchmarks/embedding_server.py [--port 0] [--model all-minilm]
        [--cache DIR] [--key-env VAR] [--scale 1.0]

Prints one JSON line `{"url": "http://127.0.0.1:PORT/v1", "pid": N}` once it listens, then
serves until it is killed or its stdin closes. `--cache DIR`: MiniLM's vectors come from (and
go to) the embedding cache in DIR, keyed by MiniLM's own model id - the same vectors, embedded
once. `--key-env VAR`: requests must carry `Authorization: Bearer $VAR` (the key is read from
the environment, never from the command line). `--scale`: vectors are multiplied by this
before they are sent (1.0: unit length, as MiniLM gives them; another value: a server that
does not normalise).

It lists the embeddings of an answer last to first, each with its `index` (the format allows
any order: a client must sort them). `EmbeddingServer` is the same server for a test's own
thread; it also records each request
(path, batch size, whether its key matched) and can answer the next requests with an error
status (`fail_next`) to test retries.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))


class EmbeddingServer:
    """`POST /v1/embeddings` (and `/embeddings`), `GET /v1/models`, answering with `embedder`'s
    `embed_documents` vectors in the OpenAI format."""

    def __init__(
        self,
        embedder: Any,
        *,
        model: str = "all-minilm",
        aliases: tuple[str, ...] = (),
        key: str | None = None,
        scale: float = 1.0,
        port: int = 0,
    ):
        self.embedder = embedder
        self.model = model
        self.models = (model, *aliases)  # the names it answers to (the same vectors)
        self.key = key
        self.delay = 0.0  # seconds to wait before answering (tests of timeouts)
        self.scale = scale
        self.fail_next: list[int] = []  # statuses to answer before embedding again
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    models = [{"id": m, "object": "model"} for m in server.models]
                    self._send(200, {"object": "list", "data": models})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                server.answer(self, raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, handler: Any, raw: bytes) -> None:
        auth = handler.headers.get("Authorization")
        with self._lock:
            record = {"path": handler.path, "batch": 0, "key_ok": None, "auth_sent": bool(auth)}
            self.requests.append(record)
            failing = self.fail_next.pop(0) if self.fail_next else None
        if handler.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            return handler._send(404, {"error": {"message": f"no route {handler.path}"}})
        if self.key is not None:
            record["key_ok"] = auth == f"Bearer {self.key}"
            if not record["key_ok"]:
                return handler._send(401, {"error": {"message": "invalid API key"}})
        if failing is not None:
            return handler._send(failing, {"error": {"message": f"stand-in failure {failing}"}})
        try:
            body = json.loads(raw)
            texts = body["input"]
            texts = [texts] if isinstance(texts, str) else list(texts)
        except (ValueError, KeyError, TypeError):
            return handler._send(400, {"error": {"message": "expected {model, input}"}})
        if body.get("model") not in self.models:
            return handler._send(
                404, {"error": {"message": f"model {body.get('model')!r} not found"}}
            )
        record["batch"] = len(texts)
        if self.delay:
            time.sleep(self.delay)
        vectors = [e.dense for e in self.embedder.embed_documents(texts)] if texts else []
        data = [
            {"object": "embedding", "index": i, "embedding": (v * self.scale).tolist()}
            for i, v in enumerate(vectors)
        ][::-1]  # in reverse: a client must order them by `index`
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        handler._send(200, {"object": "list", "data": data, "model": self.model, "usage": usage})

    def start(self) -> str:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def minilm(cache: str | None = None) -> Any:
    """MiniLM through ONNX Runtime, loaded; behind its embedding cache in `cache` if given."""
    from ragcore import CachedEmbedder, EmbeddingCache, make_embedder

    work = Path(cache) if cache else None
    model = make_embedder("minilm", work_dir=work)
    model.load()  # type: ignore[attr-defined]
    return CachedEmbedder(model, EmbeddingCache(work)) if work is not None else model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--model", default="all-minilm", help="the model name it answers to")
    parser.add_argument("--cache", help="an embedding cache directory for MiniLM's vectors")
    parser.add_argument("--key-env", help="require `Authorization: Bearer $KEY_ENV`")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every vector")
    args = parser.parse_args()
    key = os.environ.get(args.key_env) if args.key_env else None
    server = EmbeddingServer(
        minilm(args.cache), model=args.model, key=key, scale=args.scale, port=args.port
    )
    server.start()
    print(json.dumps({"url": server.url, "pid": os.getpid()}), flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin (or kills us)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
