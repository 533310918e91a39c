"""What the browser shows, gathered: through the daemon for everything the index knows (search,
entries, status, the tools' writes), and read-only from the files for the history (git log
of the KB, the usage events, the journal)."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import subprocess
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.clock import Clock
from memory_agent.episodes import load_session
from memory_agent.journal import sessions

__all__ = ["UIData"]


class UIData:
    def __init__(self, home: Path):
        self.home = home
        self.client = DaemonClient(home, timeout=120)
        self.clock = Clock.from_setting(config.load({"home": str(home)}).clock)  # time is a setting
        self._events_cache: tuple[tuple, list[dict[str, Any]]] | None = None

    # -- through the daemon -----------------------------------------------------------------
    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        return self.client.call_tool(name, {k: v for k, v in arguments.items() if v is not None})

    def overview(self) -> dict[str, Any]:
        return self.client.admin("overview", method="GET")

    def entries(self, offset: int, limit: int, **filters: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"offset": offset, "limit": limit, **filters})
        return self.client.admin(f"entries?{query}", method="GET")

    def entry_context(self, entry_id: str) -> dict[str, Any]:
        return self.client.admin(f"entry?{urllib.parse.urlencode({'id': entry_id})}", "GET")

    def health(self) -> dict[str, Any] | None:
        return self.client.health()

    # -- from the files ---------------------------------------------------------------------
    def _git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", "-C", str(self.home / "kb"), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return proc.stdout if proc.returncode == 0 else ""

    def recent_writes(self, n: int = 12) -> list[dict[str, Any]]:
        out = []
        raw = self._git("log", f"-{n}", "--name-only", "--format=\x1e%H\x1f%an\x1f%aI\x1f%s")
        for block in raw.split("\x1e")[1:]:
            head, _, files = block.partition("\n")
            sha, author, when, subject = (head.split("\x1f") + ["", "", "", ""])[:4]
            out.append(
                {
                    "commit": sha,
                    "author": author,
                    "when": when,
                    "subject": subject,
                    "files": [f for f in files.split("\n") if f.strip()],
                }
            )
        return out

    def file_history(self, path: str, n: int = 10) -> list[dict[str, Any]]:
        """The commits that touched one KB file, each with its diff."""
        rel = str(Path(path).resolve().relative_to((self.home / "kb").resolve()))
        raw = self._git("log", f"-{n}", "-p", "--format=\x1e%H\x1f%an\x1f%aI\x1f%s", "--", rel)
        out = []
        for block in raw.split("\x1e")[1:]:
            head, _, diff = block.partition("\n")
            sha, author, when, subject = (head.split("\x1f") + ["", "", "", ""])[:4]
            out.append({"commit": sha, "author": author, "when": when, "subject": subject,
                        "diff": diff.strip("\n")})  # fmt: skip
        return out

    def events(self) -> list[dict[str, Any]]:
        """Every usage event (cached until a file changes)."""
        folder = self.home / "events"
        files = sorted(folder.glob("*.jsonl*")) if folder.is_dir() else []
        key = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
        if self._events_cache is not None and self._events_cache[0] == key:
            return self._events_cache[1]
        events = []
        for f in files:
            opener = gzip.open if f.name.endswith(".gz") else open
            try:
                with opener(f, "rt", encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        try:
                            events.append(json.loads(line))
                        except ValueError:
                            continue
            except OSError:
                continue
        self._events_cache = (key, events)
        return events

    def activity(self, days: int = 30, entry: str | None = None) -> list[tuple[str, int]]:
        """Recalls per day over the last `days` days (of one entry, or of all)."""
        counts: Counter[str] = Counter()
        newest = 0.0
        for e in self.events():
            if e.get("kind") != "recall" or not isinstance(e.get("ts"), (int, float)):
                continue
            if entry is not None and e.get("entry") != entry:
                continue
            day = dt.datetime.fromtimestamp(e["ts"], dt.UTC).strftime("%Y-%m-%d")
            counts[day] += 1
            newest = max(newest, e["ts"])
        end = dt.datetime.fromtimestamp(newest or self.clock.now(), dt.UTC)
        out = []
        for back in range(days - 1, -1, -1):
            day = (end - dt.timedelta(days=back)).strftime("%Y-%m-%d")
            out.append((day, counts.get(day, 0)))
        return out

    def sessions(self, offset: int = 0, limit: int = 30) -> tuple[int, list[dict[str, Any]]]:
        """Captured sessions, newest first."""
        rows = []
        for name, paths in sessions(self.home / "journal").items():
            episodes = load_session(paths, name)
            if not episodes:
                continue
            rows.append(
                {
                    "session": name,
                    "started": episodes[0].started,
                    "turns": len([e for e in episodes if e.n > 0]),
                    "failures": sum(1 for e in episodes for s in e.steps if not s.ok),
                    "cwd": episodes[0].cwd,
                    "client": episodes[0].client,
                    "first": episodes[0].prompt[:160],
                }
            )
        rows.sort(key=lambda r: r["started"], reverse=True)
        return len(rows), rows[offset : offset + limit]

    def session(self, name: str) -> list[Any]:
        paths = sessions(self.home / "journal").get(name)
        return load_session(paths, name) if paths else []

    def gate_state(self) -> dict[str, Any]:
        try:
            return json.loads((self.home / "inbox" / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
