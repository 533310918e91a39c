"""What a KB's loose git objects weigh, and what packing them costs, on a copy of its repository.

    .venv/bin/python experiments/million/pack_loose.py KB [--mode geometric|plain] [--work DIR]
    .venv/bin/python experiments/million/pack_loose.py --tiny   # a 300-entry KB made here (CI)

Copies KB's `.git` (the objects and the index, not the files) to a tmp folder, prints `git
count-objects -v`'s loose count and size and the largest loose object (a folder's tree: what
one add leaves), then times the packing `memory_agent.kb.upkeep` runs (`--mode geometric`: `git
repack --geometric=2 -d`, one git thread) or plain `git repack -d` (which lists every reachable
object first), and prints the counts after. The KB itself is never touched. ADR 0030.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def git(repo: Path, *args: str, data: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=data, capture_output=True, text=True, check=True
    ).stdout


def counts(repo: Path) -> dict[str, int]:
    pairs = (line.split(":", 1) for line in git(repo, "count-objects", "-v").splitlines())
    return {key: int(value) for key, value in pairs}


def largest_loose(repo: Path) -> int:
    objects = repo / ".git" / "objects"
    sizes = [
        f.stat().st_size
        for d in objects.iterdir()
        if len(d.name) == 2 and d.is_dir()
        for f in d.iterdir()
        if not f.name.startswith("tmp")
    ]
    return max(sizes, default=0)


def tiny_kb(repo: Path) -> None:
    """300 entries in one folder: 280 in a first commit, then one commit per entry."""
    git(repo, "init", "-q")
    note = repo / "note"
    note.mkdir()
    ident = ("-c", "user.name=m", "-c", "user.email=m@x")
    for i in range(300):
        (note / f"e{i:04d}.md").write_text(f"---\nid: e{i:04d}\n---\nEntry {i}.\n")
        if i >= 279:
            git(repo, "add", "note")
            git(repo, *ident, "commit", "-qm", f"entry {i}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kb", type=Path, nargs="?")
    parser.add_argument("--mode", choices=("geometric", "plain"), default="geometric")
    parser.add_argument("--work", type=Path, help="where the copy goes (default: a tmp dir)")
    parser.add_argument("--tiny", action="store_true", help="a 300-entry KB made here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pack-loose-", dir=args.work))
    copy = work / "kb"
    if args.tiny:
        copy.mkdir()
        tiny_kb(copy)
    elif args.kb is None or not (args.kb / ".git").is_dir():
        raise SystemExit("give a KB folder (a git repository), or --tiny")
    else:
        copy.mkdir()
        shutil.copytree(args.kb / ".git", copy / ".git", symlinks=True)
    before = counts(copy)
    print(
        f"loose: {before['count']:,} objects, {before['size'] / 1024:.1f} MB (largest "
        f"{largest_loose(copy) / 1e6:.2f} MB); packs: {before['packs']}, "
        f"{before['size-pack'] / 1024:.1f} MB"
    )
    cmd = ["-c", "pack.threads=1", "repack", "-d", "-q"]
    cmd += ["--geometric=2"] if args.mode == "geometric" else []
    t = time.perf_counter()
    git(copy, *cmd)
    took = time.perf_counter() - t
    after = counts(copy)
    print(
        f"git {' '.join(cmd)}: {took:.2f} s; loose after: {after['count']:,} objects, "
        f"{after['size'] / 1024:.1f} MB; packs: {after['packs']}, "
        f"{after['size-pack'] / 1024:.1f} MB"
    )
    git(copy, "fsck", "--no-progress", "--connectivity-only")
    shutil.rmtree(work)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
