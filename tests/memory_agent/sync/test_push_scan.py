"""What a round may publish: the commits to push scanned for secrets - in a file, in a file that was
a symbolic link, in a commit message - with one git process for every blob, and a secret refused
with the way out; no round while a rebase is in progress or HEAD is detached. (Issue 21; the
adversarial pass's tests each pin a defect found.)

(`pair`, two homes and a bare remote, is the memory_agent conftest's.)"""

import hashlib
import subprocess

import pytest

from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.remotes import TOKEN, kb_with_remote, log_git_calls, note


def test_a_secret_is_never_pushed(pair):
    a, b, remote = pair
    a.cli("remote", "set", str(remote))
    a.sync()
    path = a.kb / "note" / "leak.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "---\nid: leak\ntitle: Leak\ntype: note\nstatus: active\n"
        "created: 2026-11-01T00:00:00Z\n---\n"
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
    )
    git(a.kb, "add", "note/leak.md")
    git(a.kb, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "oops")
    code, err = a.sync(check=False)
    assert code != 0 and "kb/note/leak.md" in err["error"]["message"]
    assert "ghp_" not in git(remote, "log", "--all", "-p")


def test_a_secret_in_a_commit_message_is_never_pushed(tmp_path):
    """A token pasted into a commit message (a commit by hand) was pushed: only the files were
    scanned. Fails at the `pytest.raises` (the round pushed) and at the remote's log."""
    from memory_agent.sync.publish import SecretFound

    kb, remote, syncer = kb_with_remote(tmp_path)
    since = head_of(kb)
    note(kb, "rotated", "The deploy token was rotated on Monday.")
    commit(kb, f"rotate the deploy token (new one: {TOKEN})")
    with pytest.raises(SecretFound) as caught:
        syncer.run()
    assert f"the message of commit {head_of(kb)[:12]}" in caught.value.message
    assert TOKEN not in caught.value.message + caught.value.fix  # the error does not repeat it
    assert f"rebase -i {since[:12]}" in caught.value.fix and "reword" in caught.value.fix
    assert TOKEN not in git(remote, "log", "--all", "--format=%B")
    assert TOKEN not in (tmp_path / "run" / "remote.json").read_text()


def test_a_round_during_a_rebase_pushes_nothing_and_names_it(tmp_path):
    """A person mid `git rebase -i` (dropping a commit they do not want published): the round
    found the branch ahead and pushed the very commits being rewritten - after which dropping
    them here publishes nothing less. Fails at the `pytest.raises` (the round pushed 2)."""
    import os

    from memory_agent.errors import RepoBusy

    kb, remote, syncer = kb_with_remote(tmp_path)
    published = git(remote, "rev-parse", "HEAD").strip()
    note(kb, "kept", "A note to keep.")
    commit(kb, "kept")
    note(kb, "private", "A note its writer is taking out before it is published.")
    commit(kb, "private")
    head = head_of(kb)
    env = dict(os.environ, GIT_SEQUENCE_EDITOR="sed -i -e '2s/^pick/edit/'")
    subprocess.run(
        [
            "git",
            "-C",
            str(kb),
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "rebase",
            "-q",
            "-i",
            "HEAD~2",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    with pytest.raises(RepoBusy) as caught:
        syncer.run()
    assert "in the middle of a rebase" in caught.value.message
    assert "nothing pulled or pushed" in caught.value.message
    assert "git rebase --continue` or `git rebase --abort" in caught.value.fix
    assert git(remote, "rev-parse", "HEAD").strip() == published  # nothing went out
    assert syncer.status()["last_error"]["code"] == "conflict"
    subprocess.run(["git", "-C", str(kb), "rebase", "--abort"], check=True)
    assert head_of(kb) == head  # nothing lost; the next round pushes
    assert syncer.run()["pushed"] == 2


def test_a_round_on_a_detached_head_refuses_naming_it(tmp_path):
    from memory_agent.errors import RepoBusy

    kb, remote, syncer = kb_with_remote(tmp_path)
    note(kb, "one", "The first note.")
    commit(kb, "one")
    git(kb, "checkout", "-q", "--detach", "HEAD")
    with pytest.raises(RepoBusy) as caught:
        syncer.run()
    assert "detached HEAD" in caught.value.message and "checkout" in caught.value.fix


def test_a_secret_in_a_file_that_was_a_symbolic_link_is_never_pushed(tmp_path):
    """An entry file that was a link, replaced by a real file holding a token: git calls that
    a type change (`T`), which the scan's `--diff-filter=AM` left out, and the token was
    pushed. Fails at the `pytest.raises`."""
    import os

    from memory_agent.sync.publish import SecretFound

    kb, remote, syncer = kb_with_remote(tmp_path)
    (kb / "note").mkdir()
    os.symlink("elsewhere.md", kb / "note" / "x.md")
    git(kb, "add", "note/x.md")
    commit(kb, "a link")
    syncer.run()
    (kb / "note" / "x.md").unlink()
    (kb / "note" / "x.md").write_text(f"---\nid: x\n---\nthe token {TOKEN}\n")
    git(kb, "add", "note/x.md")
    commit(kb, "the link made a file")
    with pytest.raises(SecretFound) as caught:
        syncer.run()
    assert "kb/note/x.md holds what looks like a secret" in caught.value.message
    assert TOKEN not in git(remote, "log", "--all", "-p")


def test_the_secret_scan_reads_every_blob_with_one_git_process(tmp_path, monkeypatch):
    import pytest

    from memory_agent.sync.publish import SecretFound

    kb, remote, syncer = kb_with_remote(tmp_path)
    since = head_of(kb)
    (kb / "note").mkdir()
    secrets = {}
    for i in range(12):
        name = f"note/n{i}.md"
        token = f"ghp_{'abcdefghijklmnopqrstuvwxyz0123456789'[i:]}{'x' * i}" if i in (4, 9) else ""
        (kb / name).write_text(f"---\nid: n{i}\n---\nentry {i} {token}\n")
        git(kb, "add", name)
        commit(kb, f"entry {i}")
        if token:
            secrets[i] = head_of(kb)
    calls = log_git_calls(tmp_path, monkeypatch)
    with pytest.raises(SecretFound) as caught:
        syncer.run()
    logged = calls.read_text().splitlines()
    assert [c for c in logged if " show " in f" {c} "] == []
    assert sum("cat-file --batch" in c for c in logged) == 1
    # the newest commit holding a secret is named, with the line, the finding's fingerprint
    # (never the value) and both ways out
    newest = secrets[9]
    fp = (
        "github-token:"
        + hashlib.sha256(b"ghp_jklmnopqrstuvwxyz0123456789xxxxxxxxx").hexdigest()[:16]
    )
    assert caught.value.message == (
        f"kb/note/n9.md holds what looks like a secret at line 4 (github-token; fingerprint "
        f"{fp}; commit {newest[:12]}); nothing was pushed"
    )
    assert caught.value.fix == (
        "if it is a secret, take it out of the unpushed commits (README 'Two machines and a "
        f"team', 'A secret in a commit'): `git -C {kb} branch rescue-secret HEAD`, then `git -C "
        f"{kb} rebase -i {since[:12]}` and edit commit {newest[:12]} (writes wait while the "
        "rebase runs), then `memory-agent sync`; if it is not a secret, release it: "
        f"`memory-agent secrets allow {fp} --reason '...'` (a commit of kb/.memory-agent-allow, "
        "pushed with the rest), then `memory-agent sync`"
    )
    assert "ghp_" not in git(remote, "log", "--all", "-p")
