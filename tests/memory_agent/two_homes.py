"""Two homes (each with its own daemon, on a pinned clock) and a bare remote on disk: a `Home`
driven through the real CLI, and both joined to the remote (`shared_pair`)."""

import json
import os
import signal
import subprocess
import sys

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from tests.memory_agent.mcp_helpers import daemon_pids, env_for

CLOCK = "2026-11-30T09:00:00Z"


class Home:
    def __init__(self, path, cache, machine, demo=False):
        self.path, self.cache, self.machine = path, cache, machine
        Memory(config.load({"home": str(path)})).init(demo=demo, embedder="minilm", sync=False)
        (path / "config.toml").write_text('embedder = "minilm"\nsync_interval = 0\n')
        self.env = env_for(path, cache, MEMORY_AGENT_CLOCK=CLOCK, MEMORY_AGENT_MACHINE=machine)

    @property
    def kb(self):
        return self.path / "kb"

    def cli(self, *args, check=True):
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(self.path), "--json"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        if check and proc.returncode != 0:
            raise AssertionError(proc.stderr or proc.stdout)
        return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}

    def cli_text(self, *args):
        """A command as a person reads it (no --json): its stdout."""
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(self.path)],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr or proc.stdout
        return proc.stdout

    def add(self, title, body, *extra):
        _, reply = self.cli("add", "--title", title, "--body", body, *extra)
        assert reply["status"] == "created", reply
        return reply["id"]

    def sync(self, check=True):
        return self.cli("sync", check=check)

    def search(self, query):
        _, reply = self.cli("search", query, "--limit", "20")
        return [h["id"] for h in reply["hits"]]

    def files(self):
        out = {}
        for p in sorted(self.kb.rglob("*")):
            if p.is_file() and ".git" not in p.parts:
                out[str(p.relative_to(self.kb))] = p.read_text()
        return out

    def stop(self):
        DaemonClient(self.path).stop(wait=True)
        for pid in daemon_pids(self.path):
            os.kill(pid, signal.SIGKILL)


def shared_pair(pair):
    a, b, remote = pair
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    return a, b, remote
