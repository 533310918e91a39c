"""What a round of sync may publish (`memory_agent.sync.remote`): the commits to push are
scanned with capture's secret patterns (`intake.redact`) - the files each commit adds or
changes, and each commit's message (a token pasted into `git commit -m` travels as far as
a file's) - and one holding a secret is refused, naming the commit and the way out. Nor
does a round publish while git is mid-rebase (merge, cherry-pick...) in the KB or its HEAD is
detached: the branch then still holds the commits a person is rewriting.
docs/adr/0016-sync-through-a-git-remote.md.
"""

from __future__ import annotations

from pathlib import Path

from memory_agent.errors import Invalid, RepoBusy
from memory_agent.intake.redact import redact
from memory_agent.kb.gitrepo import KBRepo

__all__ = ["SecretFound", "check_quiet", "check_secrets"]


class SecretFound(Invalid):
    pass


def check_secrets(kb_dir: Path, since: str | None, head: str) -> None:
    """Refuse to publish the commits from `since` (exclusive; None: the root) to `head` when
    one holds a secret. The files each commit adds or changes come from one `git log`, their
    text from one `git cat-file --batch` (not a process per file: a first push may publish
    thousands), the messages from one more `git log`."""
    repo = KBRepo(kb_dir)
    base = since[:12] if since else "--root"
    wanted = repo.added_or_changed(since, head)
    for (commit, name), text in zip(wanted, repo.blobs(wanted), strict=True):
        if text and redact(text) != text:
            raise SecretFound(
                f"kb/{name} holds what looks like a secret (commit {commit[:12]}); "
                "nothing was pushed",
                "take it out of the unpushed commits (README 'Two machines and a "
                f"team', 'A secret in a commit'): `git -C {kb_dir} branch "
                f"rescue-secret HEAD`, then `git -C {kb_dir} rebase -i "
                f"{base}` and edit commit "
                f"{commit[:12]} to remove it (writes wait while the rebase runs), "
                "then `memory-agent sync`",
            )
    span = [head, "--not", since] if since else [head]
    listed = repo.git("log", "-z", "--no-show-signature", "--format=%H%n%B", *span)
    for record in listed.split("\0"):
        commit, _, message = record.lstrip("\n").partition("\n")
        if message and redact(message) != message:
            raise SecretFound(
                f"the message of commit {commit[:12]} holds what looks like a secret; "
                "nothing was pushed",
                "take it out of the unpushed commits (README 'Two machines and a team', 'A "
                f"secret in a commit'): `git -C {kb_dir} branch rescue-secret HEAD`, then "
                f"`git -C {kb_dir} rebase -i {base}` and reword commit {commit[:12]} "
                "(writes wait while the rebase runs), then `memory-agent sync`",
            )


def check_quiet(kb_dir: Path) -> None:
    """Refuse a round (`RepoBusy`, naming the state and the git command that ends it) while
    git is mid-rebase, merge, cherry-pick, revert or bisect in the KB, its HEAD is detached or
    another branch is checked out: the branch still holds what the person is rewriting (a
    push now publishes the commit a `rebase -i` is dropping), and a move would be lost."""
    try:
        KBRepo(kb_dir).check_writable()
    except RepoBusy as exc:
        raise RepoBusy(
            f"no round of sync ran (nothing pulled or pushed): {exc.message}", exc.fix
        ) from None
