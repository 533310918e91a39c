"""The KB commit the index reflects (ADR 0016: the index follows git).

Every refresh records the KB's HEAD it read before it looked at the files, in the ref
`refs/memory-agent/indexed` (which also keeps that commit reachable). The next refresh asks git
which files changed between the recorded commit and HEAD - a pull, a reset, a sync's move, a
write - and rescans exactly those; no record yet, or a recorded commit no longer in the KB,
means a full scan (said in the log). A write's own commit is not asked about: the gateway says
which files it changed (`wrote`), since a diff of two trees reads both whole - ~30 ms at
100,000 entries in one folder, ten times that at a million.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = ["INDEXED_REF", "KbCommit"]

log = logging.getLogger("memory_agent.memory")
INDEXED_REF = "refs/memory-agent/indexed"


class KbCommit:
    """One KB's HEAD and the commit its index reflects."""

    def __init__(self, kb_dir: Path):
        self.kb_dir = kb_dir
        self._indexed: str | None = None  # INDEXED_REF, read once (`indexed`)
        self._indexed_read = False
        self._repo: Any = None  # the KB's `KBRepo`, made on first use (`_kb_repo`)
        self._wrote: tuple[str, str, tuple[str, ...]] | None = None  # (parent, commit, paths)

    def forget(self) -> None:
        """Read the record again at the next call (another process may have moved it)."""
        self._indexed_read = False

    def head(self) -> str | None:
        """The KB's HEAD commit (read from .git: no process), None without one."""
        repo = self._kb_repo()
        return repo.head() if repo is not None else None

    def _kb_repo(self) -> Any:
        if self._repo is None:
            from memory_agent.kb.gitrepo import GitError, KBRepo

            try:
                self._repo = KBRepo(self.kb_dir)
            except GitError:
                return None  # no repository (yet)
        return self._repo

    def indexed(self) -> str | None:
        """The KB commit the index reflects; None before the first refresh recorded one."""
        if not self._indexed_read:
            repo = self._kb_repo()
            out = repo.output("rev-parse", "-q", "--verify", INDEXED_REF) if repo else None
            self._indexed = (out or "").strip() or None
            self._indexed_read = True
        return self._indexed

    def moved(self, head: str | None = None) -> list[Path] | None:
        """The KB files git changed between the recorded commit and HEAD (a pull, a reset, a
        sync's move, a write): [] when HEAD is that commit; None when there is no record yet or
        the recorded commit is no longer in the KB (then a full scan, logged)."""
        head = self.head() if head is None else head
        recorded = self.indexed()
        if head is None or recorded == head:
            return []
        if recorded is None:
            return None
        if self._wrote is not None and self._wrote[:2] == (recorded, head):
            return [self.kb_dir / name for name in self._wrote[2]]
        names = self._kb_repo().changed_between(recorded, head)
        if names is None:
            log.warning(
                "the KB commit the index reflects, %s, is no longer in the KB's "
                "history (a gc after a reset?): a full scan instead",
                recorded[:12],
            )
            self._indexed = None  # said once; the full scan records HEAD anew
        return None if names is None else [self.kb_dir / name for name in names]

    def wrote(self, parent: str, commit: str, paths: tuple[str, ...]) -> None:
        """The gateway made `commit` on `parent`, changing exactly `paths` (relative to the KB;
        `KBRepo.commit_paths` checked it): the next `moved` from `parent` to it needs no git."""
        self._wrote = (parent, commit, paths)

    def record(self, head: str | None) -> None:
        """The index now reflects `head`."""
        if head is None or head == self.indexed():
            return
        # the ref also keeps the commit reachable, so the next diff can be taken from it
        self._kb_repo().git("update-ref", INDEXED_REF, head, check=False)
        self._indexed = head
