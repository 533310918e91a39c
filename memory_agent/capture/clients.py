"""Which agent client's hook ran last, and when: `<home>/run/clients/<client>.json`, written by
each hook call, read by `memory-agent status` (and `memory_index_status`): capture works when
it is recent. Standard library only (the hook command writes it).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = ["last_events", "note_client"]

_CLIENT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


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
