"""Start legal_web as a real subprocess and wait for its URL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class WebProcess:
    def __init__(self, home: Path, cache: Path, port: int = 0, timeout: float = 120):
        home.mkdir(parents=True, exist_ok=True)
        if not (home / "cache").exists():
            (home / "cache").symlink_to(cache)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "legal_web", "--port", str(port), "--home", str(home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.stderr: list[str] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        line = self.proc.stdout.readline()  # blocks until the URL (or exit)
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            self.proc.kill()
            raise RuntimeError(f"legal_web did not start: {line!r} {''.join(self.stderr)[-2000:]}")
        self.ready_s = time.monotonic() - self.started
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=60)
