"""What a round of sync may publish (`memory_agent.sync.remote`): the commits to push are
scanned for secrets - what each commit adds to the files it adds or changes, and each commit's
message (a token pasted into `git commit -m` travels as far as a file's) - and one holding a
real-looking secret is refused, naming the file, the line, the commit, the finding's
fingerprint and the two ways out (take it out, or release a false positive). The scan is the
strict strength of capture's rules (`intake.secrets`): a placeholder, a word or a
documentation snippet (`permissions: id-token: write`, `Authorization: Bearer <token>`) is not
a secret; a commit answers for the secrets it adds, not for those its file already held; and
a finding whose fingerprint is on the KB's allow-list (`kb/.memory-agent-allow`, as the commit
to push holds it) is released - so a machine blocked by a false positive recovers with one
reviewed commit, no history rewritten. Nor does a round publish while git is mid-rebase
(merge, cherry-pick...) in the KB or its HEAD is detached: the branch then still holds the
commits a person is rewriting. docs/adr/0016-sync-through-a-git-remote.md,
docs/adr/0023-secrets-in-the-kb.md.
"""

from __future__ import annotations

from pathlib import Path

from memory_agent.errors import RepoBusy
from memory_agent.intake.secrets import (
    ALLOW_FILE,
    SecretFound,
    allowed_in,
    describe,
    fingerprint,
    found,
    line_of,
    new_in,
    scannable,
)
from memory_agent.kb.gitrepo import KBRepo

__all__ = ["SecretFound", "check_quiet", "check_secrets"]


def _ways_out(kb_dir: Path, base: str, commit: str, fp: str, edit: str) -> str:
    return (
        "if it is a secret, take it out of the unpushed commits (README 'Two machines and a "
        f"team', 'A secret in a commit'): `git -C {kb_dir} branch rescue-secret HEAD`, then "
        f"`git -C {kb_dir} rebase -i {base}` and {edit} commit {commit[:12]} (writes wait "
        "while the rebase runs), then `memory-agent sync`; if it is not a secret, release it: "
        f"`memory-agent secrets allow {fp} --reason '...'` (a commit of kb/{ALLOW_FILE}, "
        "pushed with the rest), then `memory-agent sync`"
    )


def check_secrets(kb_dir: Path, since: str | None, head: str) -> None:
    """Refuse to publish the commits from `since` (exclusive; None: the root) to `head` when
    one adds a real-looking secret. The files each commit adds or changes come from one `git
    log`, their text and their parent's from one `git cat-file --batch` (not a process per
    file: a first push may publish thousands), the messages from one more `git log`."""
    repo = KBRepo(kb_dir)
    base = since[:12] if since else "--root"
    wanted = repo.added_or_changed(since, head)
    parents = [(f"{commit}^", name) for commit, name in wanted]
    texts = repo.blobs([*wanted, *parents, (head, ALLOW_FILE)])
    allowed = allowed_in(texts[-1])
    news, olds = texts[: len(wanted)], texts[len(wanted) : 2 * len(wanted)]
    for (commit, name), text, before in zip(wanted, news, olds, strict=True):
        added = new_in(scannable(name, text) or "", scannable(name, before), allowed)
        if added:
            raise SecretFound(
                f"kb/{name} holds what looks like a secret at line "
                f"{line_of(added[0], text or '')} ({describe(added[0])}; commit {commit[:12]}); "
                "nothing was pushed",
                _ways_out(kb_dir, base, commit, fingerprint(added[0]), "edit"),
            )
    span = [head, "--not", since] if since else [head]
    listed = repo.git("log", "-z", "--no-show-signature", "--format=%H%n%B", *span)
    for record in listed.split("\0"):
        commit, _, message = record.lstrip("\n").partition("\n")
        hits = found(message, allowed) if message else []
        if hits:
            raise SecretFound(
                f"the message of commit {commit[:12]} holds what looks like a secret "
                f"({describe(hits[0])}); nothing was pushed",
                _ways_out(kb_dir, base, commit, fingerprint(hits[0]), "reword"),
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
