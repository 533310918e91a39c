"""`memory-agent ui` as a process (`UI`: its URL, token and base), one HTTP request to it
(`request`), and the folder screenshots go to (`ARTIFACTS`)."""

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.memory_agent.mcp_helpers import env_for

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


class UI:
    def __init__(self, home: Path, cache: Path):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memory_agent",
                "ui",
                "--home",
                str(home),
                "--port",
                "0",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(home, cache),
        )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(self.proc.stderr.read())
        self.url = json.loads(line)["url"]
        self.base = self.url.split("/?")[0]
        self.token = self.url.split("token=")[1]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=30)


def request(url, *, method="GET", data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()
