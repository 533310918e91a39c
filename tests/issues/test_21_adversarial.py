"""Issue 21: an adversarial pass over sync and the team KB. Real git repositories in tmp dirs
(a bare remote and KBs), a real `Syncer`; each test is the regression test of a defect found
(the round's contract: nothing lost, a clear error with its code and fix, no secret on disk,
in the output or on the remote, never a force-push)."""

import subprocess

import pytest

from tests.issues.test_21_gitindex import commit, head_of, kb_with_remote
from tests.issues.test_21_sync import pair  # noqa: F401 (a fixture)
from tests.issues.test_21_team import homes  # noqa: F401 (a fixture)
from tests.memory_agent.helpers import git

TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def note(kb, entry_id, body, folder="note"):
    (kb / folder).mkdir(exist_ok=True)
    (kb / folder / f"{entry_id}.md").write_text(
        f"---\nid: {entry_id}\ntitle: {entry_id}\ntype: {folder}\nstatus: active\n"
        f"created: 2026-11-01T00:00:00Z\n---\n{body}\n"
    )
    git(kb, "add", f"{folder}/{entry_id}.md")


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


@pytest.mark.parametrize(
    "url, shown_as",
    [
        (f"https://{TOKEN}@127.0.0.1:9/memory.git", "https://***@127.0.0.1:9/memory.git"),
        (f"https://{TOKEN}:x-oauth-basic@127.0.0.1:9/m.git", "https://***:***@127.0.0.1:9/m.git"),
        (f"https://me:p@ss{TOKEN}@127.0.0.1:9/m.git", "https://me:***@127.0.0.1:9/m.git"),
    ],
)
def test_a_token_in_any_part_of_the_remote_urls_userinfo_is_never_shown_or_stored(
    tmp_path, url, shown_as
):
    """GitHub's token-only form (`https://<token>@github.com/...`, no password) was printed by
    `remote set`, `remote`/`status` and stored in run/remote.json with every failed round:
    only `user:password@` was masked (and a password holding `@` kept its tail). Fails at
    the first `TOKEN not in` (the set reply)."""
    from memory_agent.kb.gitrepo import KBRepo
    from memory_agent.sync.remote import Syncer
    from memory_agent.sync.transport import RemoteUnreachable

    kb = tmp_path / "kb"
    KBRepo.init(kb)
    syncer = Syncer(kb, tmp_path / "run", None, refresh=lambda paths: None)
    set_ = syncer.set_url(url)  # nothing listens on port 9
    assert TOKEN not in set_["remote"] and set_["remote"] == shown_as
    with pytest.raises(RemoteUnreachable) as caught:
        syncer.run()
    assert TOKEN not in caught.value.message + caught.value.fix
    said = str(syncer.status()) + (tmp_path / "run" / "remote.json").read_text()
    assert TOKEN not in said and "ss" + TOKEN[:4] not in said
    assert syncer.url() == url  # git's config keeps it (credentials are git's business)


def test_a_user_name_without_a_password_in_an_ssh_url_is_shown():
    from memory_agent.sync.transport import shown

    assert shown("ssh://git@example.com/me/memory.git") == "ssh://git@example.com/me/memory.git"
    assert shown("git@example.com:me/memory.git") == "git@example.com:me/memory.git"
    assert shown("fatal: unable to access 'https://me:pw@h/x.git/': 403") == (
        "fatal: unable to access 'https://me:***@h/x.git/': 403"
    )


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


def two_kbs_on_branches(tmp_path, first: str, second: str):
    """Two machines' KBs made by `git init` under different `init.defaultBranch` settings
    (`main` on one, git's own `master` on the other), both with an entry of their own."""
    import threading

    from memory_agent.kb.gitrepo import KBRepo
    from memory_agent.sync.remote import Syncer

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    out = []
    for name, branch in (("a", first), ("b", second)):
        kb = tmp_path / name / "kb"
        kb.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", branch, str(kb)], check=True)
        KBRepo.init(kb)
        note(kb, f"from-{name}", f"Written on machine {name}.")
        commit(kb, f"from {name}")
        syncer = Syncer(kb, tmp_path / name / "run", threading.RLock(), refresh=lambda p: None)
        syncer.set_url(str(remote))
        out.append((kb, syncer))
    return remote, out


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


def twins(tmp_path, folder="note"):
    """Two KBs joined through one remote; `a` pushed `deploy-window` (in `folder`), `b` wrote
    its own `note/deploy-window` (added, not committed): b's next round replays a twin."""
    _, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    note(kb_a, "deploy-window", "Deploys happen on Tuesdays (a).", folder=folder)
    commit(kb_a, "deploy-window on a")
    a.run()
    note(kb_b, "deploy-window", "Thursdays (b): the deploy window is Thursday 14:00.")
    return kb_b, b


def test_the_same_new_id_in_two_type_folders_is_kept_twice_under_two_ids(tmp_path):
    """One machine wrote `fact/deploy-window.md`, the other `note/deploy-window.md` (the same
    title, another type): the replay kept both files under one id, so the scan served one
    and reported the other as a duplicate. Fails at `renamed` (empty) and at the file list."""
    kb_b, b = twins(tmp_path, folder="fact")
    (kb_b / "note" / "on-deploys.md").write_text(
        "---\nid: on-deploys\ntitle: On deploys\ntype: note\nstatus: active\n"
        "created: 2026-11-01T00:00:00Z\n---\nSee [[deploy-window]].\n"
    )
    git(kb_b, "add", "note")
    commit(kb_b, "note")
    report = b.run()
    assert report["renamed"] == [{"id": "deploy-window", "replayed_as": "deploy-window-2"}]
    entries = sorted(str(p.relative_to(kb_b)) for p in kb_b.glob("*/*.md"))
    assert entries == [
        "fact/deploy-window.md",
        "note/deploy-window-2.md",
        "note/from-a.md",
        "note/from-b.md",
        "note/on-deploys.md",
    ]
    moved = (kb_b / "note" / "deploy-window-2.md").read_text()
    assert "id: deploy-window-2" in moved and "Thursday 14:00" in moved
    assert "[[deploy-window-2]]" in (kb_b / "note" / "on-deploys.md").read_text()
    assert "Tuesdays" in (kb_b / "fact" / "deploy-window.md").read_text()  # upstream's stays


def test_a_folder_upstream_made_a_symbolic_link_is_never_written_through(tmp_path):
    """Upstream turned a type folder into a symbolic link (`fact -> <a folder elsewhere>`):
    the replay of this machine's commits wrote its entries through it, outside the KB, read
    what was there as upstream's version, then failed on `git add` naming a temporary folder
    - at every round. Fails at the folder outside (it gains `newfact.md`) and the error."""
    import os

    from memory_agent.errors import Invalid

    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()  # both on one history: a's link is pushed as it is, not replayed
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.md").write_text("not the KB's\n")
    os.symlink(str(outside), kb_a / "fact")
    git(kb_a, "add", "fact")
    commit(kb_a, "a folder that is a link")
    a.run()
    note(kb_b, "keep", "This side's fact.", folder="fact")
    note(kb_b, "newfact", "Another fact of this side.", folder="fact")
    commit(kb_b, "facts")
    head = head_of(kb_b)
    with pytest.raises(Invalid) as caught:
        b.run()
    assert sorted(os.listdir(outside)) == ["keep.md"]
    assert (outside / "keep.md").read_text() == "not the KB's\n"
    assert "kb/fact is a symbolic link" in caught.value.message
    assert "nothing was pulled or pushed" in caught.value.message
    assert "git rm fact" in caught.value.fix
    assert head_of(kb_b) == head and (kb_b / "fact" / "newfact.md").is_file()  # nothing lost
    assert b.status()["last_error"]["code"] == "invalid"


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


def test_an_uncommitted_edit_in_the_way_of_a_pull_is_named_with_its_fix(tmp_path):
    """A person's uncommitted edit of a file upstream changed: `git reset --keep` refuses (the
    edit is kept), but the round failed as `git` with "run the command by hand", and each
    blocked round (the daemon's, every interval) left one more rescue ref. Fails at the
    code (`git`, not `conflict`)."""
    from memory_agent.errors import Conflict

    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()
    path_a, path_b = kb_a / "note" / "from-a.md", kb_b / "note" / "from-a.md"
    path_a.write_text(path_a.read_text() + "A line added on a.\n")
    git(kb_a, "add", "-A")
    commit(kb_a, "edit on a")
    a.run()
    path_b.write_text(path_b.read_text() + "An edit on b, not committed yet.\n")
    head = head_of(kb_b)
    rescues = git(kb_b, "for-each-ref", "refs/memory-agent/rescue/")
    for _ in range(2):
        with pytest.raises(Conflict) as caught:
            b.run()
    assert "note/from-a.md" in caught.value.message and "uncommitted" in caught.value.message
    assert f"git -C {kb_b} stash" in caught.value.fix
    assert head_of(kb_b) == head and "not committed yet" in path_b.read_text()  # kept
    assert git(kb_b, "for-each-ref", "refs/memory-agent/rescue/") == rescues
    git(kb_b, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam", "b's edit")
    b.run()  # the fix works: both edits are in the KB (the text edits of one entry: a variant)
    assert "A line added on a." in path_b.read_text()


def test_a_file_with_a_non_ascii_name_survives_the_replay(tmp_path):
    """A file named by hand `note/café.md` in an unpushed commit: git quotes such a path in
    `diff-tree` (`"note/caf\\303\\251.md"`), the replay read no such file, took it for a
    deletion and dropped it - the move then removed it from the KB and it was never pushed
    (only the rescue ref still held it). Fails at the file list."""
    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    for name, entry_id in (("café.md", "cafe"), ("会议.md", "meeting"), ("my notes.md", "my")):
        (kb_b / "note" / name).write_text(
            f"---\nid: {entry_id}\ntitle: {entry_id}\ntype: note\nstatus: active\n"
            f"created: 2026-11-01T00:00:00Z\n---\nWritten by hand: {name}.\n"
        )
    git(kb_b, "add", "-A")
    commit(kb_b, "files named by hand")
    assert b.run()["replayed"] == 2  # (b's first entry, then these)
    names = ["café.md", "from-a.md", "from-b.md", "my notes.md", "会议.md"]
    assert sorted(p.name for p in (kb_b / "note").iterdir()) == names
    published = git(remote, "-c", "core.quotePath=false", "ls-tree", "-r", "--name-only", "main")
    assert sorted(n.split("/")[1] for n in published.split("\n") if n) == names
    assert "Written by hand: café.md." in (kb_b / "note" / "café.md").read_text()


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


def test_a_team_clone_deleted_by_hand_leaves_status_and_the_other_kbs_sync_working(homes):  # noqa: F811
    """`rm -rf <home>/kbs/team` (instead of `kb remove`): `memory-agent status`, `remote` and
    `sync` all failed as `git` ("... is not a git repository", fix "run `memory-agent init`"),
    so no KB of the home synced any more. Fails at the status call (exit 2)."""
    import shutil

    a, _, remote = homes
    personal_remote = remote.parent / "personal.git"
    subprocess.run(["git", "init", "-q", "--bare", str(personal_remote)], check=True)
    a.cli("remote", "set", str(personal_remote))
    a.cli("kb", "add", "team", str(remote))
    a.add_to("team", "A team entry", "Some team text for the test.")
    a.sync()
    shutil.rmtree(a.team)
    _, status = a.cli("status")
    team = status["remote"]["kbs"][0]
    assert team["kb"] == "team" and team["error"]["code"] == "not_found"
    assert "memory-agent kb remove team" in team["error"]["fix"]
    mine = a.add("Written after the clone went", "A personal entry the round still pushes.")
    err = a.error("sync")  # the personal round runs; the command fails naming the team KB
    assert err["code"] == "not_found" and "kb team" in err["message"]
    assert mine in git(personal_remote, "log", "--all", "--format=%s")
    assert a.error("sync", "--kb", "team")["code"] == "not_found"
    _, removed = a.cli("kb", "remove", "team")  # the fix works
    assert removed["removed"] is True
    assert a.cli("sync")[0] == 0


def test_kb_remove_of_a_read_only_kb_with_a_commit_by_hand_names_a_fix_that_works(tmp_path):
    """A read-only KB holding a commit made by hand: `kb remove` refused naming `memory-agent
    sync --kb NAME` "to push them" - but a read-only KB's round never pushes, so the fix
    never worked and the KB could not be removed. Fails at the fix's text."""
    from memory_agent.errors import Conflict
    from memory_agent.kb.kbs import Registry
    from memory_agent.sync.clones import add_kb, remove_kb

    kb, remote, syncer = kb_with_remote(tmp_path)
    registry = Registry(tmp_path / "home")
    registry.home.mkdir()
    place = add_kb(registry, "handbook", str(remote), writable=False)
    note(place.dir, "by-hand", "Written in the read-only clone by hand.")
    commit(place.dir, "by hand")
    with pytest.raises(Conflict) as caught:
        remove_kb(registry, "handbook")
    fix = caught.value.fix
    assert "sync --kb handbook` to push" not in fix and "read-only" in caught.value.message
    branch = git(place.dir, "rev-parse", "--abbrev-ref", "HEAD").strip()
    keep = f"git -C {place.dir} branch kept-by-hand"
    back = f"git -C {place.dir} reset --keep origin/{branch}"
    assert keep in fix and back in fix
    for command in (keep, back):
        subprocess.run(command, shell=True, check=True)
    moved = remove_kb(registry, "handbook")["moved_to"]  # the fix works, and nothing is lost
    assert git(moved, "log", "-1", "--format=%s", "kept-by-hand").strip() == "by hand"


def test_a_relative_path_as_url_is_the_one_the_person_typed(pair):  # noqa: F811
    """`memory-agent remote set ../backup.git` (the README: "a path works too"), typed in the
    folder the path is relative to: the daemon stored it as it was, and git read it relative
    to the KB (`kb add` to the daemon's own folder) - the first sync failed "does not appear
    to be a git repository". Fails at the `remote` of the reply (`../remote.git`)."""
    import json
    import sys

    a, _, remote = pair
    work = remote.parent / "work"
    work.mkdir()
    relative = f"../{remote.name}"

    def cli(*args):
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(a.path), "--json"],
            capture_output=True,
            text=True,
            env=a.env,
            timeout=300,
            cwd=work,
        )
        return proc.returncode, json.loads(proc.stdout)

    code, reply = cli("remote", "set", relative)
    assert code == 0 and reply["remote"] == str(remote), reply
    a.add("Pushed through a relative path", "The remote was named by a relative path.")
    code, reply = cli("sync")
    assert code == 0 and reply["pushed"] >= 1, reply
    team = remote.parent / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(team)], check=True)
    code, reply = cli("kb", "add", "team", "../team.git")
    assert code == 0 and reply["remote"] == str(team), reply


def test_an_entry_moved_to_another_type_folder_by_hand_is_replayed_as_a_move(tmp_path):
    """`git mv note/x.md fact/x.md` in an unpushed commit: replayed file by file in git's
    order, the new `fact/x.md` met `note/x.md` still in upstream's tree and was taken for a
    twin of another folder (and, its `type` now another, kept as a variant) - then the
    deletion removed `note/x.md`: the entry left the served KB. Fails at the file list."""
    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()
    note(kb_a, "other", "Upstream moves on meanwhile.")
    commit(kb_a, "other")
    a.run()
    (kb_b / "fact").mkdir()
    git(kb_b, "mv", "note/from-a.md", "fact/from-a.md")
    commit(kb_b, "from-a is a fact")
    report = b.run()
    assert report["renamed"] == [] and report["variants"] == []
    entries = sorted(str(p.relative_to(kb_b)) for p in kb_b.glob("*/*.md"))
    assert entries == ["fact/from-a.md", "note/from-b.md", "note/other.md"]


def test_both_sides_superseding_into_the_same_new_id_is_a_fork_in_any_file_order(tmp_path):
    """Both machines superseded `deploy-window` by an entry titled alike (`deploy-windows`):
    the replay met the old entry's file before the successor's (`deploy-window.md` sorts
    first), merged its `superseded_by` before the successor was renamed, and left
    `deploy-windows-2` active, claiming to supersede it, with no fork listed. Fails at
    `superseded_by`."""

    def supersede(kb, body):
        old = kb / "note" / "deploy-window.md"
        old.write_text(
            old.read_text().replace(
                "status: active\n",
                "status: superseded\n"
                "superseded_by: deploy-windows\nsuperseded_at: 2026-11-02T00:00:00Z\n",
            )
        )
        note(kb, "deploy-windows", body)
        new = kb / "note" / "deploy-windows.md"
        new.write_text(
            new.read_text().replace("---\n" + body, "supersedes: [deploy-window]\n---\n" + body)
        )
        git(kb, "add", "-A")
        commit(kb, "supersede deploy-window")

    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    note(kb_a, "deploy-window", "Deploys on Tuesday.")
    commit(kb_a, "deploy-window")
    a.run()
    b.run()
    supersede(kb_a, "Deploys on Tuesday and Thursday.")
    a.run()
    supersede(kb_b, "Deploys on Wednesday only.")
    report = b.run()
    assert report["renamed"] == [{"id": "deploy-windows", "replayed_as": "deploy-windows-2"}]
    old = (kb_b / "note" / "deploy-window.md").read_text()
    assert "superseded_by: [deploy-windows, deploy-windows-2]\n" in old
    assert report["forks"] == [
        {"id": "deploy-window", "successors": ["deploy-windows", "deploy-windows-2"]}
    ]
    assert b.status()["forks"] == report["forks"]


def test_a_file_added_with_a_twin_in_one_commit_links_to_the_twins_new_id(tmp_path):
    """This machine's one commit adds `deploy-window` (a twin of upstream's: renamed
    `deploy-window-2`) and `checklist`, which links to it: `checklist.md` sorts first, was
    written before the rename, and kept linking to upstream's `deploy-window` - another
    entry. Fails at the links of `checklist`."""
    kb_b, b = twins(tmp_path)
    (kb_b / "note" / "checklist.md").write_text(
        "---\nid: checklist\ntitle: Checklist\ntype: note\nstatus: active\n"
        "created: 2026-11-01T00:00:00Z\nlinks:\n  references: [deploy-window]\n---\n"
        "See [[deploy-window]]: Thursdays.\n"
    )
    git(kb_b, "add", "-A")
    commit(kb_b, "deploy-window and its checklist, one commit")
    report = b.run()
    assert report["renamed"] == [{"id": "deploy-window", "replayed_as": "deploy-window-2"}]
    checklist = (kb_b / "note" / "checklist.md").read_text()
    assert "references: [deploy-window-2]" in checklist
    assert "[[deploy-window-2]]" in checklist
    assert "Tuesdays (a)" in (kb_b / "note" / "deploy-window.md").read_text()
    assert "Thursdays (b)" in (kb_b / "note" / "deploy-window-2.md").read_text()


def test_a_kb_with_a_file_of_its_own_but_no_entry_is_replayed_not_replaced(tmp_path, monkeypatch):
    """A fresh KB where the person committed a file that is not an entry (a README, a
    `.gitignore`) before its first sync: it counted as "only what init wrote", took the
    remote's history, and the file left the KB (only a rescue ref held it; the report said
    `joined`). Fails at the README."""
    import threading

    from memory_agent.kb.gitrepo import KBRepo
    from memory_agent.sync.remote import Syncer

    kb_a, remote, a = kb_with_remote(tmp_path)
    note(kb_a, "from-a", "An entry on the remote.")
    commit(kb_a, "from-a")
    a.run()
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")  # another init commit
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
    kb = tmp_path / "b" / "kb"
    KBRepo.init(kb)
    monkeypatch.delenv("GIT_AUTHOR_DATE")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    (kb / "README").write_text("What this KB is for, written by hand.\n")
    git(kb, "add", "README")
    commit(kb, "a README")
    b = Syncer(kb, tmp_path / "b" / "run", threading.RLock(), refresh=lambda paths: None)
    b.set_url(str(remote))
    report = b.run()
    assert (kb / "README").read_text() == "What this KB is for, written by hand.\n"
    assert (kb / "note" / "from-a.md").is_file() and not report["joined"]
    assert "README" in git(remote, "ls-tree", "--name-only", b.branch())
