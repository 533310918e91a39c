"""memory-agent's git commands under git as a person has it configured (issue 33, item 1): with
`commit.gpgSign` on, a KB is created and written whatever the signer can do - memory-agent's own
commits are never signed (docs/adr/0021-memory-agent-never-signs.md), by plumbing or by `git
commit` (a KB's first commit, a write beside a person's staged work: both asked gpg, and failed
with "gpg failed to sign the data" when it could not sign); with `log.showSignature` on, what
memory-agent reads from `git log` holds no gpg lines; a git command that waits for something
stops at its time limit, naming itself. The person's configuration (a real throwaway gpg key) is
the kb conftest's."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_agent.errors import GitError
from memory_agent.kb.gitrepo import KBRepo
from tests.memory_agent.kb.git_by_hand import git


@pytest.fixture
def locked_signer(tmp_path, person_git, monkeypatch) -> Path:
    """The person's configuration with a gpg that cannot sign (a locked key, no pinentry);
    the file it marks each time it is asked."""
    gpg = tmp_path / "locked-gpg"
    marks = tmp_path / "gpg-calls.log"
    gpg.write_text(
        f'#!/bin/sh\necho "$*" >> "{marks}"\necho "gpg: signing failed: No pinentry" >&2\nexit 2\n'
    )
    gpg.chmod(0o755)
    config = tmp_path / "gitconfig-locked"
    config.write_text(f"[include]\n\tpath = {person_git.config}\n[gpg]\n\tprogram = {gpg}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    marks.touch()
    return marks


def _entry(kb: Path, name: str) -> Path:
    path = kb / "note" / f"{name}.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f"---\nid: {name}\ntitle: {name}\ntype: note\nstatus: active\n"
        f"created: 2026-11-01T00:00:00Z\n---\nText of {name}.\n"
    )
    return path


def test_a_kb_is_made_and_written_while_the_signer_cannot_sign(tmp_path, locked_signer):
    kb = tmp_path / "kb"
    repo, created = KBRepo.init(kb)  # its first commit: `git commit --allow-empty`
    assert created and repo.head()
    first = repo.commit_paths([_entry(kb, "plumbing")], "by plumbing")
    assert first == repo.head()
    (kb / "staged-by-the-person.txt").write_text("work in progress\n")
    git(kb, "add", "staged-by-the-person.txt")  # someone's staged work: `git commit --only`
    second = repo.commit_paths([_entry(kb, "beside-staged-work")], "beside staged work")
    assert second != first and second == repo.head()
    assert git(kb, "diff", "--cached", "--name-only").split() == ["staged-by-the-person.txt"]
    assert locked_signer.read_text() == ""  # gpg was never asked to sign


def test_memory_agents_commits_are_unsigned_with_signing_on(tmp_path, person_git):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    (kb / "x.txt").write_text("x\n")
    git(kb, "add", "x.txt")
    repo.commit_paths([_entry(kb, "an-entry")], "an entry")
    for rev in ("HEAD", "HEAD^"):
        assert not person_git.signed(kb, rev)
    git(kb, "commit", "-qm", "the person's own commit")  # (theirs is signed, as they chose)
    assert person_git.signed(kb, "HEAD")


def test_what_memory_agent_reads_from_git_log_holds_no_gpg_lines(tmp_path, person_git):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    path = _entry(kb, "edited-by-hand")
    git(kb, "add", str(path))
    git(kb, "commit", "-qm", "a signed hand commit")
    assert person_git.signed(kb)
    assert "gpg:" in git(kb, "log", "-1", "--format=%H")  # as the person sees it
    head = repo.head()
    assert repo.last_commit_touching(path) == head  # (a redo's reply names this commit)
    assert repo.log("-1", "--format=%H").strip() == head


def test_a_git_command_that_waits_stops_at_its_time_limit(tmp_path):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    hook = tmp_path / "slow-fsmonitor"
    hook.write_text("#!/bin/sh\nsleep 5\n")
    hook.chmod(0o755)
    git(kb, "config", "core.fsmonitor", str(hook))
    with pytest.raises(GitError) as caught:
        repo.git("status", "--porcelain", timeout=1.0)
    assert "`git status`" in caught.value.message and "1 s" in caught.value.message
    assert f"git -C {kb} status" in caught.value.fix
