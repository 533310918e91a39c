"""A remote that lacks the KB's branch, or another remote: one without this KB's branch is refused
(not given a second branch), a branch renamed on the remote is not recreated under its old name, a
move to a new empty remote pushes everything, and a move to a remote with another history joins it.
Real git repositories in tmp dirs, a real `Syncer`. (Issue 21; each test pins a defect the
adversarial pass found.)"""

import subprocess

import pytest

from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.remotes import kb_with_remote, note, two_kbs_on_branches


def test_a_remote_without_this_kbs_branch_is_refused_not_given_a_second_branch(tmp_path):
    """One machine's git made `main`, the other's `master`: each round pushed its own branch,
    both said ahead 0 / behind 0, and the two machines never saw each other's entries.
    Fails at the `pytest.raises` (the second machine's round pushed `master`)."""
    from memory_agent.errors import Conflict

    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "master")
    a.run()
    with pytest.raises(Conflict) as caught:
        b.run()
    assert "has no branch master" in caught.value.message and "main" in caught.value.message
    assert git(remote, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    # the fix it names works, and both machines then hold both entries
    fix = caught.value.fix
    assert f"git -C {kb_b} branch -m master main" in fix
    assert f"git -C {kb_b} config memory-agent.branch main" in fix
    git(kb_b, "branch", "-m", "master", "main")
    git(kb_b, "config", "memory-agent.branch", "main")
    assert b.run()["replayed"] == 1
    a.run()
    for kb in (kb_a, kb_b):
        assert (kb / "note" / "from-a.md").exists() and (kb / "note" / "from-b.md").exists()


def test_a_branch_renamed_on_the_remote_is_not_recreated_under_its_old_name(tmp_path):
    """Someone renamed the shared branch on the remote (`master` -> `trunk`): the next round
    found `master` missing, took the remote for an empty one and pushed `master` again -
    from then on the team's machines wrote to two branches. Fails at the `pytest.raises`."""
    from memory_agent.errors import Conflict

    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "master", "master")
    a.run()
    b.run()
    git(remote, "branch", "-m", "master", "trunk")
    git(remote, "symbolic-ref", "HEAD", "refs/heads/trunk")
    note(kb_b, "later", "Written after the rename.")
    commit(kb_b, "later")
    head = head_of(kb_b)
    with pytest.raises(Conflict) as caught:
        b.run()
    assert "master" in caught.value.message and "trunk" in caught.value.message
    assert git(remote, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/trunk"]
    assert head_of(kb_b) == head  # nothing moved, nothing lost


def test_moving_to_a_new_empty_remote_pushes_everything(tmp_path):
    """`remote set NEW_URL` (a move to another server), the new repository empty: the round
    compared with the old remote's tracking branch, found nothing ahead, pushed nothing and
    said ahead 0 / behind 0 - a machine joining the new remote got an empty KB. Fails at
    `pushed` (0) and at the new remote's refs."""
    kb, remote, syncer = kb_with_remote(tmp_path)
    note(kb, "one", "An entry pushed to the old remote.")
    commit(kb, "one")
    syncer.run()
    new = tmp_path / "new.git"
    subprocess.run(["git", "init", "-q", "--bare", str(new)], check=True)
    syncer.set_url(str(new))
    assert syncer.run()["pushed"] == 2  # init's commit and the entry
    branch = syncer.branch()
    assert git(new, "rev-parse", f"refs/heads/{branch}").strip() == head_of(kb)
    status = syncer.status()
    assert (status["ahead"], status["behind"]) == (0, 0)


def test_moving_to_a_remote_with_another_history_joins_it_not_a_rewrite_stop(tmp_path):
    """`remote set` to another repository that holds entries of its own: the first round took
    it for the old remote rewritten ("find out who rewrote it") and stopped sync until a
    person deleted a ref by hand. It now joins it as any first sync does. Fails at the round
    (`UpstreamRewritten`)."""
    kb, remote, syncer = kb_with_remote(tmp_path)
    note(kb, "mine", "An entry of this machine.")
    commit(kb, "mine")
    syncer.run()
    other_remote, [(other_kb, other), _] = two_kbs_on_branches(tmp_path / "o", "main", "main")
    other.run()
    git(kb, "branch", "-m", syncer.branch(), "main")
    git(kb, "config", "memory-agent.branch", "main")
    syncer.set_url(str(other_remote))
    report = syncer.run()
    assert report["replayed"] >= 1 and report["pushed"] >= 1
    assert (kb / "note" / "from-a.md").is_file() and (kb / "note" / "mine.md").is_file()
    # setting the same URL again keeps the guard against a rewritten upstream
    synced = git(kb, "rev-parse", "refs/memory-agent/synced").strip()
    syncer.set_url(str(other_remote))
    assert git(kb, "rev-parse", "refs/memory-agent/synced").strip() == synced
