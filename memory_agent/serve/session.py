"""A minimal MCP client over a real `memory-agent proxy` subprocess (standard library only).

Used by `scripts/demo`, the daemon benchmark and the end-to-end tests: it speaks exactly what an
agent's MCP client speaks (newline-delimited JSON-RPC on the proxy's stdin/stdout) and keeps
every line the proxy printed, so callers can check that nothing but JSON-RPC came out.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["ProxySession"]


class ProxySession:
    def __init__(
        self,
        home: Path,
        *,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
        cwd: Path | str | None = None,
    ):
        cmd = command or [sys.executable, "-m", "memory_agent", "proxy", "--home", str(home)]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            bufsize=1,
            cwd=cwd,
        )
        self.roots: list[str] | None = None  # folders answered to roots/list (None: no roots)
        self.roots_asked = 0
        self._write_lock = threading.Lock()
        self.lines: list[str] = []
        self._ids = itertools.count(1)
        self._replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("method") == "roots/list":
                self._answer_roots(message)  # a request of the server's: the client answers
                continue
            self._replies.put(line)

    def _answer_roots(self, request: dict[str, Any]) -> None:
        from urllib.parse import quote

        self.roots_asked += 1
        roots = [
            {"uri": "file://" + quote(str(Path(r).resolve())), "name": Path(r).name}
            for r in self.roots or []
        ]
        try:
            self._write({"jsonrpc": "2.0", "id": request.get("id"), "result": {"roots": roots}})
        except (OSError, ValueError):
            pass  # the proxy is gone

    def _write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()

    def send(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 300
    ) -> dict[str, Any]:
        """Send a request and wait for the response with its id."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)
        held = []
        try:
            while True:
                line = self._replies.get(timeout=timeout)
                reply = json.loads(line)
                if reply.get("id") == message["id"]:
                    return reply
                held.append(line)
        finally:
            for line in held:
                self._replies.put(line)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def initialize(self, roots: list[Path | str] | None = None) -> dict[str, Any]:
        """`roots`: offer the roots capability and answer the server's roots/list with these
        folders."""
        self.roots = [str(r) for r in roots] if roots is not None else None
        reply = self.send(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"roots": {"listChanged": True}} if roots is not None else {},
                "clientInfo": {"name": "memory-agent-session", "version": "1"},
            },
        )
        self.notify("notifications/initialized")
        return reply

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        """The tool's result object (`structuredContent`, `isError`, `content`)."""
        return self.send("tools/call", {"name": name, "arguments": arguments})["result"]

    def close(self) -> str:
        """Close stdin (the client went away) and return what the proxy wrote to stderr."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()
