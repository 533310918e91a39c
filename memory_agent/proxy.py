"""The thin stdio proxy an MCP client launches (`memory-agent proxy`).

It reads newline-delimited JSON-RPC messages on stdin, POSTs each to the daemon's /mcp endpoint
over the Unix socket, and writes each JSON response as one line on stdout. Nothing else ever
reaches stdout: logs go to stderr. Standard library only (no torch, numpy, qdrant, mcp).

If the daemon is not running it is started (once, under the spawn lock; see
`memory_agent.client`). If the daemon dies mid-session, the next message restarts it:
read-only requests are retried; a write is retried only when it carries a `request_id` (the
daemon then replays the first reply if the write had happened); otherwise the client gets an
error telling it to check and retry with a request_id.

Design: docs/adr/0005-daemon-and-stdlib-proxy.md.
"""

from __future__ import annotations

import http.client
import json
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memory_agent.client import DaemonClient, DaemonError

__all__ = ["run_proxy"]

log = logging.getLogger("memory_agent.proxy")
READ_ONLY_TOOLS = {
    "memory_search",
    "memory_get",
    "memory_index_status",
    "memory_history",
    "memory_set_importance",
}  # importance: an idempotent event, safe to repeat
WRITE_TOOLS = {"memory_add", "memory_supersede", "memory_archive"}


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
    return name in ("memory_supersede", "memory_archive") and not args.get("confirm")


class Proxy:
    def __init__(self, client: DaemonClient, out=None):
        self.client = client
        self.out = out or sys.stdout
        self.out_lock = threading.Lock()
        self.protocol_version: str | None = None
        self.caller: str | None = None

    def write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        with self.out_lock:
            self.out.write(line + "\n")
            self.out.flush()

    def error(self, msg_id: Any, code: int, text: str) -> None:
        """An error response (id null when the request's id could not be read)."""
        self.write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}})

    def _post(self, raw: bytes) -> tuple[int, bytes]:
        return self.client.post_mcp(raw, self.protocol_version, caller=self.caller)

    def handle(self, line: str) -> None:
        """Forward one message; a request always gets a response, whatever fails."""
        try:
            message = json.loads(line)
        except ValueError:
            self.error(None, -32700, "parse error: one JSON-RPC object per line")
            return
        if not isinstance(message, dict):
            self.error(None, -32600, "invalid request: one JSON-RPC object per line")
            return
        try:
            self._forward(line, message)
        except Exception as exc:  # noqa: BLE001 - the client must never wait forever
            log.error("forwarding failed: %s", exc)
            if "id" in message:
                self.error(
                    message["id"],
                    -32603,
                    f"the memory proxy could not reach the daemon ({exc}); retry, and "
                    "see <home>/run/daemon.log if it keeps failing",
                )

    def _forward(self, line: str, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        raw = line.encode("utf-8")
        if message.get("method") == "initialize":
            info = (message.get("params") or {}).get("clientInfo") or {}
            if info.get("name"):
                self.caller = f"{info['name']}/{info.get('version', '')}".rstrip("/")[:100]
        try:
            self.client.ensure()
            try:
                status, data = self._post(raw)
            except (OSError, http.client.HTTPException) as exc:
                log.warning("daemon connection lost (%s); restarting it", exc)
                self.client.ensure()
                if not _retry_safe(message):
                    self.error(
                        msg_id,
                        -32000,
                        "the memory daemon restarted while this write was in flight; it "
                        "may or may not have been written. Check with memory_search or "
                        "memory_get, and pass a request_id so a retry is safe.",
                    )
                    return
                status, data = self._post(raw)
        except DaemonError as exc:
            self.error(msg_id, -32001, str(exc))
            return
        if status == 202 or not data:
            return  # a notification: no response
        try:
            reply = json.loads(data)
        except ValueError:
            self.error(msg_id, -32603, f"the daemon answered HTTP {status} with no JSON")
            return
        if message.get("method") == "initialize" and isinstance(reply.get("result"), dict):
            self.protocol_version = reply["result"].get("protocolVersion")
        self.write(reply)


def run_proxy(home: Path) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="memory-agent proxy: %(message)s"
    )
    proxy = Proxy(DaemonClient(home))
    try:
        proxy.client.ensure()  # start the daemon now, while the client is still setting up
    except DaemonError as exc:
        log.error("%s", exc)
    with ThreadPoolExecutor(max_workers=4) as pool:
        for line in sys.stdin:
            if line.strip():
                pool.submit(proxy.handle, line.strip())
    return 0
