"""`memory-agent fanout`: a KB's flat type folders moved into 256 subfolders each (ADR 0031).

git writes the tree of a changed folder whole at every commit: in one folder of a million
entries each add spent ~1-2 s in git (experiments/million). Fanned out, an entry is
`kb/<type>/<xx>/<id>.md` (`kb.entries.shard`) and a commit rewrites one small folder's tree.

A preview says how many files move; `confirm` moves them and makes ONE commit of the moves and
`kb/.fanout` (after it, new entries are written fanned out). Nothing is rewritten: each file
keeps its bytes and its git blob, so `git log --follow` finds its history. Only files git
tracks are moved, and only when the KB has no uncommitted change to a tracked file (the commit
records exactly what was committed before, moved). Cut short (a killed daemon, HEAD moving
meanwhile), it is run again: a file already in its place counts as moved, moves staged and not
committed are staged again, and until the commit both places are read.
"""

from __future__ import annotations

import collections
import logging
import os
from pathlib import Path
from typing import Any

from memory_agent.errors import Conflict, GitError, Invalid
from memory_agent.kb.entries import ENTRY_TYPES, shard
from memory_agent.kb.files import FANOUT, FANOUT_TEXT, entry_of, fanned_out
from memory_agent.kb.gitrepo import STORE, KBRepo

__all__ = ["fan_out"]

SHOWN = 5  # moves listed in a preview
REFRESH_TIMEOUT_S = 3600.0  # re-reading a million moved files' stat info (and content)
log = logging.getLogger("memory_agent.gateway")


def _tracked_flat(repo: KBRepo) -> list[tuple[str, str, str]]:
    """(mode, blob, path) of every tracked flat entry file (`<type>/<id>.md`)."""
    listed = repo.git("ls-files", "-s", "-z", "--", *(f"{t}/*.md" for t in ENTRY_TYPES))
    found = []
    for record in filter(None, listed.split("\0")):
        info, path = record.split("\t", 1)
        mode, blob, _stage = info.split()
        if path.count("/") == 1 and entry_of(path) is not None:
            found.append((mode, blob, path))
    return found


def _by_type(paths) -> dict[str, int]:
    counts = collections.Counter(p.split("/")[0] for p in paths)
    return {t: counts[t] for t in ENTRY_TYPES if counts[t]}


def _fanned(path: str) -> str:
    folder, name = path.split("/")
    return f"{folder}/{shard(name[:-3])}/{name}"


def _uncommitted(repo: KBRepo, kb_dir: Path) -> list[str]:
    """Changes to tracked files that are not committed (anywhere in the KB: the commit takes
    the index whole) - except a move this command started (a flat file gone, its fanned-out
    place holding it): what a rerun finishes."""
    listed = repo.git("status", "--porcelain=v1", "-z", "-uno")
    left = []
    for record in filter(None, listed.split("\0")):
        code, path = record[:2], record[3:]
        if code == " D" and path.count("/") == 1 and (kb_dir / _fanned(path)).is_file():
            continue
        left.append(f"{code.strip()} {path}")
    return left


def _cut_short(repo: KBRepo) -> bool:
    """Whether a fan-out staged its moves but did not commit them (killed, or HEAD moved): the
    marker is staged, not in HEAD."""
    staged = repo.git("diff", "--cached", "--name-only", "--", FANOUT).strip()
    return bool(staged) and not repo.succeeds("cat-file", "-e", f"HEAD:{FANOUT}")


def _check_folders(kb_dir: Path, folders: set[Path]) -> None:
    """Refuse, before anything moves, a subfolder to move into that is a link or a file (a
    pull can bring one in): nothing is moved through a link or stopped half-way."""
    for rel in sorted(folders):
        folder = kb_dir / rel
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise Invalid(
                f"{folder} is a {'symbolic link' if folder.is_symlink() else 'file'}; the "
                "fan-out moves entries into it, and memory-agent never writes through links",
                "replace it with a real folder (or move it away), then run it again",
            )


def fan_out(kb_dir: Path, repo: KBRepo, confirm: bool) -> dict[str, Any]:
    """The preview, or with `confirm` the moves and their commit. Call with the KB's write lock
    held (the gateway's)."""
    parent = repo.head()  # the commit moved from: HEAD moving meanwhile fails the commit
    if confirm and fanned_out(kb_dir) and _cut_short(repo):
        log.warning("a fan-out of %s was cut short after staging: its index is read again", kb_dir)
        repo.git("reset", "-q")  # the index back to HEAD; the files stay where they were moved
    moves = [(m, b, p, _fanned(p)) for m, b, p in _tracked_flat(repo)]
    reply: dict[str, Any] = {
        "kb_dir": str(kb_dir),
        "fanned_out": fanned_out(kb_dir),
        "moves": len(moves),
        "by_type": _by_type(p for *_, p, _ in moves),
        "examples": [{"from": p, "to": q} for *_, p, q in moves[:SHOWN]],
    }
    if not confirm:
        return {**reply, "status": "preview"}
    if not moves and fanned_out(kb_dir):
        return {**reply, "status": "unchanged"}
    left = _uncommitted(repo, kb_dir)
    if left:
        raise Conflict(
            f"{kb_dir} has uncommitted changes ({', '.join(left[:3])}"
            f"{'...' if len(left) > 3 else ''}); the fan-out commits only what is committed",
            f"commit or stash them (`git -C {kb_dir} status`), then run it again",
        )
    _check_folders(kb_dir, {Path(q).parent for *_, q in moves})
    moved, kept = [], []
    for mode, blob, path, to in moves:
        source, target = kb_dir / path, kb_dir / to
        if os.path.lexists(target) and os.path.lexists(source):
            kept.append(path)  # two files for one id: the scan reports it; a person decides
            continue
        if os.path.lexists(source):
            target.parent.mkdir(exist_ok=True)
            os.replace(source, target)
        moved.append((mode, blob, path, to))
    marker = kb_dir / FANOUT
    if not fanned_out(kb_dir):
        marker.write_text(FANOUT_TEXT, encoding="utf-8")
    lines = [f"0 {'0' * len(b)}\t{p}\0" for _, b, p, _ in moved]  # mode 0: out of the index
    lines += [f"{m} {b}\t{q}\0" for m, b, _, q in moved]
    repo.git(*STORE, "update-index", "-z", "--index-info", input="".join(lines))
    repo.git(*STORE, "update-index", "--add", "--", FANOUT)
    kinds = ", ".join(f"{t} {n:,}" for t, n in _by_type(p for *_, p, _ in moved).items())
    message = (
        f"memory: fan the KB out: {len(moved):,} entries to <type>/<xx>/<id>.md ({kinds or 'none'})\n\n"
        "Each file keeps its bytes; xx is the first two hex digits of the SHA-256 of its id. "
        f"New entries go there too (kb/{FANOUT})."
    )
    commit = repo.commit_staged(message, parent)
    try:  # the moved files' stat info (else the next `git status` hashes every file again)
        repo.git("update-index", "-q", "--refresh", check=False, timeout=REFRESH_TIMEOUT_S)
    except GitError:
        log.warning("git update-index --refresh after the fan-out did not finish; git redoes it")
    split = repo.git("config", "--type=bool", "--get", "core.splitIndex", check=False)
    if split.strip() == "true":
        # every entry moved: a split index would keep them all in .git/index (64 MB at 1M,
        # read and written by every later commit: 0.5 s each); push them into a new shared one
        repo.git("update-index", "--split-index")
    return {**reply, "status": "fanned_out", "commit": commit, "moved": len(moved), "kept": kept}
