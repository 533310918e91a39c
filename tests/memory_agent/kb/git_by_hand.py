"""Git as people use it, beside the daemon: git run as a person (`git`), a `memory_add` through the
daemon (`add`) or its refusal (`refused`), the KB's entry files (`files_of`), the daemon stopped
(`_stop`), the clock the homes are pinned to (`CLOCK`)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from memory_agent.client import DaemonClient
from memory_agent.errors import ToolCallError
from tests.memory_agent.mcp_helpers import daemon_pids

CLOCK = "2026-12-01T12:00:00Z"


def git(
    kb: Path,
    *args: str,
    env: dict | None = None,
    check: bool = True,
    input_text: str | None = None,
) -> str:
    proc = subprocess.run(
        ["git", "-C", str(kb), *args],
        input=input_text,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "u",
            "GIT_AUTHOR_EMAIL": "u@x",
            "GIT_COMMITTER_NAME": "u",
            "GIT_COMMITTER_EMAIL": "u@x",
            **(env or {}),
        },
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args}: {proc.stderr}")
    return proc.stdout


def _stop(home: Path) -> None:
    try:
        DaemonClient(home).stop(wait=True, timeout=10)
    except Exception:
        pass
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def add(home: Path, title: str, body: str, **kw) -> dict:
    return DaemonClient(home).call_tool("memory_add", {"title": title, "body": body, **kw})


def refused(home: Path, title: str, body: str) -> ToolCallError:
    with pytest.raises(ToolCallError) as caught:
        add(home, title, body)
    return caught.value


def files_of(kb: Path) -> set[str]:
    return {str(p.relative_to(kb)) for p in kb.rglob("*.md") if ".git" not in p.parts}
