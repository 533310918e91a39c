"""Episodes as index documents: each session of the capture journal (its plain, aside and part
files) derived into its episodes (`capture.episodes`), and what changed since the index saw
them. A session is re-derived only when the stamps of its files changed; its episode ids are
numbered from 0 or 1 up, and the ids it no longer has are dropped. Episodes that started
before `since()` (the journal's retention) are not indexed. An episode's scope is the project
its prompt was captured in (the hook records it; a journal written before that is resolved
from the `cwd` it recorded).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from memory_agent.capture.episodes import EPISODES, load_session
from memory_agent.index.changes import Changes, Known, stamp_of
from memory_agent.index.portable_watch import PortableWatcher
from memory_agent.index.watch import Watcher
from memory_agent.intake.journal import sessions
from memory_agent.intake.projects import identify
from ragcore import DocInfo

__all__ = ["EpisodeSource"]


def _session_of(filename: str) -> str | None:
    """The session a journal file belongs to (plain, aside or part), or None."""
    for suffix in (".jsonl", ".jsonl.compacting"):
        if filename.endswith(suffix) and not filename.startswith("."):
            return filename[: -len(suffix)]
    if filename.endswith(".gz") and ".jsonl." in filename and not filename.startswith("."):
        return filename.split(".jsonl.", 1)[0]
    return None


class EpisodeSource:
    """The episodes of the sessions in `journal_dir`, for the scanner."""

    def __init__(self, journal_dir: Path, since: Callable[[], float] = lambda: 0.0):
        self.journal_dir = journal_dir
        self.since = since  # episodes that started before are not indexed
        self.reads = 0  # sessions read and derived (part of Scanner.reads)
        self._projects: dict[str, str] = {}  # cwd -> project identity, for old journals

    def full(
        self,
        known: Known,
        indexed: Callable[[], Iterable[DocInfo]],
        out: Changes,
        watch: Watcher | PortableWatcher | None,
    ) -> dict[str, Path]:
        """Every session, re-derived where its files changed; {episode id: its session's
        last file} for every episode the journal holds now."""
        if watch is not None and self.journal_dir.is_dir():
            watch.watch(self.journal_dir)
        indexed_by_session: dict[str, set[str]] = {}
        for info in indexed():
            if info.source == EPISODES:
                indexed_by_session.setdefault(str(info.meta.get("session")), set()).add(info.id)
        seen: dict[str, Path] = {}
        for name, paths in sessions(self.journal_dir).items():
            out.looked_at += len(paths)
            ids = self.changed(name, paths, known, out, indexed_by_session.get(name))
            seen.update((i, paths[-1]) for i in ids)
        return seen

    def project_of(self, cwd: str) -> str:
        """The identity of the project `cwd` is in ("" outside one), asked of git once."""
        if cwd not in self._projects:
            project = identify(cwd)
            self._projects[cwd] = project.identity if project is not None else ""
        return self._projects[cwd]

    def holds(self, path: Path) -> bool:
        """Whether a path the watcher reported is in the journal."""
        return path.parent == self.journal_dir

    def path_changed(self, path: Path, known: Known, out: Changes) -> None:
        """A journal file the watcher reported: re-derive its session."""
        name = _session_of(path.name)
        if name is not None:
            paths = sessions(self.journal_dir).get(name, [])
            self.changed(name, paths, known, out, None)

    def changed(
        self,
        name: str,
        paths: list[Path],
        known: Known,
        out: Changes,
        indexed: set[str] | None,
    ) -> set[str]:
        """Re-derive a session's episodes if its files changed; the ids it now has."""
        # `steps2;`: episodes indexed before they carried their project, or before their steps
        # read as they do now (relative paths, repeats counted), are derived once more
        stamp = "steps2;" + ";".join(f"{p.name}:{stamp_of(p.stat())}" for p in paths if p.exists())
        first = known(f"{EPISODES}/{name}/1") or known(f"{EPISODES}/{name}/0")
        if first is not None and first.stamp == stamp and indexed is not None:
            return indexed  # unchanged since it was indexed
        self.reads += 1
        since = self.since()
        episodes = [e for e in load_session(paths, name) if e.started >= since]
        for e in episodes:
            if not e.project and e.cwd:  # journaled before the hook recorded the project
                e.project = self.project_of(e.cwd)
        docs = [dataclasses.replace(e.to_document(paths[-1]), stamp=stamp) for e in episodes]
        ids = {d.id for d in docs}
        for doc in docs:
            info = known(doc.id)
            if info is not None and info.hash == doc.content_hash:
                if info.stamp != stamp:
                    out.restamps[doc.id] = stamp
            else:
                out.upserts.append(doc)
        if indexed is None:  # an incremental change: the ids are numbered from 0 or 1 up
            indexed = set()
            n = 0
            while n <= len(docs) + 1 or known(f"{EPISODES}/{name}/{n}") is not None:
                if known(f"{EPISODES}/{name}/{n}") is not None:
                    indexed.add(f"{EPISODES}/{name}/{n}")
                n += 1
        out.deletes.extend(sorted(indexed - ids))
        return ids
