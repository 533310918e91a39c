"""A demo home served by real processes: the CLI run on it as a subprocess (`cli`), and its daemon
stopped, whatever is left killed (`_cleanup`)."""

import os
import signal
import subprocess
import sys

from memory_agent.client import DaemonClient
from tests.memory_agent.mcp_helpers import daemon_pids, env_for


def cli(home, cache, *args, stdin=None, env=None, timeout=120):
    env = env or env_for(home, cache)
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def _cleanup(home):
    try:
        DaemonClient(home).stop(wait=True, timeout=10)
    except Exception:
        pass
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)
