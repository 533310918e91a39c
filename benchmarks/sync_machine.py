"""A home as the sync benchmark (`benchmarks/sync.py`) drives it: its environment, its CLI as a
user runs it, its proxy session and daemon, and the MCP calls the phases time."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from memory_agent.client import DaemonClient
from memory_agent.serve.session import ProxySession

ROOT = Path(__file__).resolve().parents[1]


class Machine:
    """A home and the environment its CLI calls and daemon run with."""

    def __init__(self, name: str, home: Path, cache: Path, cwd: Path):
        self.name, self.home, self.cache, self.cwd = name, home, cache, cwd
        self.interval: float | None = None  # None: the default sync_interval

    def env(self) -> dict[str, str]:
        env = dict(
            os.environ,
            MEMORY_AGENT_HOME=str(self.home),
            MEMORY_AGENT_CACHE=str(self.cache),
            MEMORY_AGENT_EMBEDDER="minilm",
            MEMORY_AGENT_IDLE_EXIT="0",
            MEMORY_AGENT_START_TIMEOUT="3600",
            MEMORY_AGENT_MACHINE=self.name,
            # absolute: the CLIs run in `cwd`, where a relative `PYTHONPATH=.` would leave the
            # daemons importing the installed package instead of this checkout
            PYTHONPATH=os.pathsep.join(
                str(Path(p).resolve())
                for p in (os.environ.get("PYTHONPATH") or str(ROOT)).split(os.pathsep)
                if p
            ),
        )
        env.pop("MEMORY_AGENT_SYNC_INTERVAL", None)
        if self.interval is not None:
            env["MEMORY_AGENT_SYNC_INTERVAL"] = f"{self.interval:g}"
        return env

    def cli(self, *args: str) -> tuple[float, dict]:
        """One `memory-agent` command as a user runs it: (seconds, its JSON reply)."""
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(self.home), "--json"],
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=self.cwd,
            timeout=7200,
        )
        elapsed = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(
                f"{self.name}: memory-agent {args[0]} failed: "
                f"{(proc.stderr or proc.stdout)[-2000:]}"
            )
        return elapsed, json.loads(proc.stdout) if proc.stdout.strip() else {}

    def finds(self, entry_id: str, query: str) -> bool:
        """Whether a search finds the entry; False while the home has no index yet (the
        search's `not_ready`: a first index is being built)."""
        try:
            _, reply = self.cli("search", query, "--limit", "20")
        except RuntimeError as exc:
            if "not_ready" in str(exc):
                return False
            raise
        return entry_id in [h["id"] for h in reply.get("hits", [])]

    def model_load_s(self) -> float | None:
        """The model's load time, from the daemon's log."""
        log = (self.home / "run" / "daemon.log").read_text(errors="replace")
        found = re.findall(r"model \S+ loaded in ([\d.]+) s", log)
        return float(found[-1]) if found else None

    def session(self) -> ProxySession:
        s = ProxySession(self.home, env=self.env(), cwd=self.cwd)
        s.initialize()
        return s

    def stop(self) -> None:
        DaemonClient(self.home).stop(wait=True, timeout=120)


def cached_vectors(cache: Path) -> int:
    path = cache / "embeddings.sqlite"
    if not path.is_file():
        return 0
    with sqlite3.connect(path, timeout=30) as conn:
        return conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]


def search_hits(s: ProxySession, query: str) -> list[str]:
    reply = s.call("memory_search", query=query, limit=20)
    return [h["id"] for h in (reply.get("structuredContent") or {}).get("hits", [])]


def add(s: ProxySession, title: str, body: str) -> str:
    reply = s.call("memory_add", title=title, body=body, force=True)
    content = reply.get("structuredContent") or {}
    assert content.get("status") == "created", reply
    return content["id"]
