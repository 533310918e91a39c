"""The knowledge base's files: which files are entries, which file holds an id, and reading one.

An entry is `kb/<type>/<id>.md`, or in a fanned-out KB `kb/<type>/<xx>/<id>.md` where `xx` is
`shard(id)` (`kb.entries`: the first two hex digits of the id's SHA-256; ADR 0031): a regular
file in real folders, named for the type and id its frontmatter gives. Both places are read in
every KB (a flat entry a teammate's older client wrote into a fanned-out KB is still an entry);
new entries go where `fanned_out(kb)` says. A fanned-out KB has the file `kb/.fanout`: git
writes the tree of a changed folder whole at every commit, and one folder of a million entries
made each add ~1-2 s of git. A symbolic link inside the KB (a type folder or an entry file; a
KB pulled with git can bring one in) is never followed: the scan reports it and leaves it out, a
lookup refuses it naming the path, so no read or write can be led outside the KB or onto
another entry. When two type folders hold the same `<id>.md`, the first in the order of
ENTRY_TYPES owns the id and the other is reported. The scan (`index.scanner`), `memory_get`
(`recall.reads`) and the write path (`write.gateway`) all find and read entry files through here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from memory_agent.errors import Invalid
from memory_agent.kb.entries import ENTRY_TYPES, InvalidFile, check_id, read_entry, shard

__all__ = [
    "FANOUT",
    "duplicate_problem",
    "entry_file",
    "entry_id_at",
    "entry_of",
    "entry_places",
    "kb_claims",
    "kb_file_names",
    "kb_files",
    "fanned_out",
    "name_taken",
    "read_kb_entry",
    "renamed_place",
]

FANOUT = ".fanout"  # in the KB's root: new entries go to kb/<type>/<shard(id)>/<id>.md
FANOUT_TEXT = (
    "This knowledge base is fanned out: an entry is kb/<type>/<xx>/<id>.md, where xx is the\n"
    "first two hex digits of the SHA-256 of its id (git rewrites a changed folder's tree whole\n"
    "at every commit; 256 folders keep each small). Written by `memory-agent kb fanout`.\n"
)
_SHARD = re.compile(r"^[0-9a-f]{2}$")


def fanned_out(kb_dir: Path) -> bool:
    """Whether new entries of this KB go to `<type>/<shard(id)>/<id>.md` (`kb/.fanout` is a
    regular file)."""
    marker = kb_dir / FANOUT
    return marker.is_file() and not marker.is_symlink()


def entry_places(kb_dir: Path, entry_type: str, entry_id: str) -> tuple[Path, Path]:
    """The two places an entry of this type and id may be: flat, then fanned out."""
    folder = kb_dir / entry_type
    return folder / f"{entry_id}.md", folder / shard(entry_id) / f"{entry_id}.md"


def entry_of(rel: str) -> tuple[str, str] | None:
    """(type, id) when `rel`, a '/'-separated path inside the KB, is an entry's place
    (`<type>/<id>.md` or `<type>/<shard(id)>/<id>.md`), else None."""
    parts = rel.split("/")
    if len(parts) not in (2, 3) or parts[0] not in ENTRY_TYPES or not parts[-1].endswith(".md"):
        return None
    entry_id = parts[-1][:-3]
    if parts[-1].startswith(".") or (len(parts) == 3 and parts[1] != shard(entry_id)):
        return None
    return parts[0], entry_id


def entry_id_at(path: Path, kb_dir: Path) -> str | None:
    """The id of the entry whose place `path` is in the KB `kb_dir` (`entry_of`), or None."""
    if not path.is_relative_to(kb_dir):
        return None
    found = entry_of(path.relative_to(kb_dir).as_posix())
    return None if found is None else found[1]


def renamed_place(rel: str, new_id: str) -> str:
    """The entry place `rel` (`entry_of` holds) for another id, in the same layout."""
    parts = rel.split("/")
    if len(parts) == 3:
        return f"{parts[0]}/{shard(new_id)}/{new_id}.md"
    return f"{parts[0]}/{new_id}.md"


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


def kb_file_names(
    kb_dir: Path, folders: list[Path] | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """`kb_files` as (folder, file name) strings, each type's flat files first, then its
    fanned-out ones (the order that decides which of two files owns an id): a full scan of a
    million entries makes no `Path` per file (its parsing was most of the scan's time). A file
    in a two-hex-digit subfolder that is not its id's `shard` is reported, not read. `folders`
    is given every real folder listed (to watch)."""
    names: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    for entry_type in ENTRY_TYPES:
        folder = kb_dir / entry_type
        if folder.is_symlink():
            problems.append((str(folder), _link_problem(folder, kb_dir)))
            continue
        found, shards = _listing(folder)
        if found is None:
            continue
        _keep(folder, found, names, problems, kb_dir, None)
        if folders is not None:
            folders.append(folder)
        for sub, link in sorted(shards):
            if link:
                problems.append((str(folder / sub), _link_problem(folder / sub, kb_dir)))
                continue
            listed = _listing(folder / sub)[0]
            _keep(folder / sub, listed or [], names, problems, kb_dir, sub)
            if folders is not None and listed is not None:
                folders.append(folder / sub)
    return names, problems


def _listing(folder: Path) -> tuple[list[tuple[str, bool, bool]] | None, list[tuple[str, bool]]]:
    """(name, link, regular) of the `.md` names in `folder`, and (name, link) of its
    two-hex-digit subfolders; None for a missing folder."""
    try:
        with os.scandir(folder) as listing:  # the kind comes with the listing: no stat
            found, shards = [], []
            for e in listing:
                if e.name.endswith(".md"):
                    found.append((e.name, e.is_symlink(), e.is_file(follow_symlinks=False)))
                elif _SHARD.match(e.name) and (e.is_symlink() or e.is_dir()):
                    shards.append((e.name, e.is_symlink()))
    except (NotADirectoryError, FileNotFoundError):
        return None, []
    return found, shards


def _keep(folder, found, names, problems, kb_dir: Path, sub: str | None) -> None:
    where = str(folder)
    for name, link, regular in sorted(found):  # names as strings: 100k Paths sort slowly
        if link:
            problems.append((str(folder / name), _link_problem(folder / name, kb_dir)))
        elif not regular:
            continue
        elif sub is not None and shard(name[:-3]) != sub:
            at = f"{folder.parent.name}/{sub}/{name}"
            right = f"{folder.parent.name}/{shard(name[:-3])}/{name}"
            problems.append((str(folder / name), f"{at}: its place is {right}; move it there"))
        else:
            names.append((where, name))


def read_kb_entry(path: Path):
    """The entry in `path`, a file of the KB: read, validated, and refused (`ValidationError`)
    unless the file is `<type>/<id>.md` for the type and id its frontmatter gives. The scans
    and `memory_get` (and the gateway) all read KB files through this, so a file the index
    leaves out is never served as an entry."""
    entry = read_entry(path)
    folder = path.parent.parent if path.parent.name == shard(path.stem) else path.parent
    if path.stem != entry.id or folder.name != entry.type:
        raise InvalidFile(
            [
                f"id/type: the file must be {entry.type}/{entry.id}.md (or "
                f"{entry.type}/{shard(entry.id)}/{entry.id}.md) to match its frontmatter; "
                "rename it or fix the frontmatter"
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
    order of ENTRY_TYPES (each type's flat place before its fanned-out one) owns it; a later one
    is a duplicate, a link is never followed. Returns the owner and a problem per other path
    (keyed by path). Twenty lookups."""
    owner: Path | None = None
    problems: dict[str, str] = {}
    for entry_type, path in _places(kb_dir, entry_id):
        if (kb_dir / entry_type).is_symlink() or path.parent.is_symlink():
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
    `<id>.md`, flat or fanned out (an entry, a link or anything else). Twenty lookups, whatever
    the size of the KB."""
    return any(os.path.lexists(path) for _, path in _places(kb_dir, entry_id))


def _places(kb_dir: Path, entry_id: str) -> list[tuple[str, Path]]:
    """(type, path) of every place `entry_id` may be, in the order that decides its owner."""
    return [(t, p) for t in ENTRY_TYPES for p in entry_places(kb_dir, t, entry_id)]


def entry_file(kb_dir: Path, entry_id: str) -> Path | None:
    """The file of KB entry `entry_id`, or None. Raises `Invalid` (naming the path) when the
    entry's file or folder is a symbolic link; never scans the whole KB."""
    if check_id(entry_id) is not None:
        return None
    for entry_type, path in _places(kb_dir, entry_id):
        links = [f for f in (kb_dir / entry_type, path.parent) if f.is_symlink()]
        if links and path.exists():
            folder = links[0]
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
