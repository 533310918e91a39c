"""What one memory write's git commit costs in a KB of N files, with the index whole and split.

    .venv/bin/python experiments/million/git_commit.py [--files 1000000] [--commits 10] [--work DIR]
    .venv/bin/python experiments/million/git_commit.py --tiny   # 2,000 files, 3 commits (CI)

Makes a KB-shaped repository of N entry-sized files (`git fast-import`, then `git reset
--hard`: the index and the files on disk, as a KB has them; ~1 minute at 1M), then times
`KBRepo.commit_paths` of one new entry, the call every write makes, `--commits` times with the
index whole and then split (`KBRepo.split_index_if_large` with the threshold lowered). Prints
per setting the p50, min and max in ms and the size of the index file git rewrites. ADR 0025.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import memory_agent.kb.gitrepo as gitrepo  # noqa: E402
from memory_agent.kb.gitrepo import KBRepo  # noqa: E402

TYPES = ("fact", "decision", "pitfall", "note", "process")


def make_repo(repo: Path, files: int) -> None:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    feed = subprocess.Popen(
        ["git", "-C", str(repo), "fast-import", "--quiet"], stdin=subprocess.PIPE
    )
    assert feed.stdin is not None
    write = feed.stdin.write
    write(b"commit refs/heads/main\ncommitter m <m@x> 0 +0000\ndata 4\nkb!\n")
    for i in range(files):
        body = f"---\nid: e{i:07d}\ntitle: entry {i}\ntype: fact\n---\nThe text of {i}.\n"
        data = body.encode()
        path = f"{TYPES[i % len(TYPES)]}/e{i:07d}.md"
        write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    write(b"\n")
    feed.stdin.close()
    if feed.wait() != 0:
        raise SystemExit("git fast-import failed")
    subprocess.run(["git", "-C", str(repo), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard"], check=True)


def time_commits(repo: KBRepo, label: str, commits: int) -> list[float]:
    times = []
    for i in range(commits):
        path = repo.path / "note" / f"{label}-{i}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"---\nid: {label}-{i}\ntitle: {label} {i}\n---\nNew entry {i}.\n")
        t = time.perf_counter()
        repo.commit_paths([path], f"{label} {i}")
        times.append((time.perf_counter() - t) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument(
        "--work", type=Path, help="where the repository is made (default: a tmp dir)"
    )
    parser.add_argument("--tiny", action="store_true", help="2,000 files, 3 commits")
    args = parser.parse_args()
    if args.tiny:
        args.files, args.commits = 2_000, 3
    work = args.work or Path(tempfile.mkdtemp(prefix="git-commit-"))
    path = work / f"kb-{args.files}"
    if not (path / ".git").exists():
        t = time.perf_counter()
        make_repo(path, args.files)
        print(f"made {args.files:,} files in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    repo = KBRepo(path)
    if list((path / ".git").glob("sharedindex.*")):
        raise SystemExit(f"{path}'s index is split already: give a fresh --work")
    print(f"| index | commit p50 / min / max | index file rewritten | ({args.files:,} files) |")
    print("|---|---|---|---|")
    for label in ("whole", "split"):
        if label == "split":
            gitrepo.SPLIT_INDEX_ABOVE = 0
            assert repo.split_index_if_large(), "the split index could not be turned on"
        times = time_commits(repo, label, args.commits)
        size = (path / ".git" / "index").stat().st_size / 1e6
        print(
            f"| {label} | {statistics.median(times):.0f} / {min(times):.0f} / {max(times):.0f} ms "
            f"| {size:.1f} MB | |",
            flush=True,
        )


if __name__ == "__main__":
    main()
