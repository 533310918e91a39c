"""Helpers shared by the memory_agent tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memory_agent import config as config_mod
from memory_agent.index.memory import Memory


def make_memory(home: Path, model, **kw) -> Memory:
    return Memory(config_mod.load({"home": str(home)}), embedder=model, **kw)


def git(kb: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(kb), *args], capture_output=True, text=True, check=True
    ).stdout


def commit(kb, message: str) -> None:
    git(kb, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", message)


def head_of(kb) -> str:
    return git(kb, "rev-parse", "HEAD").strip()
