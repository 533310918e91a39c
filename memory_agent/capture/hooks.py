"""`memory-agent hook <event>`: what an agent's hook runs - capture a turn, inject recall.

Reads the hook's JSON on stdin (Claude Code's format; Codex sends the same fields; the
opencode plugin builds it). Events and what they do:

    session-start  (SessionStart)        journal a start; inject a short digest
    prompt         (UserPromptSubmit)    journal the prompt; inject recall for it
    tool           (PostToolUse)         journal the tool, its input and output (2,000 chars)
    tool-failure   (PostToolUseFailure)  journal the tool and its error (Esc: an interruption)
    denied         (PermissionDenied)    journal the tool call as denied (not a failure)
    stop           (Stop)                journal the final answer; let the gate run
    session-end    (SessionEnd)          journal the end; let the gate run

A prompt's and a start's record carry the project the session is in (`intake.projects`: the
identity of the repository holding the hook's `cwd`), and so does the recall request: another
project's episodes are never injected.

Capture writes the journal directly (redacted; `memory_agent.intake.journal`), with no daemon;
injection asks the daemon (`POST /hooks/recall` on its socket) and prints
`{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`. If the daemon is not running
the hook starts it in the background and injects nothing this time. Every hook is synchronous
(a headless `claude -p` kills background hooks when it ends): Stop and SessionEnd only send the
gate its signal, they do not wait for it.

What a call becomes in the journal is `memory_agent.capture.records`; at Stop, the calls the
agent fired no hook for (Claude Code's silent denials, Codex's failed MCP calls) are read from
its transcript (`memory_agent.capture.transcripts`) and journaled before the answer.

Each hook writes `<home>/run/clients/<client>.json` (the event and when;
`memory_agent.capture.clients`), which `memory-agent status` shows per agent client. A hook
never breaks or stalls the agent: whatever fails, or when
`hook_budget_ms` (config.toml or MEMORY_AGENT_HOOK_BUDGET_MS; 1.5 s) is up, it exits 0 with no
output and writes one line to `<home>/run/hooks.log`. `capture = off` stops the journal
(injection goes on); `inject = off` stops injection; both off, a hook does nothing. Standard
library only (a test checks the imports): it starts in tens of milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from memory_agent.capture.clients import note_client
from memory_agent.capture.records import record_for
from memory_agent.capture.transcripts import claude_denials, codex_failed_mcp

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["EVENTS", "main", "run"]

# our name -> Claude Code's
EVENTS = {
    "session-start": "SessionStart",
    "prompt": "UserPromptSubmit",
    "tool": "PostToolUse",
    "tool-failure": "PostToolUseFailure",
    "denied": "PermissionDenied",
    "stop": "Stop",
    "session-end": "SessionEnd",
}
BY_HOOK_NAME = {v: k for k, v in EVENTS.items()}
MAX_STDIN = 32_000_000  # a 2 MB prompt of non-ASCII text is up to 8 MB of UTF-8: cut, not dropped


def _log(home: Path | None, message: str) -> None:
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {os.getpid()} {message}\n"
    try:
        if home is None or not (home / "run").is_dir():
            raise OSError
        path = home / "run" / "hooks.log"
        if path.exists() and path.stat().st_size > 1_000_000:
            os.replace(path, path.with_name("hooks.log.1"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        sys.stderr.write("memory-agent hook: " + line)


def _start_daemon_in_background(home: Path) -> None:
    """Start the daemon without waiting for it (unless another process is starting it)."""
    from memory_agent.client import DaemonClient
    from memory_agent.files import FileLock

    client = DaemonClient(home)
    client.run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(client.run_dir / "spawn.lock")
    if not lock.try_acquire():
        return  # someone is starting it
    try:
        if client.health(timeout=0.2) is None:
            client.spawn()
    finally:
        lock.release()


def _post(home: Path, route: str, body: dict[str, Any], timeout: float, wait: bool = True):
    """POST JSON to the daemon over its socket with a bare HTTP/1.1 request (http.client and
    its email parser cost a hook ~20 ms to import). None when no daemon answers."""
    from memory_agent.endpoint import connect, read_endpoint

    endpoint = read_endpoint(home / "run")
    data = json.dumps(body).encode("utf-8")
    extra = "".join(f"{k}: {v}\r\n" for k, v in endpoint.headers().items())
    request = (
        f"POST {route} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode() + data
    try:
        sock = connect(endpoint, max(timeout, 0.05))
    except OSError:
        return None
    try:
        sock.sendall(request)
        if not wait:
            return {}
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    if status != 200:
        raise RuntimeError(f"the daemon answered {route} with HTTP {status}: {payload[:200]!r}")
    return json.loads(payload)


def _ask(home: Path, route: str, body: dict[str, Any], timeout: float, wait: bool = True):
    reply = _post(home, route, body, timeout, wait)
    if reply is None:
        _start_daemon_in_background(home)
        _log(home, f"{route}: the daemon was not running; started it, nothing injected this time")
    return reply


def run(
    event: str, payload: dict[str, Any], home: Path, client: str, deadline: float, cfg: Any = None
) -> str:
    """Capture and, for the events that inject, the text to print (maybe empty)."""
    from memory_agent.clock import Clock
    from memory_agent.intake import journal

    if cfg is None:
        from memory_agent import config as config_mod

        cfg = config_mod.load({"home": str(home)})
    if not (home / "kb" / ".git").exists():
        raise RuntimeError(f"no knowledge base at {home / 'kb'}: run `memory-agent init`")
    session = str(payload.get("session_id") or "unknown-session")
    now = Clock.from_setting(cfg.clock).now()
    project = None  # the identity of the project the session is in (prompt and start only)
    if event in ("prompt", "session-start") and payload.get("cwd"):
        from memory_agent.intake.projects import identify

        found = identify(str(payload["cwd"]))
        project = found.identity if found is not None else None
    note_client(home, client, event, now)
    if str(cfg.capture) == "on":
        if event == "stop" and client in ("claude-code", "codex"):
            # calls no hook reported (before the answer): Claude Code's silent denials, Codex's
            # failed MCP calls
            missed = claude_denials if client == "claude-code" else codex_failed_mcp
            try:
                for kind, call in missed(payload, home / "journal", session):
                    journal.append(home / "journal", session, record_for(kind, call, now, client))
            except Exception as exc:  # noqa: BLE001 - the answer is journaled all the same
                _log(home, f"stop: unreported calls not read from the transcript: {exc}")
        record = record_for(event, payload, now, client)
        if project:
            record["project"] = project
        journal.append(home / "journal", session, record)
    remaining = deadline - time.monotonic()
    if event in ("stop", "session-end"):  # let the gate run: sent, not waited for
        _ask(home, "/hooks/event", {"event": event, "session": session}, remaining, wait=False)
        return "{}" if client == "codex" else ""  # Codex's Stop must print JSON
    if event not in ("prompt", "session-start") or str(cfg.inject) != "on":
        return ""
    reply = _ask(
        home,
        "/hooks/recall",
        {
            "prompt": str(payload.get("prompt") or ""),
            "session": session,
            "event": event,
            "cwd": payload.get("cwd"),
            "project": project,
        },
        remaining,
    )
    context = (reply or {}).get("context") or ""
    if not context and client != "codex":  # Codex wants the envelope, even empty
        return ""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": context}},
        ensure_ascii=False,
    )


def main(argv: list[str]) -> int:
    """`memory-agent hook [EVENT] [--home DIR] [--client NAME]`; always exits 0."""
    started = time.monotonic()
    event, home_arg, client = None, None, "claude-code"
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--home" and args:
            home_arg = args.pop(0)
        elif arg == "--client" and args:
            client = args.pop(0)
        elif arg.startswith("--home="):
            home_arg = arg.split("=", 1)[1]
        elif event is None and not arg.startswith("-"):
            event = arg
    home = Path(
        os.path.expanduser(home_arg or os.environ.get("MEMORY_AGENT_HOME") or "~/.memory-agent")
    ).resolve()
    budget_ms, cfg, cfg_error = 1500.0, None, None
    try:  # the budget is a setting like any other: flag > environment > config.toml
        from memory_agent import config as config_mod

        cfg = config_mod.load({"home": str(home)})
        budget_ms = float(cfg.hook_budget_ms)
    except Exception as exc:  # noqa: BLE001 - reported below, within the default budget
        cfg_error = exc

    import threading  # the budget: a timer thread, on every OS (no SIGALRM on Windows)

    def expire() -> None:
        """The budget is up, wherever the hook is: say so in the log and exit 0 with no
        output. The journal line, one write(), is written whole or not at all."""
        what = "nothing injected" if event in ("prompt", "session-start") else "not journaled"
        _log(home, f"{event}: over the {budget_ms:.0f} ms budget; {what}")
        os._exit(0)

    timer = threading.Timer(budget_ms / 1000.0, expire)
    timer.daemon = True
    timer.start()
    output = ""
    try:
        raw = sys.stdin.buffer.read(MAX_STDIN + 1) if sys.stdin is not None else b""
        payload = json.loads(raw[:MAX_STDIN] or b"{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook's input is not a JSON object")
        event = event or BY_HOOK_NAME.get(str(payload.get("hook_event_name")), "")
        event = BY_HOOK_NAME.get(event, event)
        if event not in EVENTS:
            raise ValueError(f"unknown hook event {event!r}; use one of {', '.join(EVENTS)}")
        if cfg_error is not None:
            raise cfg_error
        output = run(event, payload, home, client, started + budget_ms / 1000.0, cfg)
    except Exception as exc:  # noqa: BLE001 - a hook never breaks the agent
        _log(home, f"{event}: {type(exc).__name__}: {exc}")
        output = ""
    finally:
        timer.cancel()
    if output:
        sys.stdout.write(output + "\n")
        sys.stdout.flush()
    return 0
