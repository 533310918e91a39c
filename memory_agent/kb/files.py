"""The knowledge base's files: which files are entries, which file holds an id, and reading one.

An entry is `kb/<type>/<id>.md`: a regular file in a real type folder, named for the type and
id its frontmatter gives. A symbolic link inside the KB (a type folder or an entry file; a KB
pulled with git can bring one in) is never followed: the scan reports it and leaves it out, a
lookup refuses it naming the path, so no read or write can be led outside the KB or onto
another entry. When two type folders hold the same `<id>.md`, the first in the order of
ENTRY_TYPES owns the id and the other is reported. The scan (`index.scanner`), `memory_get`
(`recall.reads`) and the write path (`write.gateway`) all find and read entry files through here.
"""

from __future__ import annotations

import os
from pathlib import Path

from memory_agent.errors import Invalid
from memory_agent.kb.entries import ENTRY_TYPES, InvalidFile, check_id, read_entry

__all__ = [
    "duplicate_problem",
    "entry_file",
    "kb_claims",
    "kb_file_names",
    "kb_files",
    "name_taken",
    "read_kb_entry",
]


def _link_problem(path: Path, kb_dir: Path) -> str:
    return (
        f"{path.relative_to(kb_dir)} is a symbolic link; links inside kb/ are never followed: "
        "replace it with the real file or folder"
    )


def kb_files(kb_dir: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Every entry file (`<type>/<name>.md`, a regular file in a real folder), sorted, and
    (path, problem) for each symbolic link found on the way."""
    names, problems = kb_file_names(kb_dir)
    return [Path(folder, name) for folder, name in names], problems


def kb_file_names(kb_dir: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """`kb_files` as (folder, file name) strings: a full scan of a million entries makes no
    `Path` per file (its parsing was most of the scan's time)."""
    names: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    for entry_type in ENTRY_TYPES:
        folder = kb_dir / entry_type
        if folder.is_symlink():
            problems.append((str(folder), _link_problem(folder, kb_dir)))
            continue
        try:
            with os.scandir(folder) as listing:  # the kind comes with the listing: no stat
                found = [
                    (e.name, e.is_symlink(), e.is_file(follow_symlinks=False))
                    for e in listing
                    if e.name.endswith(".md")
                ]
        except (NotADirectoryError, FileNotFoundError):
            continue
        where = str(folder)
        for name, link, regular in sorted(found):  # names as strings: 100k Paths sort slowly
            if link:
                problems.append((str(folder / name), _link_problem(folder / name, kb_dir)))
            elif regular:
                names.append((where, name))
    return names, problems


def read_kb_entry(path: Path):
    """The entry in `path`, a file of the KB: read, validated, and refused (`ValidationError`)
    unless the file is `<type>/<id>.md` for the type and id its frontmatter gives. The scans
    and `memory_get` (and the gateway) all read KB files through this, so a file the index
    leaves out is never served as an entry."""
    entry = read_entry(path)
    if path.stem != entry.id or path.parent.name != entry.type:
        raise InvalidFile(
            [
                f"id/type: the file must be {entry.type}/{entry.id}.md to match "
                f"its frontmatter; rename it or fix the frontmatter"
            ],
            path,
        )
    return entry


def duplicate_problem(path: Path, owner: Path, kb_dir: Path) -> str:
    return (
        f"{path.relative_to(kb_dir)}: id {path.stem!r} is already used by "
        f"{owner.relative_to(kb_dir)}; rename one of them"
    )


def kb_claims(kb_dir: Path, entry_id: str) -> tuple[Path | None, dict[str, str]]:
    """Who holds `entry_id`, by the rule of the full scan: the first regular `<id>.md` in the
    order of ENTRY_TYPES owns it; a later one is a duplicate, a link is never followed. Returns
    the owner and a problem per other path (keyed by path). Ten lookups."""
    owner: Path | None = None
    problems: dict[str, str] = {}
    for entry_type in ENTRY_TYPES:
        folder = kb_dir / entry_type
        path = folder / f"{entry_id}.md"
        if folder.is_symlink():
            continue  # reported with the folder by the full scan
        if path.is_symlink():
            problems[str(path)] = _link_problem(path, kb_dir)
        elif path.is_file():
            if owner is None:
                owner = path
            else:
                problems[str(path)] = duplicate_problem(path, owner, kb_dir)
    return owner, problems


def name_taken(kb_dir: Path, entry_id: str) -> bool:
    """True when a new entry may not take `entry_id`: some type folder already holds
    `<id>.md` (an entry, a link or anything else). Ten lookups, whatever the size of the KB."""
    return any(os.path.lexists(kb_dir / t / f"{entry_id}.md") for t in ENTRY_TYPES)


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
