"""The replay under git as a person has it (issue 33, item 1): with `commit.gpgSign` on, the
replay's own commits are not signed, so a signer that cannot sign (a locked key, a card to
touch, no pinentry for a daemon) no longer fails every round with "gpg failed to sign the data"
and advice ("run sync again") that cannot help; with `log.showSignature` on, a signed hand
commit is replayed with its own message and author, not gpg's lines. memory-agent never signs
(docs/adr/0021-memory-agent-never-signs.md). The person's configuration (a real throwaway gpg
key) is the sync conftest's; real git repositories and real `Syncer`s."""

from __future__ import annotations

from pathlib import Path

from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.remotes import note, two_kbs_on_branches


def _diverged(tmp_path):
    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()
    note(kb_a, "from-a-later", "Pushed by a while b worked.")
    commit(kb_a, "a later")
    a.run()
    note(kb_b, "from-b-later", "b's own entry, committed and signed by hand.")
    commit(kb_b, "b's signed hand commit\n\nWith a body line.")
    return kb_a, a, kb_b, b


def _signer_that_fails(tmp_path: Path, person_git, monkeypatch) -> Path:
    """The person's configuration with a gpg that cannot sign (as with a locked key), asked
    for commits and pushes alike."""
    gpg = tmp_path / "locked-gpg"
    marks = tmp_path / "gpg-calls.log"
    gpg.write_text(
        f'#!/bin/sh\necho "$*" >> "{marks}"\necho "gpg: signing failed: No pinentry" >&2\nexit 2\n'
    )
    gpg.chmod(0o755)
    config = tmp_path / "gitconfig-locked"
    config.write_text(
        f"[include]\n\tpath = {person_git.config}\n[gpg]\n\tprogram = {gpg}\n"
        "[push]\n\tgpgSign = true\n"  # (a push certificate: signed by gpg as well)
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    marks.touch()
    return marks


def test_a_round_replays_while_the_persons_signer_cannot_sign(tmp_path, person_git, monkeypatch):
    kb_a, a, kb_b, b = _diverged(tmp_path)  # (b's hand commit signed with the person's key)
    assert person_git.signed(kb_b)
    marks = _signer_that_fails(tmp_path, person_git, monkeypatch)
    report = b.run()
    assert report["replayed"] == 1
    a.run()
    assert head_of(kb_a) == head_of(kb_b)
    assert (kb_a / "note/from-b-later.md").is_file()
    assert marks.read_text() == ""  # nothing memory-agent ran asked gpg to sign


def test_a_signed_hand_commit_is_replayed_with_its_message_and_author(tmp_path, person_git):
    kb_a, a, kb_b, b = _diverged(tmp_path)
    assert person_git.signed(kb_b)
    b.run()
    replayed = head_of(kb_b)
    message = git(kb_b, "--no-pager", "log", "-1", "--no-show-signature", "--format=%B")
    assert message.strip() == "b's signed hand commit\n\nWith a body line."
    who = git(kb_b, "log", "-1", "--no-show-signature", "--format=%an <%ae>").strip()
    assert who == "p <p@x>"
    assert not person_git.signed(kb_b, replayed)  # memory-agent's commit: never signed
    assert git(kb_b, "log", "-1", "--format=%s", "HEAD^", "--no-show-signature").strip() == (
        "a later"
    )
