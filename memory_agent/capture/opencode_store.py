"""opencode's session storage read as past sessions (`capture.past_sessions`).

opencode 1.x keeps its sessions in one SQLite file, `~/.local/share/opencode/opencode.db`
(`$XDG_DATA_HOME/opencode/`): a `session` row (id, directory, parent_id), its `message` rows
(`data`: role, time) and each message's `part` rows (`data`: a `text` part, a `tool` part with
its `state`). Read as 1.18.33 writes it (`tests/e2e` drives it), opened read-only (opencode may
be running), one session at a time:

- a turn is a user message with text that is not `synthetic` (its text parts, joined);
- a `tool` part is the tool call the plugin's `tool.execute.after` would have journaled: the
  tool's name, `callID`, input, and as response `{title, output, metadata}` with bash's
  `metadata.exit` as `exit_code`; a part whose state is `error` is a failure with its error;
- the answer is the last text part of the turn's assistant messages;
- a session started by another session's tool (a subagent: `parent_id` set) is not imported:
  its calls are the parent's `task` call. Times are the source's (milliseconds).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_agent.capture.past_sessions import Call, PastSession, PastTurn

__all__ = ["is_opencode_db", "read_opencode"]

_TABLES = {"session", "message", "part"}


def _open(path: Path) -> sqlite3.Connection:
    """The database read-only (opencode may have it open; its WAL is read as well)."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    con = sqlite3.connect(uri, uri=True, timeout=5.0)
    con.execute("PRAGMA query_only = ON")
    return con


def is_opencode_db(path: Path) -> bool:
    try:
        con = _open(path)
    except sqlite3.Error:
        return False
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not _TABLES <= names:
            return False
        columns = {r[1] for r in con.execute("PRAGMA table_info(session)")}
        return {"id", "directory"} <= columns
    except sqlite3.Error:
        return False
    finally:
        con.close()


def _json(text: Any) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _seconds(ms: Any, fallback: float) -> float:
    return float(ms) / 1000.0 if isinstance(ms, (int, float)) and ms > 0 else fallback


def _tool_call(part: dict[str, Any], fallback: float) -> Call | None:
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    status = state.get("status")
    if status not in ("completed", "error"):
        return None  # pending or running: no hook fired for it
    times = state.get("time") if isinstance(state.get("time"), dict) else {}
    ts = _seconds(times.get("end") or times.get("start"), fallback)
    payload: dict[str, Any] = {
        "tool_name": str(part.get("tool") or "tool"),
        "tool_use_id": str(part.get("callID") or ""),
        "tool_input": state.get("input"),
    }
    if status == "error":
        return Call("tool-failure", {**payload, "error": str(state.get("error") or "failed")}, ts)
    metadata = state.get("metadata")
    response: dict[str, Any] = {
        "title": state.get("title"),
        "output": state.get("output"),
        "metadata": metadata,
    }
    exit_code = metadata.get("exit") if isinstance(metadata, dict) else None
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        response["exit_code"] = exit_code
    return Call("tool", {**payload, "tool_response": response}, ts)


def read_opencode(path: Path) -> Iterator[PastSession]:
    """Every top-level session of an opencode database, oldest first."""
    con = _open(path)
    try:
        listed = con.execute(
            "SELECT id, directory, parent_id, time_created FROM session ORDER BY time_created, id"
        ).fetchall()
        for session_id, directory, parent, _created in listed:
            if parent:
                continue
            session = PastSession("opencode", str(session_id), path, str(directory or ""))
            turn: PastTurn | None = None
            messages = con.execute(
                "SELECT id, time_created, data FROM message WHERE session_id = ? "
                "ORDER BY time_created, id",
                (session_id,),
            ).fetchall()
            for message_id, created, data in messages:
                info = _json(data)
                times = info.get("time") if isinstance(info.get("time"), dict) else {}
                ts = _seconds(times.get("created") or created, 0.0)
                parts = [
                    _json(p)
                    for (p,) in con.execute(
                        "SELECT data FROM part WHERE message_id = ? ORDER BY id", (message_id,)
                    )
                ]
                if info.get("role") == "user":
                    texts = [
                        str(p.get("text") or "")
                        for p in parts
                        if p.get("type") == "text" and not p.get("synthetic")
                    ]
                    prompt = "\n".join(t for t in texts if t)
                    if prompt.strip():
                        turn = PastTurn(prompt, ts)
                        session.turns.append(turn)
                    continue
                if turn is None:
                    continue
                for part in parts:
                    if part.get("type") == "tool":
                        call = _tool_call(part, ts)
                        if call is not None:
                            turn.calls.append(call)
                    elif part.get("type") == "text" and str(part.get("text") or "").strip():
                        done = _seconds(times.get("completed"), ts)
                        turn.answer, turn.answer_ts = str(part["text"]), done
            if session.turns:
                yield session
    finally:
        con.close()
