"""The thin stdio proxy an MCP client launches (`memory-agent proxy`).

It reads newline-delimited JSON-RPC messages on stdin, POSTs each to the daemon's /mcp endpoint
over the Unix socket, and writes each JSON response as one line on stdout. Nothing else ever
reaches stdout: logs go to stderr. Standard library only (no torch, numpy, qdrant, mcp).

If the daemon is not running it is started (once, under the spawn lock; see
`memory_agent.client`). A daemon seen healthy is trusted for `HEALTH_TRUST_S`, so a burst of
calls costs one HTTP request each; one gone since is found at connect, where nothing was sent,
and the message goes to a fresh daemon. If the daemon dies mid-session, the next message restarts it:
read-only requests are retried; a write is retried only when it carries a `request_id` (the
daemon then replays the first reply if the write had happened); otherwise the client gets an
error telling it to check and retry with a request_id.

A home with no knowledge base (not initialised yet, or a typo in `--home`) never makes the
client wait: the proxy answers `initialize`, `ping` and `tools/list` itself (the tool list is
a snapshot of the daemon's, `tools.json`, kept equal by a test) and every tool call gets a
`not_ready` error naming `memory-agent init`. It looks again at every message, so after
`memory-agent init` the same session works.

Each call names the folder the session works in (`X-Memory-Agent-Where`), where the daemon
finds the session's project: the first of the MCP client's roots when the client offers them
(asked with `roots/list` once the session is initialised, again when they change), else the
proxy's own working directory (the one the client started it in).

With reader processes (the `read_processes` setting, ADR 0028), the daemon's health lists
where each serves; the sessions share the reads among the daemon and its readers (a session
picks one by its pid, so its reads stay with one process, in order): a session whose pick is
a reader sends its `memory_search` and `memory_get` calls there, and everything else to the
daemon. A reader that does not connect, answers an HTTP error, or answers `not_ready` is skipped
until the daemon lists a new process in its place; the call goes to the daemon.

Tool calls that fail here (too large, daemon unreachable) are answered as tool errors in the
daemon's own shape (`{"error": {"code", "message", "fix"}}`), so the model reads the fix.

Design: docs/adr/0005-daemon-and-stdlib-proxy.md.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memory_agent import __version__
from memory_agent.client import DaemonClient, NotConnected, too_large
from memory_agent.endpoint import Endpoint, read_endpoint
from memory_agent.errors import DaemonError, ErrorInfo, Invalid, MemoryAgentError, NotReady
from memory_agent.limits import MAX_MESSAGE_BYTES, lone_surrogate

__all__ = ["TOOLS_SNAPSHOT", "run_proxy"]

log = logging.getLogger("memory_agent.proxy")
TOOLS_SNAPSHOT = Path(__file__).parent / "tools.json"
READ_ONLY_TOOLS = {
    "memory_search",
    "memory_get",
    "memory_index_status",
    "memory_history",
    "memory_set_importance",
    "memory_proposals",
}  # importance: an idempotent event, safe to repeat
WRITE_TOOLS = {
    "memory_add",
    "memory_supersede",
    "memory_archive",
    "memory_resolve_fork",
}  # retried with a request_id
READER_TOOLS = {"memory_search", "memory_get"}  # what a reader process answers (ADR 0028)
LATEST_PROTOCOL = "2025-11-25"
# How long a daemon seen healthy (and of our version) is trusted before the next health check:
# back-to-back calls then cost one HTTP request each, not two. A daemon gone in between is
# found at connect (the request was never sent, so any call is resent to a fresh one).
HEALTH_TRUST_S = 2.0
ROOTS_ID = "memory-agent/roots"  # the id of the proxy's own roots/list requests to the client
ROOTS_WAIT_S = 1.0  # how long a call waits for the client's roots before using the cwd


def _root_folder(reply: dict[str, Any]) -> str | None:
    """The first local folder among a roots/list reply's `file://` roots."""
    from urllib.parse import unquote, urlsplit

    roots = (reply.get("result") or {}).get("roots") if isinstance(reply, dict) else None
    for root in roots if isinstance(roots, list) else []:
        uri = root.get("uri") if isinstance(root, dict) else None
        if isinstance(uri, str) and uri.startswith("file://"):
            path = unquote(urlsplit(uri).path)
            if os.path.isabs(path):
                return path
    return None


def _retry_safe(message: dict[str, Any]) -> bool:
    if message.get("method") != "tools/call":
        return True  # initialize, tools/list, ping...: no side effects
    params = message.get("params") or {}
    name = params.get("name")
    if name in READ_ONLY_TOOLS:
        return True
    args = params.get("arguments") or {}
    if name in WRITE_TOOLS and args.get("request_id"):
        return True
    # A preview (confirm false) writes nothing either.
    return name in (
        "memory_supersede",
        "memory_archive",
        "memory_resolve_fork",
    ) and not args.get("confirm")


def tool_error(msg_id: Any, info: ErrorInfo) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "result": {
            "content": [{"type": "text", "text": info.text}],
            "structuredContent": {"error": info.as_json()},
            "isError": True,
        },
    }


class Proxy:
    def __init__(self, client: DaemonClient, out=None):
        self.client = client
        self.out = out or sys.stdout
        self.out_lock = threading.Lock()
        self.protocol_version: str | None = None
        self.caller: str | None = None
        self._healthy_at = -HEALTH_TRUST_S  # monotonic time of the last health check
        self.where = os.getcwd()  # the session's folder: the client's first root, or ours
        self._roots_capable = False
        self._roots_asked = 0
        self._roots_ready = threading.Event()
        self._roots_ready.set()
        self.reader: Endpoint | None = None  # where this session's reads go (None: the daemon)
        self._reader_pid: int | None = None
        self._skipped: set[int] = set()  # readers' pids that failed this session

    def write(self, obj: dict[str, Any]) -> None:
        try:
            line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            line.encode("utf-8")
        except UnicodeEncodeError:  # an id or text with a lone surrogate: escape it
            line = json.dumps(obj, separators=(",", ":"))
        with self.out_lock:
            self.out.write(line + "\n")
            self.out.flush()

    def error(self, msg_id: Any, code: int, text: str) -> None:
        """An error response (id null when the request's id could not be read)."""
        self.write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}})

    def fail(self, message: dict[str, Any], exc: MemoryAgentError) -> None:
        """Answer a request that could not be forwarded: a tool error for a tool call (the
        model reads it), a JSON-RPC error otherwise."""
        if "id" not in message:
            return
        info = ErrorInfo(exc.code, exc.message, exc.fix)
        if message.get("method") == "tools/call":
            self.write(tool_error(message["id"], info))
        else:
            self.error(message["id"], -32001, info.text)

    def _ensure(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._healthy_at >= HEALTH_TRUST_S:
            self._pick_reader(self.client.ensure())
            self._healthy_at = time.monotonic()

    def _pick_reader(self, health: dict[str, Any]) -> None:
        """Who answers this session's reads: the daemon or one of the readers its health lists
        as serving, by the proxy's pid (skipping any that failed this session)."""
        serving = [
            r
            for r in health.get("readers") or []
            if isinstance(r, dict) and r.get("state") == "serving" and r.get("pid")
        ]
        live = [r for r in serving if r["pid"] not in self._skipped]
        # the daemon serves reads too: N readers and the daemon share the sessions
        pool: list[dict[str, Any] | None] = [None, *sorted(live, key=lambda r: r.get("slot", 0))]
        chosen = pool[os.getpid() % len(pool)]
        if chosen is None:
            self.reader = self._reader_pid = None
            return
        if chosen["pid"] == self._reader_pid:
            return
        run_dir = self.client.run_dir
        if "port" in chosen:
            token = read_endpoint(run_dir).token  # the daemon's token: readers take it too
            self.reader = Endpoint(run_dir, int(chosen["port"]), token)
        else:
            self.reader = Endpoint(run_dir, socket=str(chosen.get("socket")))
        self._reader_pid = chosen["pid"]

    def _skip_reader(self, why: str) -> None:
        log.warning(
            "reader %s (pid %s) %s; the daemon answers",
            self.reader.where if self.reader else "?",
            self._reader_pid,
            why,
        )
        if self._reader_pid is not None:
            self._skipped.add(self._reader_pid)
        self.reader = self._reader_pid = None

    def _post_to_reader(self, raw: bytes, message: dict[str, Any]) -> tuple[int, bytes] | None:
        """The reader's answer to a read tool call, or None: send it to the daemon."""
        params = message.get("params")
        reader = self.reader
        if (
            reader is None
            or message.get("method") != "tools/call"
            or not isinstance(params, dict)
            or params.get("name") not in READER_TOOLS
        ):
            return None
        try:
            status, data = self.client.post_mcp(
                raw, self.protocol_version, caller=self.caller, where=self.where, endpoint=reader
            )
        except (OSError, http.client.HTTPException) as exc:  # a read: safe to ask the daemon
            self._skip_reader(f"failed ({exc})")
            return None
        if status != 200:
            self._skip_reader(f"answered HTTP {status}")
            return None
        if b'"not_ready"' in data:  # parsed only then: `_forward` parses the reply once
            try:
                result = json.loads(data).get("result") or {}
                error = (result.get("structuredContent") or {}).get("error") or {}
            except (ValueError, AttributeError):
                result, error = {}, {}
            if result.get("isError") and error.get("code") == "not_ready":
                self._skip_reader(f"is not ready ({error.get('message')})")
                return None
        return status, data

    def _post(self, raw: bytes) -> tuple[int, bytes]:
        return self.client.post_mcp(
            raw, self.protocol_version, caller=self.caller, where=self.where
        )

    def _ask_roots(self) -> None:
        """Ask the client for its roots (the answer comes back on stdin)."""
        self._roots_asked += 1
        self._roots_ready.clear()
        self.write(
            {"jsonrpc": "2.0", "id": f"{ROOTS_ID}/{self._roots_asked}", "method": "roots/list"}
        )

    def _roots(self, message: dict[str, Any]) -> bool:
        """Handle what concerns the client's roots; True when the message was ours."""
        method = message.get("method")
        if method == "initialize":
            caps = (message.get("params") or {}).get("capabilities") or {}
            self._roots_capable = isinstance(caps, dict) and "roots" in caps
            return False
        if method == "notifications/initialized" and self._roots_capable:
            self._ask_roots()
            return False
        if method == "notifications/roots/list_changed":
            if self._roots_capable:
                self._ask_roots()
            return True
        msg_id = message.get("id")
        if method is None and isinstance(msg_id, str) and msg_id.startswith(ROOTS_ID + "/"):
            folder = _root_folder(message)
            if folder is not None:
                self.where = folder
            elif "error" in message:
                log.info("the client refused roots/list; using %s", self.where)
            self._roots_ready.set()
            return True
        return False

    def handle(self, line: str) -> None:
        """Forward one message; a request always gets a response, whatever fails."""
        try:
            message = json.loads(line)
        except ValueError:
            self.error(_lenient_id(line), -32700, "parse error: one JSON-RPC object per line")
            return
        if not isinstance(message, dict):
            self.error(None, -32600, "invalid request: one JSON-RPC object per line")
            return
        surrogate = lone_surrogate(message.get("params"), "params")
        if surrogate is not None:
            self._refuse_surrogate(message, *surrogate)
            return
        try:
            if self._roots(message):
                return
            if len(line.encode("utf-8")) > MAX_MESSAGE_BYTES:
                raise too_large(len(line.encode("utf-8")))
            if message.get("method") == "tools/call":
                if not self._roots_ready.wait(ROOTS_WAIT_S):  # the session's folder is coming?
                    log.info("no answer to roots/list; using %s", self.where)
                    self._roots_ready.set()  # asked once: the next calls do not wait
            self._forward(line, message)
        except MemoryAgentError as exc:
            self.fail(message, exc)
        except Exception as exc:  # noqa: BLE001 - the client must never wait forever
            log.error("forwarding failed: %s", exc)
            self.fail(
                message,
                DaemonError(
                    f"the memory proxy could not reach the daemon ({exc})",
                    f"retry; see {self.client.run_dir / 'daemon.log'} if it keeps failing",
                ),
            )

    def _refuse_surrogate(self, message: dict[str, Any], where: str, char: str) -> None:
        """A string holding a lone surrogate (`"\\ud800"`, or bytes that are not UTF-8) cannot
        be forwarded: answer the request with its id, naming the argument."""
        where = where.removeprefix("params.")
        text = (
            f"{where}: contains a lone surrogate (U+{ord(char):04X}), which is not a "
            "character; nothing was done"
        )
        if message.get("method") == "tools/call":
            self.fail(message, Invalid(text, "send valid Unicode text (UTF-8)"))
        elif "id" in message:
            self.error(message["id"], -32602, f"invalid params: {text}")

    def _no_home(self, message: dict[str, Any]) -> None:
        """Serve a home that has no knowledge base: answer at once, never start a daemon."""
        method, msg_id = message.get("method"), message.get("id")
        problem = NotReady(
            f"no knowledge base at {self.client.home / 'kb'}",
            "run `memory-agent init` (or fix --home / MEMORY_AGENT_HOME in this MCP server's "
            "settings); this session picks it up without a restart",
        )
        if msg_id is None:
            return  # a notification
        if method == "initialize":
            requested = (message.get("params") or {}).get("protocolVersion")
            result = {
                "protocolVersion": requested or LATEST_PROTOCOL,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "memory-agent", "version": __version__},
                "instructions": f"{problem.message}: {problem.fix}.",
            }
            self.write({"jsonrpc": "2.0", "id": msg_id, "result": result})
        elif method == "ping":
            self.write({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        elif method == "tools/list":
            tools = json.loads(TOOLS_SNAPSHOT.read_text(encoding="utf-8"))
            self.write({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": tools}})
        else:
            self.fail(message, problem)

    def _forward(self, line: str, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        raw = line.encode("utf-8")
        if message.get("method") == "initialize":
            info = (message.get("params") or {}).get("clientInfo") or {}
            if info.get("name"):
                self.caller = f"{info['name']}/{info.get('version', '')}".rstrip("/")[:100]
        if not (self.client.home / "kb" / ".git").exists():
            self._no_home(message)
            return
        self._ensure()
        answered = self._post_to_reader(raw, message)
        if answered is not None:
            status, data = answered
        else:
            status, data = self._post_to_daemon(raw, message)
        if status == 413:
            raise too_large(len(raw))
        if status == 202 or not data:
            return  # a notification: no response
        try:
            reply = json.loads(data)
        except ValueError:
            raise DaemonError(
                f"the daemon answered HTTP {status} without JSON",
                f"see {self.client.run_dir / 'daemon.log'}",
            ) from None
        if message.get("method") == "initialize" and isinstance(reply.get("result"), dict):
            self.protocol_version = reply["result"].get("protocolVersion")
        if msg_id is not None and isinstance(reply, dict):
            self.write(reply)

    def _post_to_daemon(self, raw: bytes, message: dict[str, Any]) -> tuple[int, bytes]:
        try:
            try:
                return self._post(raw)
            except NotConnected:  # never sent: start (or find) a daemon and send it again
                self._ensure(force=True)
                return self._post(raw)
        except (OSError, http.client.HTTPException) as exc:
            log.warning("daemon connection lost (%s); restarting it", exc)
            self._pick_reader(self.client.ensure())
            if not _retry_safe(message):
                raise DaemonError(
                    "the memory daemon restarted while this write was in flight; it may or "
                    "may not have been written",
                    "check with memory_search or memory_get, and pass a request_id so a retry "
                    "is safe",
                ) from exc
            return self._post(raw)


def run_proxy(home: Path) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="memory-agent proxy: %(message)s"
    )
    proxy = Proxy(DaemonClient(home))
    if (home / "kb" / ".git").exists():
        try:
            proxy.client.ensure()  # start the daemon now, while the client is still setting up
        except MemoryAgentError as exc:
            log.error("%s", exc)
    else:
        log.error("no knowledge base at %s: run `memory-agent init`", home / "kb")
    with ThreadPoolExecutor(max_workers=4) as pool:
        # Bytes, decoded here: a line that is not UTF-8 keeps its bad bytes as surrogates
        # (refused with the request's id) instead of ending the session.
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", "surrogateescape").strip()
            if line:
                pool.submit(proxy.handle, line)
    return 0


_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def _lenient_id(line: str) -> Any:
    """The id of a message that is not valid JSON, if one can be read (so the client's
    request is answered); None otherwise."""
    found = _ID.search(line)
    if found is None:
        return None
    try:
        return json.loads(found.group(1))
    except ValueError:
        return None
