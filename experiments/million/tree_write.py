"""What zlib costs a commit's tree: `write-tree` and the tree check's `git diff`, loose objects
compressed at git's default level (1) or stored (0), on a copy of a KB's repository.

    .venv/bin/python experiments/million/tree_write.py KB [--rounds 8] [--work DIR]
    .venv/bin/python experiments/million/tree_write.py --tiny   # a 3,000-entry folder (CI)

Copies KB's `.git` to a tmp folder; then, alternating the two levels each round, stages one more
entry in `note/` (`update-index --cacheinfo`: no file needed), times `git -c
core.looseCompression=L write-tree` and `git diff --name-only HEAD <tree>` (what
`KBRepo.commit_paths` runs), and prints per level the median and the spread in ms and the size
of the last tree written. The KB itself is never touched.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def git(repo: Path, *args: str, data: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=data, capture_output=True, text=True, check=True
    ).stdout


def tiny_kb(repo: Path, entries: int = 3000) -> None:
    git(repo, "init", "-q")
    blob = git(repo, "hash-object", "-w", "--stdin", data="---\nid: e\n---\nAn entry.\n").strip()
    listing = "".join(f"100644 {blob}\tnote/entry-{i:06d}.md\n" for i in range(entries))
    git(repo, "update-index", "--index-info", data=listing)
    tree = git(repo, "write-tree").strip()
    ident = ("-c", "user.name=m", "-c", "user.email=m@x")
    commit = git(repo, *ident, "commit-tree", tree, "-m", "kb").strip()
    git(repo, "update-ref", "HEAD", commit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kb", type=Path, nargs="?")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--work", type=Path, help="where the copy goes (default: a tmp dir)")
    parser.add_argument("--tiny", action="store_true", help="a 3,000-entry folder made here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tree-write-", dir=args.work))
    copy = work / "kb"
    copy.mkdir()
    if args.tiny:
        tiny_kb(copy)
        args.rounds = min(args.rounds, 3)
    elif args.kb is None or not (args.kb / ".git").is_dir():
        raise SystemExit("give a KB folder (a git repository), or --tiny")
    else:
        shutil.copytree(args.kb / ".git", copy / ".git", symlinks=True)
    head = git(copy, "rev-parse", "HEAD").strip()
    blob = git(copy, "hash-object", "-w", "--stdin", data="one more\n").strip()
    times: dict[str, tuple[list[float], list[float]]] = {"1": ([], []), "0": ([], [])}
    size = {}
    for r in range(args.rounds):
        for level, (writes, diffs) in times.items():
            git(
                copy,
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{blob},note/zz-{r}-{level}.md",
            )
            t = time.perf_counter()
            tree = git(copy, "-c", f"core.looseCompression={level}", "write-tree").strip()
            writes.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            git(copy, "diff", "--name-only", "--no-renames", "-z", head, tree, "--")
            diffs.append((time.perf_counter() - t) * 1000)
            sub = git(copy, "rev-parse", f"{tree}:note").strip()
            size[level] = (copy / ".git" / "objects" / sub[:2] / sub[2:]).stat().st_size
    entries = len(git(copy, "ls-tree", "--name-only", f"{head}:note").splitlines())
    print(
        f"| looseCompression | write-tree p50 (min-max) | diff p50 (min-max) | note/ tree on disk | ({entries:,} entries, {args.rounds} rounds) |"
    )
    print("|---|---|---|---|---|")
    for level, (writes, diffs) in times.items():
        print(
            f"| {level} | {statistics.median(writes):.0f} ({min(writes):.0f}-{max(writes):.0f}) ms "
            f"| {statistics.median(diffs):.0f} ({min(diffs):.0f}-{max(diffs):.0f}) ms "
            f"| {size[level] / 1e6:.2f} MB | |"
        )
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
