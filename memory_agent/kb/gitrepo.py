"""The knowledge base's git repository: init or adopt, and commits of exactly the touched paths.

Never `git add -A`: another session (or the user's editor) may have dirty files in the KB, and
they must be neither committed nor changed by a memory write. `commit_paths` stages the named
paths only and commits with `git commit --only -- <paths>`, which records those paths alone
even if something else is staged. `state` tells a lifecycle write whether the file it is
about to change holds someone's uncommitted edit; `move_to` moves a round of sync's branch
and files without touching one (refused, naming them, when one is in the way).

Every command is one short `git` process run by `memory_agent.kb.gitrun` (under its rule for
git's lock files: wait, then name the holder or the stale lock). `check_writable` refuses a write
(`RepoBusy`) while git is mid-rebase (merge, cherry-pick, revert, bisect), on a detached HEAD,
or on another branch than the one recorded in the KB's git config (`memory-agent.branch`, set
at init or at the daemon's first start); the markers are looked for in the git directory git
names, so a KB that is a worktree or a submodule (`.git` a file) is checked too.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from memory_agent.errors import Conflict, GitError, RepoBusy
from memory_agent.faults import NONE, Faults
from memory_agent.kb.gitrun import fix_for, machine_name, process, run

__all__ = ["GitError", "KBRepo"]

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_FOUND = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})? (\w+) (\d+)")  # cat-file --batch: an object

# What git is in the middle of, from the files it leaves in .git, and how to finish or abort it.
_IN_PROGRESS = (
    ("rebase-merge", "a rebase", "git rebase --continue` or `git rebase --abort"),
    ("rebase-apply", "a rebase (or `git am`)", "git rebase --continue` or `git rebase --abort"),
    ("MERGE_HEAD", "a merge", "git merge --continue` or `git merge --abort"),
    (
        "CHERRY_PICK_HEAD",
        "a cherry-pick",
        "git cherry-pick --continue` or `git cherry-pick --abort",
    ),
    ("REVERT_HEAD", "a revert", "git revert --continue` or `git revert --abort"),
    ("BISECT_LOG", "a bisect", "git bisect reset"),
)
# A KB whose git index is larger than this (bytes; ~88 per file: about 90,000 files) gets
# git's split index, so a commit rewrites a small file instead of the whole index (ADR 0025).
SPLIT_INDEX_ABOVE = 8_000_000
# A commit's new objects are written loose without zlib: a folder's tree is written whole at
# every commit (4.3 MB at 100,000 entries, 2.5 MB at git's default level 1), and compressing it
# made write-tree ~2x slower and the tree check's diff ~1.4x (`experiments/million/
# tree_write.py`). `memory_agent.kb.upkeep` packs them, compressed, as they pile up.
STORE = ("-c", "core.looseCompression=0")
TRAILER = "Memory-Agent-Machine"  # the trailer naming the machine a commit was written on
BRANCH_KEY = "memory-agent.branch"  # git config in the KB: the branch memory-agent writes to


class KBRepo:
    def __init__(
        self,
        path: Path,
        *,
        lock_wait: float | None = None,
        proc_root: str | Path | None = None,
        faults: Faults = NONE,
    ):
        self.path = Path(path)
        self.lock_wait = lock_wait  # None: gitrun.LOCK_WAIT_S
        self.proc_root = proc_root  # the process table that names a lock's holder (None: /proc)
        self.faults = faults  # the test seam (memory_agent.faults): "pause-commit"
        self._git_dir: Path | None = None
        # (parent, commit, paths): the last commit `commit_paths` made and checked, and
        # exactly the paths it changed - the index's refresh takes them instead of a diff
        self.made: tuple[str, str, tuple[str, ...]] | None = None
        if not (self.path / ".git").exists():
            raise GitError(
                f"{self.path} is not a git repository", "run `memory-agent init` to create it"
            )

    @classmethod
    def init(cls, path: Path) -> tuple[KBRepo, bool]:
        """Open the repository at `path`, creating it if needed, and record the branch the
        memory writes to (`memory-agent.branch` in its git config). Returns (repo, created)."""
        path.mkdir(parents=True, exist_ok=True)
        if (path / ".git").exists():
            repo = cls(path)
            repo.record_branch()  # an adopted repository: its branch now, unless recorded
            return repo, False
        run(path, "init", "-q")
        repo = cls(path)
        # An empty first commit, so HEAD exists and every write has a parent.
        repo.git("commit", "-q", "--allow-empty", "-m", "memory-agent: new knowledge base")
        repo.record_branch()
        return repo, True

    def git(
        self,
        *args: str,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        input: str | None = None,
    ) -> str:
        return run(
            self.path,
            *args,
            check=check,
            lock_wait=self.lock_wait,
            proc_root=self.proc_root,
            env=env,
            timeout=timeout,
            input=input,
        )

    def succeeds(self, *args: str) -> bool:
        """Whether `git args` exits 0 (a question git answers with its exit status)."""
        return self._proc(*args).returncode == 0

    def output(self, *args: str) -> str | None:
        """`git args`' output, or None when it fails (an object that is not there)."""
        proc = self._proc(*args)
        return proc.stdout if proc.returncode == 0 else None

    def _proc(self, *args: str, text: bool = True) -> subprocess.CompletedProcess:
        return process(
            self.path, *args, text=text, lock_wait=self.lock_wait, proc_root=self.proc_root
        )

    def git_dir(self) -> Path:
        """The repository's git directory: `.git` itself, or where a `.git` file points (a
        worktree's or a submodule's; asked of git once)."""
        if self._git_dir is None:
            dot = self.path / ".git"
            if dot.is_dir():
                self._git_dir = dot
            else:
                self._git_dir = Path(self.git("rev-parse", "--absolute-git-dir").strip())
        return self._git_dir

    def split_index_if_large(self) -> bool:
        """Turn git's split index on for a KB whose index is over `SPLIT_INDEX_ABOVE` bytes,
        unless `core.splitIndex` is set (either way: a person's choice stands). At a million
        files a commit then writes a ~0.2 MB index instead of 88 MB (1.5 s -> 0.5 s per
        commit, experiments/million). Whether it was turned on now."""
        try:
            size = (self.git_dir() / "index").stat().st_size
        except OSError:
            return False
        if size <= SPLIT_INDEX_ABOVE:
            return False
        if self.git("config", "--get", "core.splitIndex", check=False).strip():
            return False
        # A KB git cannot write to (read-only, a lock held) is left as it is: a write says why.
        try:
            if self._proc("config", "core.splitIndex", "true").returncode != 0:
                return False
            return self._proc("update-index", "--split-index").returncode == 0
        except GitError:  # the index's lock stayed taken: the next start tries again
            return False

    # -- the branch memory-agent writes to, and git's state -----------------------------------
    def branch(self) -> str | None:
        """The branch HEAD is on, or None when HEAD is detached (read from .git/HEAD)."""
        try:
            ref = (self.path / ".git" / "HEAD").read_text().strip()
        except OSError:
            out = self.git("symbolic-ref", "-q", "--short", "HEAD", check=False).strip()
            return out or None
        return ref[len("ref: refs/heads/") :] if ref.startswith("ref: refs/heads/") else None

    def recorded_branch(self) -> str | None:
        return self.git("config", "--get", BRANCH_KEY, check=False).strip() or None

    def record_branch(self) -> str | None:
        """Record the current branch as the one memory-agent writes to, unless one is
        recorded already (a home made before this record: its branch at the first start)."""
        recorded = self.recorded_branch()
        if recorded is None:
            recorded = self.branch()
            if recorded is not None:
                self.git("config", BRANCH_KEY, recorded)
        return recorded

    def check_writable(self) -> None:
        """Refuse (`RepoBusy`, a `Conflict`: naming the state and the git command that ends
        it) while git is in the middle of a rebase, merge, cherry-pick, revert or bisect, while
        HEAD is detached, or while the KB is on another branch than memory-agent's: a commit
        made then would be lost when the user finishes (the entry only in the reflog). A state
        the user ends: the same write works after it (the gate retries at its next run)."""
        problem = self._busy()
        if problem is not None:
            raise RepoBusy(*problem)
        kb = self.path
        current = self.branch()
        recorded = self.record_branch()
        if recorded is not None and current != recorded:
            raise RepoBusy(
                f"the knowledge base {kb} is on branch {current!r}, but memory-agent writes to "
                f"{recorded!r} (the branch it was created on); nothing was written",
                f"`git -C {kb} checkout {recorded}`, or make {current!r} the memory's branch: "
                f"`git -C {kb} config {BRANCH_KEY} {current}`",
            )

    def _busy(self) -> tuple[str, str] | None:
        """(message, fix) when git is mid-operation in the KB or HEAD is detached."""
        git_dir = self.git_dir()
        kb = self.path
        for name, what, finish in _IN_PROGRESS:
            if (git_dir / name).exists():
                return (
                    f"the knowledge base {kb} is in the middle of {what}; a write now would be "
                    "lost when it ends, so nothing was written",
                    f"finish or abort it (`{finish}` in {kb}), then retry",
                )
        if self.branch() is None:
            recorded = self.recorded_branch()
            back = f"git -C {kb} checkout {recorded}" if recorded else f"git -C {kb} switch -"
            return (
                f"the knowledge base {kb} has a detached HEAD (not on a branch); a write now "
                "would be lost at the next checkout, so nothing was written",
                f"go back to the branch: `{back}`, then retry",
            )
        return None

    def move_to(self, commit: str) -> None:
        """Move the branch and the files to `commit` (a round of sync), keeping a person's
        uncommitted edits (`git reset --keep`); refused (`Conflict`, naming the files and
        the fix) when one is in a file the move changes - nothing moves then."""
        proc = self._proc("reset", "-q", "--keep", commit)
        if proc.returncode == 0:
            return
        names = re.findall(r"'([^']+)'", proc.stderr.split("fatal:")[0])
        if not names or "invalid path '" in proc.stderr:  # (a path git refuses: not an edit)
            self.git("reset", "-q", "--keep", commit)  # raises the GitError with its fix
        kb = self.path
        raise Conflict(
            f"uncommitted edits in {kb} of {', '.join(names[:5])}, which the remote changed: "
            "nothing was pulled (the edits are kept)",
            f"commit them (`git -C {kb} commit -am ...`: the round then merges both sides) "
            f"or put them aside (`git -C {kb} stash`, then `git -C {kb} stash pop` after "
            "the round), then `memory-agent sync`",
        )

    def _rel(self, paths: Sequence[Path]) -> list[str]:
        root = self.path.resolve()
        return [str(Path(p).resolve().relative_to(root)) for p in paths]

    def commit_paths(self, paths: Sequence[Path], message: str) -> str:
        """Commit exactly `paths` (relative or absolute, inside the repo); return the hash.

        The commit is made with plumbing on the index as it is: stage the paths, write the
        tree, check that it differs from HEAD in these paths only, create the commit and move
        HEAD with a compare-and-swap (when a `git commit` of the user's moved HEAD meanwhile,
        taking the staged paths along, the hash returned is that commit's: the write is
        finished, not rolled back). That skips `git commit --only`'s temporary index, which
        costs ~0.6 s in a folder of 100k files. When the tree differs in more than these paths
        (someone has staged work) or cannot be written (unmerged paths), `git commit --only`
        records these paths alone, or says why it cannot.

        Two commands read the index (update-index and write-tree): each is ~150 ms at a million
        files, so nothing else here does - the check compares the two trees with `git diff`,
        which reads no index (`git diff-tree` reads it)."""
        rel = self._rel(paths)
        if TRAILER not in message:  # which machine wrote it: a team's log says who wrote what
            message = f"{message.rstrip()}\n\n{TRAILER}: {machine_name()}"
        busy = self._busy()  # checked before the write too; this closes the gap since
        if busy is not None:
            raise GitError(*busy)
        parent = self.head()
        if parent is not None:
            commit = self._commit_plumbing(rel, message, parent)
            if commit is not None:
                return commit
        self.git("add", "--", *rel)
        self.git("commit", "-q", "--no-verify", "-m", message, "--only", "--", *rel)
        return self.head() or ""

    def _nothing_staged(self, rel: Sequence[str] = ()) -> bool:
        proc = self._proc("diff", "--cached", "--quiet", "--", *rel)
        return proc.returncode == 0

    def _commit_plumbing(self, rel: list[str], message: str, parent: str) -> str | None:
        self.git(*STORE, "update-index", "--add", "--remove", "--", *rel)
        written = self._proc(*STORE, "write-tree")
        if written.returncode != 0:
            return None  # unmerged paths: `git commit --only` says so, with git's words
        tree = written.stdout.strip()
        changed = self.git(
            "diff", "--name-only", "--no-renames", "--no-relative", "-z", parent, tree, "--"
        )
        names = tuple(name for name in changed.split("\0") if name)
        if set(names) - set(rel):
            return None  # something else is staged: take the safe path
        commit = self.git(*STORE, "commit-tree", tree, "-p", parent, "-m", message).strip()
        self.faults.reach("pause-commit")  # (a test: the user commits now)
        try:
            self.git(
                "update-ref", "-m", f"commit: {message.splitlines()[0]}", "HEAD", commit, parent
            )
        except GitError:
            # HEAD moved since `parent` was read. The paths are staged in the user's index, so a
            # `git commit` made meanwhile took them along: then the write is finished (in the
            # user's commit) and must not be rolled back - the reply would say "nothing
            # changed" while HEAD holds the entry.
            now = self.head()
            if now is None or now == parent:
                raise
            if self._holds(now, tree, rel):
                return now
            raise GitError(
                f"a commit was made in {self.path} during the write (HEAD moved from "
                f"{parent[:12]} to {now[:12]}) that did not take all of this write's files along",
                "retry the write",
            ) from None
        self.made = (parent, commit, names)
        return commit

    def commit_staged(self, message: str, parent: str | None) -> str:
        """Commit the index as it is (a change the caller staged whole: `memory-agent fanout`)
        on `parent`, moving HEAD from it with a compare-and-swap (`GitError` if HEAD moved
        since the caller read it); the hash."""
        if TRAILER not in message:
            message = f"{message.rstrip()}\n\n{TRAILER}: {machine_name()}"
        tree = self.git(*STORE, "write-tree").strip()
        commit = self.git(
            *STORE, "commit-tree", tree, *(("-p", parent) if parent else ()), "-m", message
        ).strip()
        self.git(
            "update-ref",
            "-m",
            f"commit: {message.splitlines()[0]}",
            "HEAD",
            commit,
            *((parent,) if parent else ()),
        )
        return commit

    def _holds(self, commit: str, tree: str, rel: Sequence[str]) -> bool:
        """Whether `commit` has exactly `tree`'s blobs (or their absence) at the paths `rel`."""
        ours = self._proc("ls-tree", "-r", "--full-tree", tree, "--", *rel)
        theirs = self._proc("ls-tree", "-r", "--full-tree", commit, "--", *rel)
        return ours.returncode == 0 and theirs.returncode == 0 and ours.stdout == theirs.stdout

    def unstage(self, paths: Sequence[Path]) -> None:
        """Put the index of `paths` back to HEAD (after a commit that failed). Raises
        `GitError` when it could not (the lock stayed taken): the index is then checked, not
        assumed, since `git reset` exits 1 for "unstaged changes after reset" as well."""
        rel = self._rel(paths)
        if self._nothing_staged(rel):
            return  # (reads the index without its lock: a stale lock does not stop this)
        proc = self._proc("reset", "-q", "--", *rel)
        if proc.returncode != 0 and not self._nothing_staged(rel):
            stderr = " ".join(proc.stderr.split())[:500]
            raise GitError(
                f"`git reset` could not unstage {', '.join(rel)} in {self.path}: {stderr}",
                fix_for(stderr, self.path),
            )

    def state(self, path: Path) -> str | None:
        """None when the file is exactly as committed; else what is uncommitted about it:
        "untracked", "modified", "staged" or "deleted"."""
        out = self.git(
            "status", "--porcelain=v1", "--untracked-files=all", "--", *self._rel([path])
        )
        line = out.splitlines()[0] if out.strip() else ""
        if not line:
            return None
        index, worktree = line[0], line[1]
        if line.startswith("??"):
            return "untracked"
        if "D" in (index, worktree):
            return "deleted"
        return "modified" if worktree != " " else "staged"

    def changed_between(self, old: str, new: str) -> list[str] | None:
        """The paths git changed from commit `old` to `new` (no renames: a move is a removal
        and an addition), relative to the repository; None when `old` is not in it."""
        out = self.output("diff", "--name-only", "--no-renames", "-z", old, new, "--")
        return None if out is None else [name for name in out.split("\0") if name]

    def added_or_changed(self, since: str | None, head: str) -> list[tuple[str, str]]:
        """(commit, path) of each file the commits from `since` (exclusive; None: the root) to
        `head` add or change - a link made a file (or the reverse) included: git calls that a
        type change - from one `git log` (deletions are not listed)."""
        span = [head, "--not", since] if since else [head]
        listed = self.git(
            "log",
            "-z",
            "--no-renames",
            "--no-show-signature",
            "--diff-filter=AMT",
            "--name-only",
            "--format=commit %H",
            *span,
        )
        out: list[tuple[str, str]] = []
        commit = ""
        for token in listed.split("\0"):
            token = token.lstrip("\n")
            if token.startswith("commit ") and len(token) in (47, 71):
                commit = token[7:]
            elif token and commit:
                out.append((commit, token))
        return out

    def show(self, commit: str, name: str) -> str | None:
        """The text of `name` at `commit` (None: not there)."""
        return self.output("show", f"{commit}:{name}")

    def show_bytes(self, commit: str, name: str) -> bytes | None:
        """The bytes of `name` at `commit`, whatever they hold (None: not there)."""
        proc = self._proc("show", f"{commit}:{name}", text=False)
        return proc.stdout if proc.returncode == 0 else None

    def blobs(self, wanted: list[tuple[str, str]], timeout: float = 120.0) -> list[str | None]:
        """The text of each (commit, path), read by one `git cat-file --batch` (None: not a
        blob there)."""
        batch = [(c, n) for c, n in wanted if "\n" not in n]  # a newline would end the request
        data = b""
        if batch:
            data = subprocess.run(
                ["git", "-C", str(self.path), "cat-file", "--batch"],
                input="".join(f"{c}:{n}\n" for c, n in batch).encode("utf-8"),
                capture_output=True,
                check=True,
                timeout=timeout,
            ).stdout
        texts: dict[tuple[str, str], str | None] = {}
        pos = 0
        for key in batch:
            eol = data.index(b"\n", pos)
            found, pos = _FOUND.fullmatch(data[pos:eol]), eol + 1
            if found:  # "<sha> <type> <size>", then the content and a newline
                size = int(found[2])
                body = data[pos : pos + size]
                pos += size + 1
                texts[key] = body.decode("utf-8", "replace") if found[1] == b"blob" else None
            else:  # "<commit>:<path> missing" (a path may hold spaces), or "... ambiguous"
                texts[key] = None
        return [texts[k] if k in texts else self.show(*k) for k in wanted]

    def head(self) -> str | None:
        """The commit HEAD names (read from .git when it is a plain repository: no process)."""
        git_dir = self.path / ".git"
        try:
            ref = (git_dir / "HEAD").read_text().strip()
            if not ref.startswith("ref: "):
                return ref if _SHA.match(ref) else None
            name = ref[5:]
            try:  # read, not stat-then-read: a search reads HEAD at every refresh
                sha = (git_dir / name).read_text().strip()
            except (FileNotFoundError, NotADirectoryError):
                sha = None  # a packed ref
            if sha is not None:
                return sha if _SHA.match(sha) else None
            for line in (git_dir / "packed-refs").read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == name and _SHA.match(parts[0]):
                    return parts[0]
            return None  # an unborn branch
        except (OSError, NotADirectoryError):
            out = self.git("rev-parse", "--verify", "-q", "HEAD", check=False).strip()
            return out or None

    def committed_text(self, path: Path) -> str | None:
        """The file's text at HEAD, or None if HEAD does not have it."""
        if self.head() is None:
            return None
        rel = self._rel([path])[0]
        proc = self._proc("show", f"HEAD:{rel}", text=False)
        return proc.stdout.decode("utf-8") if proc.returncode == 0 else None

    def last_commit_touching(self, path: Path) -> str | None:
        if self.head() is None:
            return None
        out = self.git("log", "-1", "--format=%H", "--", self._rel([path])[0])
        return out.strip() or None

    def log(self, *args: str) -> str:
        return self.git("log", *args)
