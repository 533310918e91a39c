"""Embeddings from an OpenAI-compatible `/v1/embeddings` server: Ollama, LM Studio, llama.cpp's
server, TEI, vLLM, or OpenAI itself. Dense only (the lexical channel stays BM25).

`EndpointEmbedder(url, model)` posts `{"model": model, "input": [texts...]}` and reads
`{"data": [{"index": i, "embedding": [...]}, ...]}` (an embedding given as base64 float32 is
read too). Standard library only (urllib): no new dependency.

- **The URL.** A base URL with or without `/v1`, or the endpoint itself, all mean the same:
  `http://localhost:11434`, `http://localhost:11434/v1`, `http://localhost:11434/v1/` and
  `http://localhost:11434/v1/embeddings` post to `http://localhost:11434/v1/embeddings`; a
  path before `/v1` is kept (`http://gateway/tei` -> `http://gateway/tei/v1/embeddings`).
  `http` and `https` only; a URL holding a user, a password, a query or a fragment is refused:
  a credential would end up wherever the URL is written (config, index, logs).
- **The model id** (what an index manifest and the embedding cache key on) names the server's
  host and port, the path before `/v1`, the model and the dimension:
  `openai:localhost:11434/nomic-embed-text/dim768`. Another host, model or dimension is
  another id, so the index asks for a rebuild instead of mixing vectors.
- **The dimension** comes from the first answer (`load()` asks once), is checked on every
  answer after it, and is remembered in `<work_dir>/endpoints.json` (derived, safe to delete)
  so an index can be opened - and searched by its lexical channel - while the server is down.
  Once this process handed out its model id, an answer of another length is an error (the
  model behind the name changed: rebuild), never a vector mixed into the index.
- **Vectors** are normalised to unit length when the server did not.
- **Batches** of at most `batch_size` texts per request; each request has `timeout` seconds.
  A connection error, a timeout, 408, 429 or 5xx is retried `retries` times with backoff
  (`backoff` s, doubled each time; a `Retry-After` of up to 10 s is honoured), then raised as
  `EndpointError` naming the URL and what to check. `load()` (the probe) tries once: its
  caller decides when to ask again.
- **The API key** is given by the caller (memory-agent reads it from the environment only)
  and sent as `Authorization: Bearer`; it is kept out of every message, repr and id.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragcore.atomic import atomic_write
from ragcore.embedding import Embedding
from ragcore.errors import EmbedderError, EndpointError

__all__ = ["EndpointEmbedder", "endpoint_url", "make"]

DEFAULT_BATCH = 64  # texts per request: Ollama, TEI and vLLM take this many at once
DEFAULT_TIMEOUT = 30.0  # seconds per request (a CPU server embedding a full batch)
RETRIES = 3  # after the first attempt: 0.5 + 1 + 2 s of backoff at most
BACKOFF_S = 0.5
MAX_RETRY_AFTER_S = 10.0
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
STATE_FILE = "endpoints.json"  # the dimension of each (server, model) seen: derived
PROBE_TEXT = "memory-agent: which dimension?"
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def shown_url(parts: urllib.parse.SplitResult) -> str:
    """The part of a URL safe to write anywhere (an error, a log): scheme, host and path."""
    return f"{parts.scheme}://{parts.hostname or ''}{parts.path}" if parts.scheme else "?"


def holds_credential(parts: urllib.parse.SplitResult) -> bool:
    """A user, a password, a query or a fragment: where a credential in a URL could be, and
    then be written wherever the URL is (config, index, logs)."""
    return bool(parts.username or parts.password or parts.query or parts.fragment)


def endpoint_url(url: str) -> tuple[str, str]:
    """(the URL to post to, the server's identity `host:port/path`) of a base URL given with
    or without `/v1` (or the `/v1/embeddings` endpoint itself). `EmbedderError` for a URL that
    is not http(s), has no host, or holds a user, a password, a query or a fragment."""
    raw = (url or "").strip()
    if not raw:
        raise EmbedderError(
            "no URL for the embedding endpoint",
            "pass the server's base URL, e.g. http://localhost:11434/v1 (Ollama)",
        )
    parts = urllib.parse.urlsplit(raw)
    shown = shown_url(parts)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EmbedderError(
            f"the embedding URL {shown!r} is not an http(s) URL with a host",
            "pass the server's base URL, e.g. http://localhost:11434/v1 (Ollama)",
        )
    if holds_credential(parts):
        raise EmbedderError(
            f"the embedding URL {shown} holds a user, a password, a query or a fragment",
            "pass the bare base URL; an API key is given apart (it is sent as "
            "`Authorization: Bearer`), never in the URL",
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise EmbedderError(f"the embedding URL {shown} has a bad port ({exc})") from exc
    path = parts.path.rstrip("/")
    for tail in ("/embeddings", "/v1"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    host = parts.hostname.lower()
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}{path}/v1/embeddings", f"{netloc}{path}"


class EndpointEmbedder:
    """Dense embeddings from an OpenAI-compatible server; see the module docstring."""

    has_sparse = False
    languages = None  # unknown: the dense channel keeps its full weight in every language
    remote = True  # a failed load may pass: the caller may ask again later

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        batch_size: int = DEFAULT_BATCH,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = RETRIES,
        backoff: float = BACKOFF_S,
        state_dir: str | Path | None = None,
    ):
        self.url, self.identity = endpoint_url(url)
        self.model = (model or "").strip()
        if not self.model:
            raise EmbedderError(
                f"no model name for the embedding endpoint {self.url}",
                "pass the name the server knows the model by, e.g. nomic-embed-text (Ollama)",
            )
        if int(batch_size) < 1 or float(timeout) <= 0:
            raise EmbedderError(
                f"embedding batch size {batch_size} and timeout {timeout} must be positive"
            )
        self.batch_size = int(batch_size)
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "ragcore-endpoint",
        }
        self._key = api_key or None  # only ever in the Authorization header
        self._state = Path(state_dir) / STATE_FILE if state_dir is not None else None
        self._lock = threading.Lock()
        self._dim: int | None = self._remembered()
        self._id_given = False  # once an index checked the id, the dimension may not change
        self._ready = False
        handlers: list[Any] = []
        if (urllib.parse.urlsplit(self.url).hostname or "") in _LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))  # never a proxy for this machine
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:  # no key, ever
        return f"EndpointEmbedder({self.url!r}, {self.model!r})"

    # -- identity ---------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        if self._dim is None:
            self.load()
        assert self._dim is not None
        return self._dim

    @property
    def model_id(self) -> str:
        dim = self.dim
        self._id_given = True
        return f"openai:{self.identity}/{self.model}/dim{dim}"

    @property
    def loaded(self) -> bool:
        """The server answered this process once (the dimension is its answer's)."""
        return self._ready

    def load(self) -> None:
        """Ask the server once (no retries: the caller decides when to ask again) and take the
        dimension from its answer."""
        self._post([PROBE_TEXT], retries=0)
        self._ready = True

    # -- embedding ----------------------------------------------------------------------------
    def embed_documents(self, texts: Sequence[str]) -> list[Embedding]:
        out: list[Embedding] = []
        texts = list(texts)
        for start in range(0, len(texts), self.batch_size):
            out += [Embedding(dense=v) for v in self._post(texts[start : start + self.batch_size])]
        return out

    def embed_query(self, text: str) -> Embedding:
        return Embedding(dense=self._post([text])[0])

    # -- the request ------------------------------------------------------------------------
    def _error(self, message: str, fix: str, kind: str) -> EndpointError:
        return EndpointError(
            f"embedding endpoint {self.url} (model {self.model!r}): {message}",
            fix,
            kind=kind,
            url=self.url,
        )

    def _post(self, texts: list[str], retries: int | None = None) -> list[np.ndarray]:
        body = json.dumps({"model": self.model, "input": texts}, ensure_ascii=False).encode()
        headers = dict(self._headers)
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        retries = self.retries if retries is None else retries
        attempt = 0
        while True:
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            wait = self.backoff * (2**attempt)
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    payload = response.read()
                break
            except urllib.error.HTTPError as exc:
                status = exc.code
                detail = self._detail(exc)
                if status in RETRY_STATUS and attempt < retries:
                    wait = _retry_after(exc.headers.get("Retry-After"), wait)
                    exc.close()
                else:
                    exc.close()
                    raise self._http_error(status, detail, attempt + 1) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                if attempt >= retries:
                    raise self._unreachable(exc, attempt + 1) from None
            time.sleep(wait)
            attempt += 1
        return self._vectors(payload, len(texts))

    def _detail(self, exc: urllib.error.HTTPError) -> str:
        """The server's own words on a refusal (a short line; never the key)."""
        try:
            raw = exc.read(2000).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - a detail only
            return ""
        try:
            data = json.loads(raw)
            err = data.get("error", data) if isinstance(data, dict) else data
            raw = str(err.get("message") or err) if isinstance(err, dict) else str(err)
        except ValueError:
            pass
        text = " ".join(raw.split())[:200]
        if self._key and self._key in text:
            text = text.replace(self._key, "[key]")
        return text

    def _unreachable(self, exc: BaseException, attempts: int) -> EndpointError:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            why = f"no answer within {self.timeout:g} s"
        else:
            why = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
        return self._error(
            f"not reachable after {attempts} attempt(s) ({why})",
            f"check that the server is running and listens at {self.url} (`curl "
            f"{self.url.rsplit('/embeddings', 1)[0]}/models` lists its models), and that "
            f"model {self.model!r} is available there (Ollama: ollama pull {self.model})",
            "unreachable",
        )

    def _http_error(self, status: int, detail: str, attempts: int) -> EndpointError:
        said = f": {detail}" if detail and status not in (401, 403) else ""
        base = self.url.rsplit("/embeddings", 1)[0]
        if status in (401, 403):
            return self._error(
                f"HTTP {status}: the server refused the API key"
                + ("" if self._key else " (none was sent)"),
                "give the key the server expects (it is sent as `Authorization: Bearer`)",
                "auth",
            )
        if status == 404:
            return self._error(
                f"HTTP 404{said}",
                f"check the URL (a base URL with or without /v1: the embeddings are posted to "
                f"{self.url}) and the model name (`curl {base}/models` lists them; Ollama: "
                f"ollama pull {self.model})",
                "not_found",
            )
        if status in RETRY_STATUS:
            return self._error(
                f"HTTP {status} after {attempts} attempt(s){said}",
                f"the server at {self.url} is overloaded or failing: check its log, or wait "
                "and retry",
                "unreachable",
            )
        return self._error(
            f"HTTP {status}: the server refused the request{said}",
            f"check that model {self.model!r} at {base} is an embedding model and that it "
            "takes texts this long (the `max_chars` of a chunk)",
            "refused",
        )

    def _vectors(self, payload: bytes, expected: int) -> list[np.ndarray]:
        def bad(why: str) -> EndpointError:
            return self._error(
                f"the answer is not OpenAI-style embeddings ({why})",
                f"check that {self.url} is an OpenAI-compatible /v1/embeddings endpoint and "
                f"model {self.model!r} an embedding model",
                "reply",
            )

        try:
            data = json.loads(payload)["data"]
        except (ValueError, KeyError, TypeError):
            raise bad("no JSON object with `data`") from None
        if not isinstance(data, list) or len(data) != expected:
            n = len(data) if isinstance(data, list) else "no"
            raise bad(f"{n} embeddings for {expected} texts")
        if all(isinstance(d, dict) and isinstance(d.get("index"), int) for d in data):
            data = sorted(data, key=lambda d: d["index"])
            if [d["index"] for d in data] != list(range(expected)):
                raise bad("the indexes are not 0..n-1")
        vectors = []
        for item in data:
            raw = item.get("embedding") if isinstance(item, dict) else None
            try:
                if isinstance(raw, str):  # encoding_format "base64": little-endian float32
                    v = np.frombuffer(base64.b64decode(raw), dtype="<f4").astype(np.float32)
                else:
                    v = np.asarray(raw, dtype=np.float32)
            except (ValueError, TypeError):
                raise bad("an embedding is not a list of numbers") from None
            if v.ndim != 1 or v.size == 0:
                raise bad("an embedding is not a list of numbers")
            norm = float(np.linalg.norm(v))
            if not np.isfinite(norm) or norm == 0.0:
                raise bad("a zero or non-finite vector")
            if abs(norm - 1.0) > 1e-4:
                v = v / norm
            vectors.append(v.astype(np.float32, copy=False))
        if len({v.size for v in vectors}) != 1:
            raise bad("vectors of different lengths in one answer")
        self._check_dim(vectors[0].size)
        return vectors

    def _check_dim(self, dim: int) -> None:
        with self._lock:
            if self._dim == dim:
                return
            if self._dim is not None and self._id_given:
                old = self._dim  # this process keeps the id it handed out
                self._remember(dim)  # the next process starts from the server's new dimension
                raise self._error(
                    f"the server now answers with {dim}-d vectors, the index holds {old}-d "
                    "ones: the model behind this name changed",
                    "restart the daemon (memory-agent stop), then rebuild the index "
                    "(memory-agent rebuild) so every vector comes from the same model",
                    "dimension",
                )
            self._dim = dim
            self._remember(dim)

    # -- the remembered dimension ---------------------------------------------------------
    def _key_of(self) -> str:
        return f"{self.identity} {self.model}"

    def _read_state(self) -> dict[str, int]:
        if self._state is None:
            return {}
        try:
            data = json.loads(self._state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _remembered(self) -> int | None:
        dim = self._read_state().get(self._key_of())
        return dim if isinstance(dim, int) and dim > 0 else None

    def _remember(self, dim: int) -> None:
        if self._state is None:
            return
        state = self._read_state()
        if state.get(self._key_of()) == dim:
            return
        state[self._key_of()] = dim
        try:
            atomic_write(self._state, json.dumps(state, indent=1, sort_keys=True).encode())
        except OSError:
            pass  # a cache: the next answer is asked for again


def _retry_after(value: str | None, default: float) -> float:
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value))) if value else default
    except ValueError:
        return default


def make(
    model_path: str | None = None,
    runtime: str = "auto",
    work_dir: str | Path | None = None,
    *,
    url: str = "",
    model: str = "",
    api_key: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    timeout: float = DEFAULT_TIMEOUT,
) -> EndpointEmbedder:
    """The `openai` entry of ragcore's embedder registry. `url` and `model` name the server
    and its model (`model_path`, a local directory of weights, means nothing here; `runtime`
    is unused); the dimension is remembered under `work_dir`."""
    return EndpointEmbedder(
        url,
        model,
        api_key=api_key,
        batch_size=batch_size,
        timeout=timeout,
        state_dir=work_dir,
    )
