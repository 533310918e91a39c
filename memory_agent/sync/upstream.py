"""A remote that lacks the KB's branch (`memory_agent.sync.remote`): a round's fetch found no
`refs/heads/<branch>` there. An empty remote is the normal first push, which creates it; a
remote that holds other branches is not - the machines would write to two branches, each
round saying ahead 0 / behind 0, and never see each other's entries. That happens when two
machines' git made the KB under different default branches (`main` and git's own `master`),
or when someone renamed or deleted the shared branch on the remote. The round then refuses,
naming the remote's branches and how to follow one. An empty remote is compared with nothing
(not with what the remote-tracking branch last held: a remote moved to or wiped gets every
commit pushed), and `remote set` to another URL forgets what the KB knew of the old remote.
A commit upstream brought that git refuses to check out (a path with `..`, made by a tool
other than git) is named, with who can repair it (`refused_commit`).
docs/adr/0016-sync-through-a-git-remote.md.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from memory_agent.errors import Conflict, GitError
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.sync.transport import network_env

__all__ = ["check_missing_branch", "refused_commit", "set_remote"]

_INVALID_PATH = re.compile(r"invalid path '([^']+)'")


def check_missing_branch(
    kb_dir: Path, remote: str, branch: str, shown_url: str, synced_before: bool, timeout: float
) -> None:
    """Return when the remote holds no branch at all (the push creates `branch`); otherwise
    raise `Conflict` naming the branches it has (its default first) and the fix."""
    env = network_env(kb_dir)
    proc = subprocess.run(
        ["git", "-C", str(kb_dir), "ls-remote", "--symref", remote, "HEAD", "refs/heads/*"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise GitError(
            f"the remote {shown_url} has no branch {branch}, and listing its branches failed",
            "run `memory-agent sync` again; if it persists, run `git ls-remote origin` in "
            f"{kb_dir} to see the whole error",
        )
    default, heads = None, []
    for line in proc.stdout.splitlines():
        ref, _, name = line.partition("\t")
        if ref.startswith("ref: refs/heads/") and name == "HEAD":
            default = ref[len("ref: refs/heads/") :]
        elif name.startswith("refs/heads/"):
            heads.append(name[len("refs/heads/") :])
    if not heads:  # an empty remote: the push creates the branch, with every commit
        KBRepo(kb_dir).git("update-ref", "-d", f"refs/remotes/{remote}/{branch}", check=False)
        return
    if default not in heads:
        default = "main" if "main" in heads else heads[0]
    others = ", ".join([default, *sorted(h for h in heads if h != default)][:5])
    why = (
        f"the branch {branch} this KB synced with until now is gone from the remote (renamed "
        "or deleted there)"
        if synced_before
        else "this machine's git made the KB on another branch than the one the remote holds"
    )
    raise Conflict(
        f"the remote {shown_url} has no branch {branch}; it has {others} ({why}); nothing was "
        f"pushed, so that the machines do not write to two branches",
        f"to follow the remote's {default}: `git -C {kb_dir} branch -m {branch} {default}` "
        f"and `git -C {kb_dir} config memory-agent.branch {default}`, then `memory-agent "
        f"sync` (this machine's commits are replayed onto it); or, to publish this KB as the "
        f"branch {branch} on purpose, `git -C {kb_dir} push origin {branch}`",
    )


def set_remote(
    kb_dir: Path, remote: str, url: str, old: str | None, branch: str, synced: str
) -> None:
    """Point the KB's `remote` at `url`. Another URL than before (a move to a new server,
    another repository) forgets what the KB knew of the old one: its remote-tracking branch
    (a new, empty remote looked synced - nothing pushed, ahead 0 / behind 0) and the commit
    last synced, `synced` (another repository's history looked like the old one rewritten:
    sync stopped). The same URL again keeps both: the guard against a rewrite stays."""
    repo = KBRepo(kb_dir)
    repo.git("remote", "set-url" if old else "add", remote, url)
    if old is not None and old != url:
        repo.git("update-ref", "-d", f"refs/remotes/{remote}/{branch}", check=False)
        repo.git("update-ref", "-d", synced, check=False)


def refused_commit(kb_dir: Path, since: str | None, head: str, said: str) -> Conflict | None:
    """When git refused to check out `head` for a path it will not write (`said`: its
    stderr, "invalid path '../x.md'"), the error naming the commit since `since` that brought
    the path and who can repair it; None when git said something else."""
    found = _INVALID_PATH.search(said)
    if found is None:
        return None
    path = found.group(1)
    span = [head, "--not", since] if since else [head]
    listed = KBRepo(kb_dir).git(
        "log",
        "-z",
        "--reverse",
        "--no-renames",
        "--diff-filter=AMT",
        "--name-only",
        "--format=commit %H %s",
        *span,
        check=False,
    )
    commit, subject = head, ""
    current = None
    for token in listed.split("\0"):
        token = token.lstrip("\n")
        if token.startswith("commit ") and len(token.split(" ", 2)[1]) in (40, 64):
            current = token.split(" ", 2)
        elif token == path and current is not None:
            commit, subject = current[1], current[2] if len(current) > 2 else ""
            break
    return Conflict(
        f"sync: upstream's commit {commit[:12]} ({json.dumps(subject[:80])}) holds a path "
        f"git refuses to write, {path!r} - a tool other than git made it; nothing was pulled "
        "or pushed and every local commit is kept",
        f"the shared repository must be repaired where that commit was made: a new commit "
        f"without {path!r} (by the tool that wrote it), or the branch rewritten without "
        f"{commit[:12]} (then README 'Two machines and a team', 'A rewritten upstream'); "
        "then `memory-agent sync`",
    )
