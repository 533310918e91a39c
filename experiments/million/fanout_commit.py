"""What git costs one add's commit in a KB of N entries, flat (`note/<id>.md`) or fanned out
(`note/<xx>/<id>.md`, ADR 0031): each git command of `KBRepo.commit_paths`, timed.

    .venv/bin/python experiments/million/fanout_commit.py [--entries 1000000 | --kb KB]
        [--rounds 8] [--work DIR]
    .venv/bin/python experiments/million/fanout_commit.py --tiny   # 3,000 entries (CI)

Builds two repositories of N entries in a tmp folder (one blob for all, paths listed straight
into the index with `update-index --index-info`, no files; with `--kb`, a copy of a real KB's
objects and its HEAD's paths, flat and moved to their fanned-out places; split index on, as
`KBRepo.split_index_if_large` turns it on above ~90,000 files), then, alternating the layouts
each round, writes one new entry file and times what a write's commit runs: `update-index
--add`, `write-tree`, the tree check's `git diff` of the two trees, and `commit-tree` +
`update-ref` - with the commit's own settings (`gitrepo.STORE`: loose objects stored). Prints
per layout the median of each and of their sum, in ms.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

STORE = ("-c", "core.looseCompression=0")
IDENT = ("-c", "user.name=m", "-c", "user.email=m@x")
STEPS = ("update-index", "write-tree", "diff", "commit-tree+update-ref")


def git(repo: Path, *args: str, data: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=data, capture_output=True, text=True, check=True
    ).stdout


def place(entry_id: str, fanned: bool) -> str:
    shard = hashlib.sha256(entry_id.encode()).hexdigest()[:2]
    return f"note/{shard}/{entry_id}.md" if fanned else f"note/{entry_id}.md"


def relocate(path: str, fanned: bool) -> str:
    """A KB path, moved to its fanned-out place (a `<type>/<id>.md` only)."""
    parts = path.split("/")
    if not fanned or len(parts) != 2 or not parts[1].endswith(".md"):
        return path
    shard = hashlib.sha256(parts[1][:-3].encode()).hexdigest()[:2]
    return f"{parts[0]}/{shard}/{parts[1]}"


def build(repo: Path, entries: int, fanned: bool, kb: Path | None = None) -> None:
    """N made-up entries (one blob), or with `kb` the entries of a real KB's HEAD (its objects
    copied, each path moved to its fanned-out place when `fanned`)."""
    repo.mkdir(parents=True)
    if kb is None:
        git(repo, "init", "-q")
        blob = git(repo, "hash-object", "-w", "--stdin", data="---\nid: e\n---\nAn entry.\n")
        rows = [(blob.strip(), f"note/entry-{i:07d}.md") for i in range(entries)]
    else:
        shutil.copytree(kb / ".git", repo / ".git", symlinks=True)
        for name in ("index", "index.lock"):
            (repo / ".git" / name).unlink(missing_ok=True)
        rows = [
            (line.split()[2], line.split("\t", 1)[1])
            for line in git(repo, "ls-tree", "-r", "HEAD").splitlines()
        ]
    listing = "".join(f"100644 {b}\t{relocate(p, fanned)}\n" for b, p in rows)
    git(repo, "update-index", "--index-info", data=listing)
    git(repo, "config", "core.splitIndex", "true")
    git(repo, "update-index", "--split-index")
    tree = git(repo, "write-tree").strip()
    git(repo, "update-ref", "HEAD", git(repo, *IDENT, "commit-tree", tree, "-m", "kb").strip())


def one_add(repo: Path, entry_id: str, fanned: bool) -> list[float]:
    rel = place(entry_id, fanned)
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(f"---\nid: {entry_id}\n---\nOne more.\n")
    parent = git(repo, "rev-parse", "HEAD").strip()
    marks = [time.perf_counter()]
    git(repo, *STORE, "update-index", "--add", "--", rel)
    marks.append(time.perf_counter())
    tree = git(repo, *STORE, "write-tree").strip()
    marks.append(time.perf_counter())
    git(repo, "diff", "--name-only", "--no-renames", "-z", parent, tree, "--")
    marks.append(time.perf_counter())
    commit = git(repo, *STORE, *IDENT, "commit-tree", tree, "-p", parent, "-m", entry_id).strip()
    git(repo, "update-ref", "HEAD", commit, parent)
    marks.append(time.perf_counter())
    return [(b - a) * 1000 for a, b in zip(marks, marks[1:], strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--kb", type=Path, help="a real KB (its HEAD's files) instead of N")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument(
        "--work", type=Path, help="where the repositories go and stay (default: tmp, removed)"
    )
    parser.add_argument("--tiny", action="store_true", help="3,000 entries, 3 rounds")
    args = parser.parse_args()
    if args.tiny:
        args.entries, args.rounds = 3000, min(args.rounds, 3)
    work = Path(tempfile.mkdtemp(prefix="fanout-commit-", dir=args.work))
    layouts = {"flat": False, "fanned": True}
    for name, fanned in layouts.items():
        t = time.perf_counter()
        build(work / name, args.entries, fanned, args.kb)
        held = len(git(work / name, "ls-files").splitlines())
        print(f"{name}: {held} files in its index, built in {time.perf_counter() - t:.0f} s")
    times: dict[str, list[list[float]]] = {name: [] for name in layouts}
    for r in range(args.rounds):
        for name, fanned in layouts.items():
            times[name].append(one_add(work / name, f"new-entry-{r:03d}", fanned))
    print(f"p50 of {args.rounds} adds (ms): {', '.join(STEPS)}, total")
    for name, rows in times.items():
        steps = [statistics.median(col) for col in zip(*rows, strict=True)]
        total = statistics.median(sum(row) for row in rows)
        print(f"  {name:>6}: " + " / ".join(f"{v:.1f}" for v in steps) + f" = {total:.1f}")
    if args.work is None:
        shutil.rmtree(work)
    else:
        print(f"(repositories kept in {work})")


if __name__ == "__main__":
    main()
