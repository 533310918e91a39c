"""The scanner: which files are documents, what changed since the index last saw them, and
what is wrong with them.

- KB entries are the files `memory_agent.kb.files` says are entries; a symbolic link or a
  second file of the same id is reported as a problem and left out.
- Episodes are derived from the journal's session files (`index.episode_source`).
- Read-only corpora are scanned with their `PathRule` (one rule for scans and for lookups).
- Every indexed document carries a stamp (the file's mtime and size). A full scan stats every
  file and reads only those whose stamp differs from the index's - after a restart too, since
  the stamps live in the index. With a `Watcher` (inotify), a sync between full scans looks
  only at the paths the kernel reported: nothing changed, nothing is stat'ed or read.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.capture.episodes import EPISODES
from memory_agent.errors import ConfigError, NotFound
from memory_agent.index.changes import Changes, Known, stamp_of
from memory_agent.index.corpora import Corpus, load_corpus_document
from memory_agent.index.episode_source import EpisodeSource
from memory_agent.index.portable_watch import PortableWatcher
from memory_agent.index.watch import Watcher, inotify_available
from memory_agent.kb.entries import ENTRY_TYPES, ValidationError
from memory_agent.kb.files import (
    duplicate_problem,
    entry_id_at,
    entry_places,
    kb_claims,
    kb_file_names,
    read_kb_entry,
)
from memory_agent.kb.kbs import KB_SOURCE, KbPlace
from ragcore import DocInfo, Document, DocumentError

__all__ = ["KB_SOURCE", "Scanner", "SourceStatus"]

log = logging.getLogger("memory_agent.scanner")


@dataclass
class SourceStatus:
    label: str
    entries: int
    writable: bool
    available: bool
    path: str
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out = {
            "label": self.label,
            "entries": self.entries,
            "writable": self.writable,
            "available": self.available,
            "path": self.path,
        }
        if self.problems:
            out["problems"] = self.problems
        return out


class Scanner:
    """Turns the files into index changes. `known(doc_id)` is what the index holds now."""

    def __init__(
        self,
        home_dir: Path,
        kb_dir: Path,
        corpora: Callable[[], list[Corpus]],
        repos_file: Callable[[], Path],
        journal_dir: Path | None = None,
        episodes_since: Callable[[], float] = lambda: 0.0,
        other_kbs: Callable[[], list[KbPlace]] = list,
    ):
        self.home_dir = home_dir
        self.kb_dir = kb_dir
        self.other_kbs = other_kbs  # the KBs added beside the personal one (`kb.kbs`)
        self._kbs: list[KbPlace] = []  # as the last full scan saw them
        self.episodes = (
            EpisodeSource(journal_dir, episodes_since) if journal_dir is not None else None
        )
        self.corpora = corpora
        self.repos_file = repos_file
        self._reads = 0  # files read and parsed
        self.watcher: Watcher | PortableWatcher | None = None
        self.last_full = 0.0
        self._corpora: list[Corpus] | None = None
        self._repos_stamp: str | None = None
        self._available: dict[str, bool] = {}
        self._problems: dict[str, str] = {}  # path -> what is wrong with that file
        self._kb_problems: dict[str, str] = {}  # path -> a link or a duplicate id there
        self._broken: set[str] = set()  # ids whose file is present but unreadable
        self._needs_full = True

    # -- change signal --------------------------------------------------------------------
    def start_watching(self, kind: str = "auto", fence_dir: Path | None = None) -> bool:
        """Watch for changes between full scans (the daemon does; a CLI call does not):
        `inotify`, `watchfiles`, `auto` (inotify on Linux, else watchfiles where installed) or
        `rescan` (no watcher, on purpose). True if a watcher runs. `fence_dir`: the folder of
        the watchfiles watcher's fence (`index.portable_watch`)."""
        if self.watcher is not None or kind == "rescan":
            return self.watcher is not None
        if kind not in ("auto", "inotify", "watchfiles"):
            raise ConfigError(
                f"watcher: {kind!r} is not one of auto, inotify, watchfiles, rescan",
                "set `watcher` in config.toml (or MEMORY_AGENT_WATCHER) to one of those",
            )
        if kind == "auto":
            kind = "inotify" if inotify_available() else "watchfiles"
        try:
            if kind == "inotify":
                if not inotify_available():
                    raise OSError("inotify is Linux's")
                self.watcher = Watcher()
            else:
                self.watcher = PortableWatcher(fence_dir or self.kb_dir.parent / "run" / "watch")
            self._needs_full = True  # the next sync scans everything and sets the watches
        except OSError as exc:
            log.warning("no %s (%s): files are rescanned on demand instead", kind, exc)
        return self.watcher is not None

    def stop_watching(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def current_corpora(self) -> list[Corpus]:
        """The corpora of repos.json, read again only when its stat changed."""
        path = self.repos_file()
        try:
            stamp = f"{path}:{stamp_of(path.stat())}"
        except OSError:
            stamp = f"{path}:absent"
        if stamp != self._repos_stamp or self._corpora is None:
            self._corpora = self.corpora()
            self._repos_stamp = stamp
            self._needs_full = True
        return self._corpora

    @property
    def kbs(self) -> list[KbPlace]:
        """The KBs beside the personal one as the last full scan saw them (what the index
        holds). A KB added or removed is seen at the next full scan: `kb add` and `kb remove`
        ask for one (`request_full`), as does the daemon's start; nothing stats kbs.json per
        search."""
        return list(self._kbs)

    def request_full(self) -> None:
        """Make the next `changes` a full scan (after a rebuild, whose new generation never saw
        the changes the watcher reported while it was being built)."""
        self._needs_full = True

    def wants_full(self) -> bool:
        """True when a full scan is due for a reason that costs a few stats to see: repos.json
        changed, or a corpus folder appeared or vanished."""
        for corpus in self.current_corpora():
            if self._available.get(corpus.label) != corpus.available:
                self._needs_full = True
        return self._needs_full

    # -- reading one file -----------------------------------------------------------------
    def _kb_doc(self, path: Path, stamp: str) -> Document:
        entry = read_kb_entry(path)
        return dataclasses.replace(entry.to_document(str(path)), stamp=stamp)

    def _other_kb_loader(self, place: KbPlace):
        """Loads an entry of another KB as the index holds it (`KbPlace.indexed`)."""
        return lambda path, stamp: place.indexed(self._kb_doc(path, stamp))

    def _load(self, path: Path, stamp: str, loader) -> Document | None:
        self._reads += 1
        try:
            doc = loader(path, stamp)
        except (ValidationError, DocumentError) as exc:
            where = path.relative_to(self.home_dir) if path.is_relative_to(self.home_dir) else path
            self._problems[str(path)] = f"{where}: {exc}"
            return None
        self._problems.pop(str(path), None)
        return doc

    def _corpus_loader(self, corpus: Corpus, rel: str):
        def load(p: Path, s: str) -> Document:
            return dataclasses.replace(load_corpus_document(corpus, rel, p), stamp=s)

        # the stamp names the corpus's scope: a scope changed in repos.json re-reads its files
        load.salt = "" if corpus.scope == "global" else f"@{corpus.scope}"  # type: ignore[attr-defined]
        return load

    def _consider(
        self, doc_id: str, path: Path | str, st: os.stat_result, loader, known: Known, out: Changes
    ) -> None:
        """Queue `path` if the index does not hold it as it is on disk now."""
        stamp = stamp_of(st) + getattr(loader, "salt", "")
        info = known(doc_id)
        if info is not None and info.stamp == stamp and info.path == str(path):
            self._broken.discard(doc_id)
            return
        doc = self._load(Path(path), stamp, loader)
        if doc is None:
            if info is not None:
                self._broken.add(doc_id)  # keep its last good version
            return
        self._broken.discard(doc_id)
        if info is None or info.hash != dataclasses.replace(doc, path=info.path).content_hash:
            out.upserts.append(doc)  # new, or its content changed
            return
        out.restamps[doc_id] = stamp  # touched or moved (a fan-out), not changed: chunks kept
        if info.path != doc.path:
            out.moved[doc_id] = {"path": doc.path, "hash": doc.content_hash}

    # -- scans ----------------------------------------------------------------------------
    def paths_changed(self, paths: Iterable[Path], known: Known) -> Changes:
        """What to change in the index for these paths alone (a sync's pull names the files
        between two commits: nothing else is looked at)."""
        corpora = self.current_corpora()
        out = Changes()
        for path in sorted(set(paths)):
            self._path_changed(path, corpora, known, out)
        return out

    def changes(
        self, known: Known, indexed: Callable[[], Iterable[DocInfo]], also: Iterable[Path] = ()
    ) -> Changes:
        """What to change in the index. A full scan when there is no watcher, when the
        watcher asks for one, or when repos.json or a corpus root's availability changed;
        else only the paths the watcher reported and those of `also` (the files git moved)."""
        corpora = self.current_corpora()
        for corpus in corpora:
            available = corpus.available
            if self._available.get(corpus.label) != available:
                self._needs_full = True
            self._available[corpus.label] = available
        events = self.watcher.drain() if self.watcher is not None else None
        if events is not None and events.rescan:
            log.info("full rescan: %s", events.rescan)
            self._needs_full = True
        if self.watcher is None or self._needs_full:
            return self.full(known, indexed, corpora)
        out = Changes()
        for path in sorted({*(events.paths if events else ()), *also}):
            self._path_changed(path, corpora, known, out)
        return out

    def full(self, known: Known, indexed, corpora: list[Corpus]) -> Changes:
        out = Changes(full=True)
        self._needs_full = False
        self.last_full = time.monotonic()
        watch = self.watcher
        if watch is not None:
            watch.unwatch_all()
            watch.watch(self.kb_dir)
        seen: dict[str, Path | str] = {}  # id -> its file
        seen_paths: set[str] = set()
        self._kb_problems = {}
        self._full_kb(self.kb_dir, str, self._kb_doc, watch, seen, seen_paths, known, out)
        readable = {KB_SOURCE}
        self._kbs = self.other_kbs()
        for place in self._kbs:
            readable.add(place.source)
            loader = self._other_kb_loader(place)
            self._full_kb(place.dir, place.qualify, loader, watch, seen, seen_paths, known, out)
        if self.episodes is not None:
            readable.add(EPISODES)
            seen.update(self.episodes.full(known, indexed, out, watch))
        for corpus in corpora:
            if not corpus.available:
                continue
            readable.add(corpus.label)
            root = corpus.path.resolve()
            if watch is not None:
                watch.watch(root)
            for rel, full in corpus.rule.scan(root):
                out.looked_at += 1
                seen_paths.add(str(full))
                doc_id = f"{corpus.label}/{rel}"
                seen[doc_id] = full
                try:
                    st = full.stat()
                except OSError:
                    continue
                self._consider(doc_id, full, st, self._corpus_loader(corpus, rel), known, out)
            if watch is not None:
                for dirpath in corpus.rule.folders(root):
                    watch.watch(dirpath)
        labels = {c.label for c in corpora}
        unavailable = {c.label for c in corpora if not c.available}
        for info in indexed():
            if info.id in seen or info.id in self._broken:
                continue
            # a missing corpus keeps its entries; a label removed from repos.json loses them
            if info.source in readable or (
                info.source not in labels and info.source not in unavailable
            ):
                out.deletes.append(info.id)
        self._problems = {k: v for k, v in self._problems.items() if k in seen_paths}
        self._broken &= set(seen)
        if watch is not None and watch.settle():
            # a watcher that starts after the folders were read (watchfiles): what changed in
            # between is found by reading them again (stamps only; the same folders this time)
            return self.full(known, indexed, corpora)
        return out

    def _full_kb(self, kb_dir: Path, qualify, loader, watch, seen, seen_paths, known, out):
        """A full scan of one KB's files, the same rules for every KB: ids as `qualify` names
        them (the personal KB's bare, another's `<name>:<id>`); the first of two files with one
        id (in ENTRY_TYPES order: `kb_claims`) owns it, the other is a problem."""
        folders: list[Path] = []
        names, links = kb_file_names(kb_dir, folders)
        self._kb_problems.update(links)
        if watch is not None and kb_dir.is_dir():
            watch.watch(kb_dir)
            for folder in folders:  # the type folders and their fanned-out subfolders
                watch.watch(folder)
        for folder, name in names:  # strings: at 1M files a Path each was most of the scan
            out.looked_at += 1
            full = f"{folder}{os.sep}{name}"
            doc_id = qualify(name[:-3])
            seen_paths.add(full)
            if doc_id in seen:
                owner = Path(seen[doc_id])
                self._kb_problems[full] = duplicate_problem(Path(full), owner, kb_dir)
                continue
            seen[doc_id] = full
            try:
                st = os.stat(full)
            except OSError:
                continue
            self._consider(doc_id, full, st, loader, known, out)

    def _path_changed(self, path: Path, corpora: list[Corpus], known: Known, out: Changes):
        """One path the watcher reported: re-read it, or drop its document if it is gone."""
        if self.episodes is not None and self.episodes.holds(path):
            self.episodes.path_changed(path, known, out)
            return
        local_id = entry_id_at(path, self.kb_dir)
        if local_id is not None:
            self._kb_changed(local_id, known, out)
            return
        for place in self._kbs:
            if path.is_relative_to(place.dir):
                local_id = entry_id_at(path, place.dir)
                if local_id is not None:
                    self._kb_changed(local_id, known, out, place)
                return
        located = self._locate(path, corpora)
        if located is None:
            return
        doc_id, loader = located
        try:
            st = path.lstat()
            regular = not path.is_symlink() and path.is_file()
        except OSError:
            st, regular = None, False
        if st is not None and regular:
            out.looked_at += 1
            if doc_id in (d.id for d in out.upserts):
                return
            self._consider(doc_id, path, st, loader, known, out)
            if doc_id in out.deletes:
                out.deletes.remove(doc_id)
            return
        self._problems.pop(str(path), None)
        info = known(doc_id)
        if info is not None and info.path == str(path):
            out.deletes.append(doc_id)
            self._broken.discard(doc_id)
        if path.is_symlink():
            self._needs_full = True  # report it with the other links

    def _kb_changed(
        self, local_id: str, known: Known, out: Changes, place: KbPlace | None = None
    ) -> None:
        """A file of KB entry `local_id` changed (written, removed, linked): decide again who
        holds the id by the full scan's rule (`kb_claims`), index the holder as it is now or
        drop the id, and renew the problems of every path of that id. `place`: another KB
        than the personal one."""
        kb_dir = place.dir if place is not None else self.kb_dir
        doc_id = place.qualify(local_id) if place is not None else local_id
        if doc_id in out.kb_ids:
            return  # decided once per batch: a move names two paths of one id (a fan-out, 2M)
        out.kb_ids.add(doc_id)
        loader = self._other_kb_loader(place) if place is not None else self._kb_doc
        owner, problems = kb_claims(kb_dir, local_id)
        for path in [str(p) for t in ENTRY_TYPES for p in entry_places(kb_dir, t, local_id)]:
            self._kb_problems.pop(path, None)
            if path != str(owner):
                self._problems.pop(path, None)
        self._kb_problems.update(problems)
        if owner is not None:
            try:
                st = owner.stat()
            except OSError:
                owner = None
            else:
                out.looked_at += 1
                self._consider(doc_id, owner, st, loader, known, out)
                return
        info = known(doc_id)
        if info is not None and info.source == (place.source if place else KB_SOURCE):
            out.deletes.append(doc_id)
        self._broken.discard(doc_id)

    def _locate(self, path: Path, corpora: list[Corpus]):
        """(doc id, loader) of a corpus path the index could hold, or None."""
        if entry_id_at(path, self.kb_dir) is not None:
            return None
        if any(path.is_relative_to(p.dir) for p in self._kbs):
            return None
        for corpus in corpora:
            root = corpus.path.resolve()
            if path.is_relative_to(root):
                rel = path.relative_to(root).as_posix()
                if corpus.contains(rel):
                    return f"{corpus.label}/{rel}", self._corpus_loader(corpus, rel)
        return None

    # -- reports --------------------------------------------------------------------------
    @property
    def reads(self) -> int:
        """Files read and parsed, sessions derived (a test counts them)."""
        return self._reads + (self.episodes.reads if self.episodes is not None else 0)

    @property
    def broken(self) -> set[str]:
        return set(self._broken)

    def sources(self, counts: dict[str, int]) -> dict[str, SourceStatus]:
        """Each source's status, its entry count taken from the index (`counts`)."""
        out = {
            KB_SOURCE: SourceStatus(
                KB_SOURCE, counts.get(KB_SOURCE, 0), True, self.kb_dir.is_dir(), str(self.kb_dir)
            )
        }
        kb_prefix = str(self.kb_dir) + os.sep
        out[KB_SOURCE].problems = [
            *(p for k, p in sorted(self._kb_problems.items()) if k.startswith(kb_prefix)),
            *(p for k, p in sorted(self._problems.items()) if k.startswith(kb_prefix)),
        ]
        for place in self._kbs:
            prefix = str(place.dir) + os.sep
            out[place.source] = SourceStatus(
                place.source,
                counts.get(place.source, 0),
                place.writable,
                place.dir.is_dir(),
                str(place.dir),
                [
                    *(p for k, p in sorted(self._kb_problems.items()) if k.startswith(prefix)),
                    *(p for k, p in sorted(self._problems.items()) if k.startswith(prefix)),
                ],
            )
        if self.episodes is not None:
            out[EPISODES] = SourceStatus(
                EPISODES,
                counts.get(EPISODES, 0),
                False,
                True,
                str(self.episodes.journal_dir),
            )
        for corpus in self._corpora or []:
            status = SourceStatus(
                corpus.label,
                counts.get(corpus.label, 0),
                False,
                corpus.available,
                str(corpus.path),
            )
            if corpus.available:
                root = str(corpus.path.resolve()) + os.sep
                status.problems = [
                    p for k, p in sorted(self._problems.items()) if k.startswith(root)
                ]
            else:
                status.problems = [
                    f"root {corpus.path} is missing or unreadable; its indexed "
                    "entries are kept until it comes back"
                ]
            out[corpus.label] = status
        return out

    def corpus_file(self, entry_id: str) -> tuple[Corpus, str, Path]:
        """The corpus, relative path and file of a read-only id `<label>/<rel>`; `NotFound`
        unless a scan of that corpus would read exactly this file."""
        label, _, rel = entry_id.partition("/")
        for corpus in self.current_corpora():
            if corpus.label == label and rel:
                full = corpus.resolve(rel)
                if full is not None:
                    return corpus, rel, full
                break
        raise NotFound(f"no entry with id {entry_id!r}")
