"""Replaying this machine's unpushed commits on upstream, in a temporary worktree: one commit
each, with its message and author, its files merged into upstream's tree by what they mean
(`memory_agent.sync.merging`: renamed twins, forks, variants - no conflict marker is ever
written). The KB's own working tree is not touched; a round of sync
(`memory_agent.sync.remote`) moves the branch to the replayed head afterwards, under the write
lock.

Files are read as bytes: one that is not UTF-8 text (a PNG, a note saved as UTF-16) is
carried as it is, never decoded. A replayed commit is made by plumbing (`write-tree`,
`commit-tree`), like every commit of the write path: no hook runs and nothing is signed
(docs/adr/0021-memory-agent-never-signs.md). The worktree lives in
`<tmp>/memory-agent-replay-<pid>-*`; one a process left when it died (a daemon killed
mid-round: a full copy of the KB) is removed at the start of the next round (`clean_stale`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from memory_agent.errors import GitError
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.gitrun import identity, machine_name, process
from memory_agent.procs import pid_alive
from memory_agent.sync.merging import Merge
from memory_agent.sync.upstream import refused_commit

__all__ = ["PREFIX", "clean_stale", "replay"]

PREFIX = "memory-agent-replay-"  # <tmp>/memory-agent-replay-<pid>-<random>/kb
STALE_UNNAMED_S = 24 * 3600  # a folder of a version that did not name its pid: stale after this


def replay(
    repo: KBRepo, base: str | None, local: str, upstream: str, report: dict[str, Any]
) -> str:
    """The commits of `local` since `base` (the shared base; None: all of them), replayed on
    `upstream`; the replayed head. `report` gains what was replayed, renamed, forked and kept
    as a variant."""
    span = [local, "--not", base] if base else [local]
    commits = repo.git("rev-list", "--reverse", "--topo-order", *span).split()
    tmp = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    tree = tmp / "kb"
    try:
        added = process(repo.path, "worktree", "add", "-q", "--detach", str(tree), upstream)
        if added.returncode != 0:
            refused = refused_commit(repo.path, base, upstream, added.stderr)
            if refused is not None:
                raise refused
            said = " ".join(added.stderr.split())[:500]
            raise GitError(
                f"sync: a temporary checkout of upstream ({upstream[:12]}) failed: {said}; "
                "nothing was pulled or pushed and every local commit is kept",
                f"free space in {tmp.parent} or fix what git names, then `memory-agent sync`",
            )
        work = KBRepo(tree)
        merge = Merge(tree, machine_name())
        committer = identity(repo.path)  # the KB's, asked once (the worktree is new each time)
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
                before = repo.show_bytes(parent, name) if parent else None
                after = None if status == "D" else repo.show_bytes(commit, name)
                touched += merge.apply_bytes(name, before, after)
            touched = sorted(set(touched))
            if not touched:
                continue
            paths = "\0".join(touched)  # on standard input: a fan-out names 2N (E2BIG past ~19k)
            work.git("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", input=paths)
            if _commit_as(work, repo.git("log", "-1", _AUTHOR_AND_MESSAGE, commit), committer):
                report["replayed"] += 1
        report["renamed"] += merge.renamed_report()
        report["forks"] += merge.forks
        report["variants"] += merge.variants
        return work.head() or upstream
    finally:
        if tree.exists():
            repo.git("worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        repo.git("worktree", "prune", check=False)


_AUTHOR_AND_MESSAGE = "--format=%an%x00%ae%x00%aI%x00%B"


def _commit_as(work: KBRepo, logged: str, committer: tuple[str, str]) -> bool:
    """Commit what is staged in the worktree as the replayed commit (`logged`: its author,
    date and message), by `committer`; False when it changes nothing (the same change is
    upstream already). Plumbing, as the write path commits: no hook, no signature."""
    tree = work.git("write-tree").strip()
    if tree == work.git("rev-parse", "HEAD^{tree}").strip():
        return False
    name, email, date, message = (logged.split("\0", 3) + ["", "", "", ""])[:4]
    env = {
        "GIT_AUTHOR_NAME": name or "memory-agent",
        "GIT_AUTHOR_EMAIL": email or "memory-agent@localhost",
        "GIT_COMMITTER_NAME": committer[0],
        "GIT_COMMITTER_EMAIL": committer[1],
    }
    if date:
        env["GIT_AUTHOR_DATE"] = date
    made = work.git("commit-tree", tree, "-p", "HEAD", "-m", message.rstrip(), env=env).strip()
    work.git("update-ref", "HEAD", made)
    return True


def clean_stale(repo: KBRepo, now: float | None = None) -> list[str]:
    """Remove the replay folders a process left when it died (a daemon killed mid-round
    leaves a full copy of the KB): `<tmp>/memory-agent-replay-<pid>-*` whose process is gone,
    and those of versions that did not name the pid once a day old. Only this user's folders,
    never through a link. The names removed."""
    root = Path(tempfile.gettempdir())
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return []
    removed = []
    now = time.time() if now is None else now
    for name in names:
        folder = root / name
        pid, dash, _ = name[len(PREFIX) :].partition("-")
        try:
            st = folder.lstat()
        except OSError:
            continue
        if folder.is_symlink() or not folder.is_dir():
            continue
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            continue  # another user's
        if pid.isdigit() and dash:
            if int(pid) == os.getpid() or pid_alive(int(pid)):
                continue  # a round running now
        elif now - st.st_mtime < STALE_UNNAMED_S:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(name)
    if removed:
        repo.git("worktree", "prune", check=False)
    return removed
