"""The scanner: which files are documents, reading them once per change, and what is wrong.

- KB entries are `kb/<type>/<id>.md`, regular files in real folders. A symbolic link inside
  the KB (a type folder or an entry file; a KB pulled with git can bring one in) is never
  followed: it is reported as a problem and left out, so no read or write can be led outside
  the KB or onto another entry.
- Read-only corpora are scanned with their `PathRule` (one rule for scans and for lookups).
- A stat cache (mtime, size) means a file is read and parsed again only when its stat changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.corpora import Corpus, corpus_files, load_corpus_document
from memory_agent.errors import Invalid, NotFound
from memory_agent.kb import ENTRY_TYPES, ValidationError, check_id, read_entry
from ragcore import Document, DocumentError

__all__ = ["KB_SOURCE", "Scan", "Scanner", "SourceStatus"]

KB_SOURCE = "kb"


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


@dataclass
class Scan:
    """What one scan found: the documents, the sources that could be read, and the ids of KB
    entries whose files are present but broken (kept in the index as they were)."""

    docs: list[Document]
    readable: set[str]
    broken: set[str]
    sources: dict[str, SourceStatus]


@dataclass
class _Stat:
    key: tuple[int, int]  # (mtime_ns, size)
    doc: Document | None
    error: str | None


def _link_problem(path: Path, kb_dir: Path) -> str:
    return (
        f"{path.relative_to(kb_dir)} is a symbolic link; links inside kb/ are never followed: "
        "replace it with the real file or folder"
    )


def kb_files(kb_dir: Path) -> tuple[list[Path], list[str]]:
    """Every entry file (`<type>/<name>.md`, a regular file in a real folder), sorted, and a
    problem for each symbolic link found on the way."""
    files: list[Path] = []
    problems: list[str] = []
    for entry_type in ENTRY_TYPES:
        folder = kb_dir / entry_type
        if folder.is_symlink():
            problems.append(_link_problem(folder, kb_dir))
            continue
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.md")):
            if path.is_symlink():
                problems.append(_link_problem(path, kb_dir))
            elif path.is_file():
                files.append(path)
    return files, problems


def taken_names(kb_dir: Path) -> set[str]:
    """Every name a new entry id must not take: entry files, links and anything else called
    `<name>.md` in a type folder."""
    names: set[str] = set()
    for entry_type in ENTRY_TYPES:
        folder = kb_dir / entry_type
        if folder.is_dir() and not folder.is_symlink():
            names.update(p.stem for p in folder.glob("*.md"))
    return names


def entry_file(kb_dir: Path, entry_id: str) -> Path | None:
    """The file of KB entry `entry_id`, or None. Raises `Invalid` (naming the path) when the
    entry's file or folder is a symbolic link; never scans the whole KB."""
    if check_id(entry_id) is not None:
        return None
    for entry_type in ENTRY_TYPES:
        folder = kb_dir / entry_type
        path = folder / f"{entry_id}.md"
        if folder.is_symlink() and path.exists():
            raise Invalid(
                f"{folder} is a symbolic link; memory-agent does not follow links inside kb/",
                f"replace {folder} with a real folder",
            )
        if path.is_symlink():
            raise Invalid(
                f"{path} is a symbolic link; memory-agent does not follow links inside kb/",
                f"replace {path} with the real file",
            )
        if path.is_file():
            return path
    return None


class Scanner:
    def __init__(self, home_dir: Path, kb_dir: Path, corpora: Callable[[], list[Corpus]]):
        self.home_dir = home_dir
        self.kb_dir = kb_dir
        self.corpora = corpora
        self._stats: dict[str, _Stat] = {}
        self.reads = 0  # files read and parsed (a test counts them)

    def _load(self, path: Path, loader) -> tuple[Document | None, str | None]:
        try:
            st = path.stat()
        except OSError as exc:
            return None, f"{path}: cannot read ({exc.strerror})"
        key = (st.st_mtime_ns, st.st_size)
        cached = self._stats.get(str(path))
        if cached is not None and cached.key == key:
            return cached.doc, cached.error
        doc, error = None, None
        self.reads += 1
        try:
            doc = loader(path)
        except (ValidationError, DocumentError) as exc:
            where = path.relative_to(self.home_dir) if path.is_relative_to(self.home_dir) else path
            error = f"{where}: {exc}"
        self._stats[str(path)] = _Stat(key, doc, error)
        return doc, error

    def _kb_doc(self, path: Path) -> Document:
        entry = read_entry(path)
        if path.stem != entry.id or path.parent.name != entry.type:
            raise ValidationError(
                [
                    f"id/type: the file must be {entry.type}/{entry.id}.md to match "
                    f"its frontmatter; rename it or fix the frontmatter"
                ]
            )
        return entry.to_document(str(path))

    def scan(self) -> Scan:
        docs: list[Document] = []
        broken: set[str] = set()
        readable = {KB_SOURCE}
        kb_status = SourceStatus(KB_SOURCE, 0, True, self.kb_dir.is_dir(), str(self.kb_dir))
        seen: dict[str, Path] = {}
        seen_paths: set[str] = set()
        files, kb_status.problems = kb_files(self.kb_dir)
        for path in files:
            seen_paths.add(str(path))
            doc, error = self._load(path, self._kb_doc)
            if doc is not None and doc.id in seen:
                kb_status.problems.append(
                    f"{path.relative_to(self.kb_dir)}: id {doc.id!r} is already used by "
                    f"{seen[doc.id].relative_to(self.kb_dir)}; rename one of them"
                )
                continue
            if doc is not None:
                seen[doc.id] = path
                docs.append(doc)
            else:
                kb_status.problems.append(error or f"{path}: unreadable")
                broken.add(path.stem)
        kb_status.entries = len(docs)
        sources = {KB_SOURCE: kb_status}
        for corpus in self.corpora():
            status = SourceStatus(corpus.label, 0, False, corpus.available, str(corpus.path))
            if corpus.available:
                for rel, full in corpus_files(corpus):
                    seen_paths.add(str(full))
                    doc, error = self._load(
                        full, lambda p, c=corpus, r=rel: load_corpus_document(c, r, p)
                    )
                    if doc is not None:
                        docs.append(doc)
                        status.entries += 1
                    else:
                        status.problems.append(error or f"{full}: unreadable")
                readable.add(corpus.label)
            else:
                status.problems = [
                    f"root {corpus.path} is missing or unreadable; its indexed "
                    "entries are kept until it comes back"
                ]
            sources[corpus.label] = status
        # Forget the stat cache of files that are gone.
        self._stats = {k: v for k, v in self._stats.items() if k in seen_paths}
        return Scan(docs, readable, broken, sources)

    def kb_documents(self) -> list[Document]:
        """The KB entries as the last scan read them (no file is read again)."""
        return [
            st.doc
            for st in self._stats.values()
            if st.doc is not None and st.doc.source == KB_SOURCE
        ]

    def corpus_file(self, entry_id: str) -> tuple[Corpus, str, Path]:
        """The corpus, relative path and file of a read-only id `<label>/<rel>`; `NotFound`
        unless a scan of that corpus would read exactly this file."""
        label, _, rel = entry_id.partition("/")
        for corpus in self.corpora():
            if corpus.label == label and rel:
                full = corpus.resolve(rel)
                if full is not None:
                    return corpus, rel, full
                break
        raise NotFound(f"no entry with id {entry_id!r}")
