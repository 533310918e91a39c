"""What the browser shows, gathered: through the daemon for everything the index knows (search,
entries, status, the tools' writes), and read-only from the files for the history (git log
of the KB, the usage events, the journal)."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

from memory_agent import __version__, config
from memory_agent.capture.episodes import load_session
from memory_agent.capture.gate import read_state
from memory_agent.client import DaemonClient
from memory_agent.clock import Clock
from memory_agent.intake.journal import sessions
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.recall.events import LOOK_CALLER, read_events

__all__ = ["UIData"]


class UIData:
    def __init__(self, home: Path):
        self.home = home
        self.client = DaemonClient(home, timeout=120)
        self.client.caller = f"{LOOK_CALLER}/{__version__}"  # a person's look, not an agent's use
        self.clock = Clock.from_setting(config.load({"home": str(home)}).clock)  # time is a setting
        self._events_cache: tuple[tuple, list[dict[str, Any]]] | None = None
        self._sessions_cache: dict[str, tuple[tuple, dict[str, Any] | None]] = {}

    # -- through the daemon -----------------------------------------------------------------
    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        return self.client.call_tool(name, {k: v for k, v in arguments.items() if v is not None})

    def overview(self) -> dict[str, Any]:
        return self.client.admin("overview", method="GET")

    def entries(self, offset: int, limit: int, **filters: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"offset": offset, "limit": limit, **filters})
        return self.client.admin(f"entries?{query}", method="GET")

    def remote(self) -> list[dict[str, Any]]:
        """Each KB's sync state (the personal KB first): its remote, the last round, ahead and
        behind, an error or a stop, and what waits for a person (forks, variants)."""
        reply = self.client.admin("remote", method="GET")
        others = reply.pop("kbs", None) or []
        return [{"kb": "personal", **reply}, *others]

    def kbs(self) -> list[dict[str, Any]]:
        """The KBs of the home (the add form's choice): personal first."""
        return self.client.admin("kb", method="GET")["kbs"]

    def entry_context(self, entry_id: str) -> dict[str, Any]:
        return self.client.admin(f"entry?{urllib.parse.urlencode({'id': entry_id})}", "GET")

    def health(self) -> dict[str, Any] | None:
        return self.client.health()

    # -- from the files ---------------------------------------------------------------------
    def _commits(self, *log_args: str, kb: Path | None = None) -> list[dict[str, Any]]:
        """`git log` of the KB (`kb`: another KB's folder than the personal one), each commit
        with what follows its header line (the files it touched, or its diff)."""
        raw = KBRepo(kb or self.home / "kb").git(
            "log", "--format=\x1e%H\x1f%an\x1f%aI\x1f%s", *log_args, check=False
        )
        out = []
        for block in raw.split("\x1e")[1:]:
            head, _, rest = block.partition("\n")
            sha, author, when, subject = (head.split("\x1f") + ["", "", "", ""])[:4]
            out.append(
                {
                    "commit": sha,
                    "author": author,
                    "when": when,
                    "subject": subject,
                    "rest": rest.strip("\n"),
                }
            )
        return out

    def recent_writes(self, n: int = 12) -> list[dict[str, Any]]:
        commits = self._commits(f"-{n}", "--name-only")
        for c in commits:
            c["files"] = [f for f in c.pop("rest").split("\n") if f.strip()]
        return commits

    def file_history(self, path: str, n: int = 10) -> list[dict[str, Any]]:
        """The commits that touched one KB file, each with its diff."""
        file = Path(path).resolve()
        kbs = [(self.home / "kb").resolve(), (self.home / "kbs").resolve()]
        # <kb>/<type>/<id>.md or <kb>/<type>/<xx>/<id>.md: the personal KB or one under kbs/
        kb = next((k for k in file.parents[1:3] if k == kbs[0] or k.parent == kbs[1]), None)
        if kb is None:
            raise ValueError(f"{path} is not a file of a KB of this home")
        commits = self._commits(f"-{n}", "-p", "--", str(file.relative_to(kb)), kb=kb)
        for c in commits:
            c["diff"] = c.pop("rest")
        return commits

    def events(self) -> list[dict[str, Any]]:
        """Every usage event, as the daemon's fold reads them (cached until a file changes)."""
        folder = self.home / "events"
        files = sorted(folder.glob("*.jsonl*")) if folder.is_dir() else []
        key = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
        if self._events_cache is None or self._events_cache[0] != key:
            self._events_cache = (key, read_events(folder))
        return self._events_cache[1]

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
        """Captured sessions, newest first. A session's summary is parsed once and kept
        until one of its files changes (a journal only grows: pages stay fast as it does)."""
        rows = []
        for name, paths in sessions(self.home / "journal").items():
            stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
            cached = self._sessions_cache.get(name)
            if cached is None or cached[0] != stamp:
                cached = self._sessions_cache[name] = (stamp, _summary(name, paths))
            if cached[1] is not None:
                rows.append(cached[1])
        rows.sort(key=lambda r: r["started"], reverse=True)
        return len(rows), rows[offset : offset + limit]

    def session(self, name: str) -> list[Any]:
        paths = sessions(self.home / "journal").get(name)
        return load_session(paths, name) if paths else []

    def gate_state(self) -> dict[str, Any]:
        return read_state(self.home)


def _summary(name: str, paths: list[Path]) -> dict[str, Any] | None:
    episodes = load_session(paths, name)
    if not episodes:
        return None
    return {
        "session": name,
        "started": episodes[0].started,
        "turns": len([e for e in episodes if e.n > 0]),
        "failures": sum(1 for e in episodes for s in e.steps if not s.ok),
        "cwd": episodes[0].cwd,
        "client": episodes[0].client,
        "first": episodes[0].prompt[:160],
    }
