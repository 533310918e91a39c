"""Replaying this machine's unpushed commits on upstream, in a temporary worktree: one commit
each, with its message and author, its files merged into upstream's tree by what they mean
(`memory_agent.sync.merging`: renamed twins, forks, variants - no conflict marker is ever
written). The KB's own working tree is not touched; a round of sync
(`memory_agent.sync.remote`) moves the branch to the replayed head afterwards, under the write
lock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from memory_agent.errors import GitError
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.gitrun import machine_name
from memory_agent.sync.merging import Merge

__all__ = ["replay"]


def replay(
    repo: KBRepo, base: str | None, local: str, upstream: str, report: dict[str, Any]
) -> str:
    """The commits of `local` since `base` (the shared base; None: all of them), replayed on
    `upstream`; the replayed head. `report` gains what was replayed, renamed, forked and kept
    as a variant."""
    span = [local, "--not", base] if base else [local]
    commits = repo.git("rev-list", "--reverse", "--topo-order", *span).split()
    tmp = Path(tempfile.mkdtemp(prefix="memory-agent-replay-"))
    tree = tmp / "kb"
    repo.git("worktree", "add", "-q", "--detach", str(tree), upstream)
    try:
        work = KBRepo(tree)
        merge = Merge(tree, machine_name())
        for commit in commits:
            parent = (
                repo.git("rev-parse", "-q", "--verify", f"{commit}^", check=False).strip() or None
            )
            listed = repo.git(
                "diff-tree",
                "-r",
                "-z",
                "--root",
                "--no-commit-id",
                "--name-status",
                "--no-renames",
                commit,
            ).split("\0")[:-1]
            touched: list[str] = []
            for status, name in merge.order(listed):  # (-z: names unquoted)
                before = repo.show(parent, name) if parent else None
                after = None if status == "D" else repo.show(commit, name)
                touched += merge.apply(name, before, after)
            touched = sorted(set(touched))
            if not touched:
                continue
            work.git("add", "-A", "--", *touched)
            if work.succeeds("diff", "--cached", "--quiet"):
                continue  # the same change is upstream already
            message = repo.git("log", "-1", "--format=%B", commit).rstrip()
            author = repo.git("log", "-1", "--format=%an%x00%ae%x00%aI", commit)
            name, email, date = (author.strip().split("\0") + ["", "", ""])[:3]
            _commit_as(tree, message, name, email, date)
            report["replayed"] += 1
        report["renamed"] += merge.renamed_report()
        report["forks"] += merge.forks
        report["variants"] += merge.variants
        return work.head() or upstream
    finally:
        repo.git("worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        repo.git("worktree", "prune", check=False)


def _commit_as(tree: Path, message: str, name: str, email: str, date: str) -> None:
    """Commit what is staged in `tree` as the replayed commit's author, at its date."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    env.update(
        GIT_AUTHOR_NAME=name or "memory-agent",
        GIT_AUTHOR_EMAIL=email or "memory-agent@localhost",
    )
    if date:
        env["GIT_AUTHOR_DATE"] = date
    committer = subprocess.run(
        ["git", "-C", str(tree), "config", "--get", "user.name"], capture_output=True, text=True
    )
    if committer.returncode != 0:
        env.setdefault("GIT_COMMITTER_NAME", "memory-agent")
        env.setdefault("GIT_COMMITTER_EMAIL", "memory-agent@localhost")
    proc = subprocess.run(
        ["git", "-C", str(tree), "commit", "-q", "--no-verify", "-m", message],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise GitError(
            f"replaying a commit failed: {proc.stderr.strip()}",
            "run `memory-agent sync` again; the KB itself was not changed",
        )
