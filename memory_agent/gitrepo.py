"""The knowledge base's git repository: init or adopt, and commits of exactly the touched paths.

Never `git add -A`: another session (or the user's editor) may have dirty files in the KB, and
they must be neither committed nor changed by a memory write. `commit_paths` stages the named
paths only and commits with `git commit -- <paths>`, which records those paths alone even if
something else is staged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import git

__all__ = ["GitError", "KBRepo"]

AUTHOR_NAME = "memory-agent"
AUTHOR_EMAIL = "memory-agent@localhost"


class GitError(RuntimeError):
    """A git operation failed; the message says which and why."""


class KBRepo:
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise GitError(f"{self.path} is not a git repository: run `memory-agent init`") from exc

    @classmethod
    def init(cls, path: Path) -> tuple[KBRepo, bool]:
        """Open the repository at `path`, creating it if needed. Returns (repo, created)."""
        path.mkdir(parents=True, exist_ok=True)
        try:
            git.Repo(path, search_parent_directories=False)
            return cls(path), False
        except git.InvalidGitRepositoryError:
            git.Repo.init(path)
            repo = cls(path)
            # An empty first commit, so HEAD exists and every write has a parent.
            repo.repo.git.commit(
                "--allow-empty", "-m", "memory-agent: new knowledge base", env=repo._env()
            )
            return repo, True

    def _env(self) -> dict[str, str]:
        # Commits work on machines with no git identity configured.
        return {
            "GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
            "GIT_COMMITTER_NAME": AUTHOR_NAME, "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
        }  # fmt: skip

    def commit_paths(self, paths: Sequence[Path], message: str) -> str:
        """Commit exactly `paths` (relative or absolute, inside the repo); return the hash."""
        rel = [str(Path(p).resolve().relative_to(self.path.resolve())) for p in paths]
        try:
            self.repo.git.add("--", *rel)
            self.repo.git.commit("-m", message, "--only", "--", *rel, env=self._env())
        except git.GitCommandError as exc:
            raise GitError(f"git commit of {', '.join(rel)} failed: {exc.stderr.strip()}") from exc
        return self.repo.head.commit.hexsha

    def head(self) -> str | None:
        try:
            return self.repo.head.commit.hexsha
        except ValueError:  # no commits yet
            return None

    def committed_text(self, path: Path) -> str | None:
        """The file's text at HEAD, or None if HEAD does not have it."""
        rel = str(Path(path).resolve().relative_to(self.path.resolve()))
        if self.head() is None:
            return None
        try:
            return self.repo.git.show(f"HEAD:{rel}", strip_newline_in_stdout=False)
        except git.GitCommandError:
            return None

    def last_commit_touching(self, path: Path) -> str | None:
        rel = str(Path(path).resolve().relative_to(self.path.resolve()))
        out = self.repo.git.log("-1", "--format=%H", "--", rel) if self.head() else ""
        return out.strip() or None
