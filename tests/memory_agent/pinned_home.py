"""A demo home on a pinned clock (`CLOCK`), made (`_new_home`), driven through the CLI (`cli`),
stopped (`_stop`); its KB's commit count (`_commits`)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import daemon_pids, env_for

CLOCK = "2026-11-30T09:00:00Z"


def _stop(home: Path) -> None:
    try:
        DaemonClient(home).stop(wait=True, timeout=10)
    except Exception:
        pass
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def _new_home(home: Path, shared_cache: Path) -> Path:
    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    Memory(config.load({"home": str(home), "clock": CLOCK})).init(
        demo=True, embedder="minilm", sync=False
    )
    return home


def cli(home, cache, *args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env or env_for(home, cache, MEMORY_AGENT_CLOCK=CLOCK),
        timeout=timeout,
    )


def _commits(home: Path) -> int:
    return int(git(home / "kb", "rev-list", "--count", "HEAD").strip())
