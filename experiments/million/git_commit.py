"""What one memory write's git commit costs in a KB of N files, with the index whole and split.

    .venv/bin/python experiments/million/git_commit.py [--files 1000000] [--commits 10] [--work DIR]
    .venv/bin/python experiments/million/git_commit.py --tiny   # 2,000 files, 3 commits (CI)

Makes a KB-shaped repository of N entry-sized files, flat in five type folders as a KB keeps
them (the index and the files on disk; a few minutes at 1M), then times
`KBRepo.commit_paths` of one new entry, the call every write makes, `--commits` times with the
index whole and then split (`KBRepo.split_index_if_large` with the threshold lowered). Prints
per setting the p50, min and max in ms and the size of the index file git rewrites. ADR 0025.
"""

from __future__ import annotations

import argparse
import os
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
    """N entries in type folders, flat as a KB has them. The blobs go in by `git fast-import`
    (its trees would take quadratic time on folders this flat), the index by `update-index
    --index-info`, the files on disk by `git checkout-index`."""
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    marks = repo / ".git" / "bench-marks"
    feed = subprocess.Popen(
        [*git, "fast-import", "--quiet", f"--export-marks={marks}"], stdin=subprocess.PIPE
    )
    assert feed.stdin is not None
    for i in range(files):
        data = f"---\nid: e{i:07d}\ntitle: entry {i}\ntype: fact\n---\nThe text of {i}.\n".encode()
        feed.stdin.write(f"blob\nmark :{i + 1}\ndata {len(data)}\n".encode() + data + b"\n")
    feed.stdin.close()
    if feed.wait() != 0:
        raise SystemExit("git fast-import failed")
    sha = dict(line.split() for line in marks.read_text().splitlines())
    listing = "".join(
        f"100644 {sha[f':{i + 1}']}\t{TYPES[i % len(TYPES)]}/e{i:07d}.md\n" for i in range(files)
    )
    subprocess.run([*git, "update-index", "--index-info"], input=listing.encode(), check=True)
    tree = subprocess.run([*git, "write-tree"], capture_output=True, text=True, check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x"}
    env |= {"GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@x"}
    commit = subprocess.run(
        [*git, "commit-tree", tree.stdout.strip(), "-m", "kb"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    subprocess.run([*git, "update-ref", "HEAD", commit.stdout.strip()], check=True)
    subprocess.run([*git, "checkout-index", "--all", "--force"], check=True)
    subprocess.run([*git, "update-index", "--refresh", "-q"], check=False)


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
