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

Capture writes the journal directly (redacted; `memory_agent.capture.journal`), with no daemon;
injection asks the daemon (`POST /hooks/recall` on its socket) and prints
`{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`. If the daemon is not running
the hook starts it in the background and injects nothing this time. Every hook is synchronous
(a headless `claude -p` kills background hooks when it ends): Stop and SessionEnd only send the
gate its signal, they do not wait for it.

Only a failed tool call or a failed command says what went wrong in `error` (what the gate
learns from); an interrupted call (`is_interrupt`) is `ok: false, interrupted: true`, a denied
one `ok: false, denied: <reason>`, neither with an `error` (Claude Code fires PermissionDenied
only in auto mode: the Stop hook also reads the calls `claude -p` refused from the end of the
transcript). Codex reports a shell command's
output as a plain string with no exit code: the hook reads the code from the end of the
session's rollout file (`transcript_path`, matched by `tool_use_id`), and at Stop the turn's
failed MCP calls, for which Codex fires no hook. An MCP result
(`CallToolResult`) is journaled once (its `structuredContent` when it has one) with
`ok = not isError`.

Each hook writes `<home>/run/clients/<client>.json` (the event and when), which `memory-agent
status` shows per agent client. A hook never breaks or stalls the agent: whatever fails, or when
`hook_budget_ms` (config.toml or MEMORY_AGENT_HOOK_BUDGET_MS; 1.5 s) is up, it exits 0 with no
output and writes one line to `<home>/run/hooks.log`. `capture = off` stops the journal
(injection goes on); `inject = off` stops injection; both off, a hook does nothing. Standard
library only (a test checks the imports): it starts in tens of milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["EVENTS", "last_events", "main"]

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
ROLLOUT_TAIL = 512_000  # bytes of a Codex rollout read from its end, then once 8 times more
_CLIENT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_EXITED = re.compile(r"Process exited with code (-?\d+)")


class _Budget(Exception):
    pass


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


def _tool_ok(response: Any) -> bool:
    """Whether a PostToolUse response says the tool worked (an exit code, when there is one)."""
    if isinstance(response, dict):
        code = response.get("exit_code", response.get("exitCode", response.get("returncode")))
        if isinstance(code, int):
            return code == 0
        if response.get("success") is False or response.get("is_error") is True:
            return False
        if response.get("isError") is True:  # an MCP CallToolResult (Codex sends it whole)
            return False
    return True


def _mcp_once(response: dict[str, Any]) -> dict[str, Any]:
    """An MCP CallToolResult with its text once: `structuredContent` is the same result as
    `content[].text` (the MCP spec asks servers to send both), so keep only the structure."""
    if "structuredContent" not in response or not isinstance(response.get("content"), list):
        return response
    rest = [c for c in response["content"] if not (isinstance(c, dict) and c.get("type") == "text")]
    out = {k: v for k, v in response.items() if k != "content"}
    if rest:  # images, resources: not a copy of the structure
        out["content"] = rest
    return out


def rollout_exit_code(transcript: Any, call_id: Any) -> int | None:
    """The exit code Codex recorded for command `call_id` in its rollout file, read from the
    end (the last ROLLOUT_TAIL bytes, then once eight times that); None when not found."""
    if not isinstance(transcript, str) or not isinstance(call_id, str) or not call_id:
        return None
    if not transcript.endswith(".jsonl"):
        return None
    needle = json.dumps(call_id).encode()
    try:
        fd = os.open(transcript, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        for window in (ROLLOUT_TAIL, ROLLOUT_TAIL * 8):
            start = max(0, size - window)
            data = os.pread(fd, size - start, start)
            if start:
                data = data[data.find(b"\n") + 1 :]  # the first line may be cut
            for line in reversed(data.splitlines()):
                if needle not in line:
                    continue
                code = _exit_code_of(line, call_id)
                if code is not None:
                    return code
            if not start:
                break
    finally:
        os.close(fd)
    return None


def _exit_code_of(line: bytes, call_id: str) -> int | None:
    try:
        payload = json.loads(line).get("payload") or {}
    except (ValueError, AttributeError):
        return None
    if not isinstance(payload, dict):
        return None
    item = payload.get("item")
    if payload.get("type") == "item_completed" and isinstance(item, dict):
        if item.get("id") == call_id and isinstance(item.get("exit_code"), int):
            return item["exit_code"]
    if payload.get("type") == "exec_command_end" and payload.get("call_id") == call_id:
        code = payload.get("exit_code")
        return code if isinstance(code, int) else None
    if payload.get("type") == "function_call_output" and payload.get("call_id") == call_id:
        m = _EXITED.search(str(payload.get("output") or "")[:400])
        return int(m.group(1)) if m else None
    return None


def record_for(event: str, payload: dict[str, Any], now: float, client: str) -> dict[str, Any]:
    """The journal record of one hook call."""
    base: dict[str, Any] = {"ts": now, "event": event, "client": client}
    if payload.get("cwd"):
        base["cwd"] = str(payload["cwd"])
    if event == "session-start":
        return {**base, "event": "start", "source": payload.get("source")}
    if event == "prompt":
        return {**base, "prompt": str(payload.get("prompt") or "")}
    if event in ("tool", "tool-failure", "denied"):
        out = {
            **base,
            "event": "tool",
            "tool": str(payload.get("tool_name") or "tool"),
            "input": payload.get("tool_input"),
        }
        if payload.get("tool_use_id"):
            out["call"] = str(payload["tool_use_id"])[:100]
        if event == "denied":  # not run at all: nothing for the gate to learn from
            out.update(ok=False, denied=str(payload.get("reason") or "permission denied"))
        elif event == "tool-failure" and payload.get("is_interrupt") is True:
            out.update(ok=False, interrupted=True)  # the user pressed Esc: not a failure
            if payload.get("error"):
                out["note"] = str(payload["error"])
        elif event == "tool-failure":
            out.update(ok=False, error=str(payload.get("error") or "failed"))
        else:
            response = payload.get("tool_response")
            if isinstance(response, dict) and "isError" in response:
                response = _mcp_once(response)
            out.update(output=response, ok=_tool_ok(response))
            if client == "codex" and isinstance(response, str):
                code = _codex_exit_code(payload)
                if code is not None:
                    out.update(exit_code=code, ok=code == 0)
        return out
    if event == "stop":
        return {**base, "answer": str(payload.get("last_assistant_message") or "")}
    if event == "session-end":
        return {**base, "event": "end", "reason": payload.get("reason")}
    return base


def _codex_exit_code(payload: dict[str, Any]) -> int | None:
    """A Codex command's exit code from its rollout. Codex records the command's completion
    before it runs PostToolUse; should the write lag, look twice more for a shell command
    (`Bash`), 20 ms apart (another tool may simply have no exit code)."""
    tries = 3 if payload.get("tool_name") == "Bash" else 1
    for attempt in range(tries):
        code = rollout_exit_code(payload.get("transcript_path"), payload.get("tool_use_id"))
        if code is not None or attempt == tries - 1:
            return code
        time.sleep(0.02)
    return None


def _tail_lines(path: Any, size: int, needle: bytes) -> list[bytes]:
    """The whole lines holding `needle` among the last `size` bytes of `path`, oldest first."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return []
    try:
        end = os.fstat(fd).st_size
        start = max(0, end - size)
        data = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    if needle not in data:
        return []
    if start:
        data = data[data.find(b"\n") + 1 :]
    return [line for line in data.splitlines() if needle in line]


def claude_denials(
    payload: dict[str, Any], folder: Path, session: str, now: float, client: str
) -> list[dict[str, Any]]:
    """Tool calls Claude Code denied without a PermissionDenied hook (2.1.332 fires that event
    only for its auto-mode classifier; `claude -p` denies a tool no rule allows silently), read
    at Stop from the end of its transcript (`toolDenialKind` on the tool result), less those
    the journal already holds (by tool_use_id)."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript.endswith(".jsonl"):
        return []
    denied: dict[str, str] = {}
    for line in _tail_lines(transcript, ROLLOUT_TAIL, b'"toolDenialKind"'):
        try:
            content = (json.loads(line).get("message") or {}).get("content")
        except (ValueError, AttributeError):
            continue
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = block.get("content")
                if isinstance(text, list):
                    text = " ".join(str(t.get("text", "")) for t in text if isinstance(t, dict))
                denied[str(block.get("tool_use_id"))] = str(text or "permission denied")[:500]
    if not denied:
        return []
    _drop_journaled(denied, folder, session)
    out = []
    for line in _tail_lines(transcript, ROLLOUT_TAIL, b'"tool_use"'):
        try:
            content = (json.loads(line).get("message") or {}).get("content")
        except (ValueError, AttributeError):
            continue
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                reason = denied.pop(str(block.get("id")), None)
                if reason is not None:
                    fake = {**payload, "tool_name": block.get("name"), "reason": reason,
                            "tool_input": block.get("input"), "tool_use_id": block.get("id")}  # fmt: skip
                    out.append(record_for("denied", fake, now, client))
    return out


def _drop_journaled(calls: dict[str, Any], folder: Path, session: str) -> None:
    """Remove from `calls` the tool_use_ids the session's journal already holds (its end)."""
    from memory_agent.capture.journal import session_name

    journal = folder / f"{session_name(session)}.jsonl"
    for line in _tail_lines(journal, 256_000, b'"call"'):
        try:
            calls.pop(str(json.loads(line).get("call")), None)
        except (ValueError, AttributeError):
            continue


def codex_failed_mcp(
    payload: dict[str, Any], folder: Path, session: str, now: float, client: str
) -> list[dict[str, Any]]:
    """MCP tool calls that failed in this Codex turn, read at Stop from the end of its rollout
    (Codex 0.171.0 fires no PostToolUse for them), less those the journal already holds."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript.endswith(".jsonl"):
        return []
    failed: dict[str, dict[str, Any]] = {}
    for line in _tail_lines(transcript, ROLLOUT_TAIL, b'"McpToolCall"'):
        try:
            event = json.loads(line).get("payload") or {}
            item = event.get("item") or {}
        except (ValueError, AttributeError):
            continue
        if not (event.get("type") == "item_completed" and isinstance(item, dict)):
            continue
        if item.get("type") != "McpToolCall" or item.get("status") != "failed":
            continue
        if payload.get("turn_id") and event.get("turn_id") not in (None, payload["turn_id"]):
            continue
        failed[str(item.get("id"))] = item
    _drop_journaled(failed, folder, session)
    out = []
    for call, item in failed.items():
        result = item.get("result") if isinstance(item.get("result"), dict) else {}
        texts = [c.get("text") for c in result.get("content") or [] if isinstance(c, dict)]
        error = " ".join(str(t) for t in texts if t) or str(item.get("error") or "failed")
        fake = {**payload, "tool_name": f"mcp__{item.get('server')}__{item.get('tool')}",
                "tool_input": item.get("arguments"), "tool_use_id": call, "error": error}  # fmt: skip
        out.append(record_for("tool-failure", fake, now, client))
    return out


def note_client(home: Path, client: str, event: str, now: float) -> None:
    """Record that `client`'s hook ran `event` now: `<home>/run/clients/<client>.json`."""
    if not _CLIENT.match(client):
        return
    folder = home / "run" / "clients"
    data = json.dumps({"event": event, "at": now}).encode()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = folder / f".{client}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, folder / f"{client}.json")
    except OSError:
        pass


def last_events(home: Path) -> dict[str, dict[str, Any]]:
    """{client: {"event", "at" (ISO 8601, UTC)}} of each agent client's last hook event, from
    `run/clients/` (what `memory-agent status` shows: capture works when it is recent)."""
    out: dict[str, dict[str, Any]] = {}
    folder = Path(home) / "run" / "clients"
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("at"), (int, float)):
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(data["at"]))
            out[path.stem] = {"event": str(data.get("event") or ""), "at": at}
    return out


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
    data = json.dumps(body).encode("utf-8")
    request = (
        f"POST {route} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode() + data
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(max(timeout, 0.05))
    try:
        try:
            sock.connect(str(home / "run" / "daemon.sock"))
        except OSError:
            return None
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
    from memory_agent.capture import journal
    from memory_agent.clock import Clock

    if cfg is None:
        from memory_agent import config as config_mod

        cfg = config_mod.load({"home": str(home)})
    if not (home / "kb" / ".git").exists():
        raise RuntimeError(f"no knowledge base at {home / 'kb'}: run `memory-agent init`")
    session = str(payload.get("session_id") or "unknown-session")
    now = Clock.from_setting(cfg.clock).now()
    note_client(home, client, event, now)
    if str(cfg.capture) == "on":
        if event == "stop" and client in ("claude-code", "codex"):
            # calls no hook reported (before the answer): Claude Code's silent denials, Codex's
            # failed MCP calls
            missed = claude_denials if client == "claude-code" else codex_failed_mcp
            try:
                for record in missed(payload, home / "journal", session, now, client):
                    journal.append(home / "journal", session, record)
            except Exception as exc:  # noqa: BLE001 - the answer is journaled all the same
                _log(home, f"stop: unreported calls not read from the transcript: {exc}")
        journal.append(home / "journal", session, record_for(event, payload, now, client))
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
    home = Path(os.path.expanduser(home_arg or os.environ.get("MEMORY_AGENT_HOME")
                                   or "~/.memory-agent")).resolve()  # fmt: skip
    budget_ms, cfg, cfg_error = 1500.0, None, None
    try:  # the budget is a setting like any other: flag > environment > config.toml
        from memory_agent import config as config_mod

        cfg = config_mod.load({"home": str(home)})
        budget_ms = float(cfg.hook_budget_ms)
    except Exception as exc:  # noqa: BLE001 - reported below, within the default budget
        cfg_error = exc

    def expire(signum, frame):
        raise _Budget()

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, budget_ms / 1000.0)
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
    except _Budget:
        what = "nothing injected" if event in ("prompt", "session-start") else "not journaled"
        _log(home, f"{event}: over the {budget_ms:.0f} ms budget; {what}")
        output = ""
    except Exception as exc:  # noqa: BLE001 - a hook never breaks the agent
        _log(home, f"{event}: {type(exc).__name__}: {exc}")
        output = ""
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if output:
        sys.stdout.write(output + "\n")
        sys.stdout.flush()
    return 0
