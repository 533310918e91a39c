"""The knowledge base's git repository: init or adopt, and commits of exactly the touched paths.

Never `git add -A`: another session (or the user's editor) may have dirty files in the KB, and
they must be neither committed nor changed by a memory write. `commit_paths` stages the named
paths only and commits with `git commit --only -- <paths>`, which records those paths alone
even if something else is staged. `state` tells a lifecycle write whether the file it is
about to change holds someone's uncommitted edit.

Plain `git` subprocesses (no library): every call is one short-lived process with its stderr
captured, so a long-running daemon holds no git handles between writes.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from memory_agent.errors import GitError

__all__ = ["GitError", "KBRepo"]

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
AUTHOR_NAME = "memory-agent"
AUTHOR_EMAIL = "memory-agent@localhost"


def _fix_for(stderr: str, repo: Path) -> str:
    """What a person can do about a failed git command, from what git said."""
    if "index.lock" in stderr:
        return (
            f"another git process is running in {repo}, or one died and left "
            f"{repo / '.git' / 'index.lock'}: if no git command is running there, remove that file"
        )
    if "Permission denied" in stderr or "Read-only file system" in stderr:
        return f"make {repo} (and its .git folder) writable by this user"
    if "date" in stderr.lower():
        return "check the GIT_AUTHOR_DATE / GIT_COMMITTER_DATE variables and the system clock"
    return f"run the command by hand in {repo} to see the whole error"


class KBRepo:
    def __init__(self, path: Path):
        self.path = Path(path)
        if not (self.path / ".git").exists():
            raise GitError(
                f"{self.path} is not a git repository", "run `memory-agent init` to create it"
            )

    @classmethod
    def init(cls, path: Path) -> tuple[KBRepo, bool]:
        """Open the repository at `path`, creating it if needed. Returns (repo, created)."""
        path.mkdir(parents=True, exist_ok=True)
        if (path / ".git").exists():
            return cls(path), False
        _run(path, "init", "-q")
        repo = cls(path)
        # An empty first commit, so HEAD exists and every write has a parent.
        repo.git("commit", "-q", "--allow-empty", "-m", "memory-agent: new knowledge base")
        return repo, True

    def git(self, *args: str, check: bool = True) -> str:
        return _run(self.path, *args, check=check)

    def _rel(self, paths: Sequence[Path]) -> list[str]:
        root = self.path.resolve()
        return [str(Path(p).resolve().relative_to(root)) for p in paths]

    def commit_paths(self, paths: Sequence[Path], message: str) -> str:
        """Commit exactly `paths` (relative or absolute, inside the repo); return the hash.

        When nothing else is staged (the common case), the commit is made with plumbing on the
        index as it is: stage the paths, write the tree, check that it differs from HEAD in
        these paths only, create the commit and move HEAD with a compare-and-swap. That skips
        `git commit --only`'s temporary index, which costs ~0.6 s in a folder of 100k files.
        Otherwise (someone has staged work) `git commit --only` records these paths alone."""
        rel = self._rel(paths)
        parent = self.head()
        if parent is not None and self._nothing_staged():
            commit = self._commit_plumbing(rel, message, parent)
            if commit is not None:
                return commit
        self.git("add", "--", *rel)
        self.git("commit", "-q", "--no-verify", "-m", message, "--only", "--", *rel)
        return self.head() or ""

    def _nothing_staged(self) -> bool:
        proc = subprocess.run(
            ["git", "-C", str(self.path), "diff", "--cached", "--quiet"],
            capture_output=True,
            env=_env(),
            stdin=subprocess.DEVNULL,
        )
        return proc.returncode == 0

    def _commit_plumbing(self, rel: list[str], message: str, parent: str) -> str | None:
        self.git("update-index", "--add", "--remove", "--", *rel)
        tree = self.git("write-tree").strip()
        changed = self.git("diff-tree", "-r", "--name-only", "--no-commit-id", parent, tree)
        if set(changed.split()) - set(rel):
            return None  # something else is in the index after all: take the safe path
        commit = self.git("commit-tree", tree, "-p", parent, "-m", message).strip()
        self.git("update-ref", "-m", f"commit: {message.splitlines()[0]}", "HEAD", commit, parent)
        return commit

    def unstage(self, paths: Sequence[Path]) -> None:
        """Put the index of `paths` back to HEAD (after a commit that failed)."""
        self.git("reset", "-q", "--", *self._rel(paths), check=False)

    def state(self, path: Path) -> str | None:
        """None when the file is exactly as committed; else what is uncommitted about it:
        "untracked", "modified", "staged" or "deleted"."""
        out = self.git(
            "status", "--porcelain=v1", "--untracked-files=all", "--", *self._rel([path])
        )
        line = out.splitlines()[0] if out.strip() else ""
        if not line:
            return None
        index, worktree = line[0], line[1]
        if line.startswith("??"):
            return "untracked"
        if "D" in (index, worktree):
            return "deleted"
        return "modified" if worktree != " " else "staged"

    def head(self) -> str | None:
        """The commit HEAD names (read from .git when it is a plain repository: no process)."""
        git_dir = self.path / ".git"
        try:
            ref = (git_dir / "HEAD").read_text().strip()
            if not ref.startswith("ref: "):
                return ref if _SHA.match(ref) else None
            name = ref[5:]
            loose = git_dir / name
            if loose.is_file():
                sha = loose.read_text().strip()
                return sha if _SHA.match(sha) else None
            for line in (git_dir / "packed-refs").read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == name and _SHA.match(parts[0]):
                    return parts[0]
            return None  # an unborn branch
        except (OSError, NotADirectoryError):
            out = self.git("rev-parse", "--verify", "-q", "HEAD", check=False).strip()
            return out or None

    def committed_text(self, path: Path) -> str | None:
        """The file's text at HEAD, or None if HEAD does not have it."""
        if self.head() is None:
            return None
        rel = self._rel([path])[0]
        proc = subprocess.run(
            ["git", "-C", str(self.path), "show", f"HEAD:{rel}"],
            capture_output=True,
            env=_env(),
        )
        return proc.stdout.decode("utf-8") if proc.returncode == 0 else None

    def last_commit_touching(self, path: Path) -> str | None:
        if self.head() is None:
            return None
        out = self.git("log", "-1", "--format=%H", "--", self._rel([path])[0])
        return out.strip() or None

    def log(self, *args: str) -> str:
        return self.git("log", *args)


def _env() -> dict[str, str]:
    # Commits work on machines with no git identity configured; nothing asks for input.
    return dict(
        os.environ,
        GIT_AUTHOR_NAME=AUTHOR_NAME, GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
        GIT_COMMITTER_NAME=AUTHOR_NAME, GIT_COMMITTER_EMAIL=AUTHOR_EMAIL,
        GIT_TERMINAL_PROMPT="0", LC_ALL="C",
    )  # fmt: skip


def _run(repo: Path, *args: str, check: bool = True) -> str:
    """The stdout of `git args` in `repo`; a failure raises `GitError` unless check=False."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            env=_env(),
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise GitError(f"could not run git ({exc.strerror})", "install git") from exc
    if proc.returncode != 0 and check:
        stderr = " ".join(proc.stderr.split())[:500]
        raise GitError(f"`git {args[0]}` failed in {repo}: {stderr}", _fix_for(stderr, repo))
    return proc.stdout
