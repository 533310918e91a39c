"""The replay: this machine's unpushed commits replayed on upstream, the files merged by meaning -
the same id on both sides (or in two type folders) kept twice with the links following, supersedes
on both sides a fork in any file order, hand edits on both sides upstream's text plus a variant, a
folder upstream made a symbolic link never written through, file names that are not ASCII, an entry
moved to another type folder by hand. Real git repositories in tmp dirs (a bare remote and KBs), a
real `Syncer`, or two homes with real daemons. (Issue 21; the adversarial pass's tests each pin a
defect found.)

(`pair`, two homes and a bare remote, is the memory_agent conftest's.)"""

import re

import pytest

from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.remotes import join_both, note, same_and_clean, two_kbs_on_branches


def test_the_same_id_on_both_sides_is_kept_twice_and_links_follow(pair):
    a, b, remote = pair
    join_both(a, b, remote)
    a_id = a.add("Deploy window", "Deploys happen on Tuesdays.")
    b_id = b.add("Deploy window", "Deploys happen on Thursdays after the freeze.")
    assert a_id == b_id == "deploy-window"
    b.add("Freeze calendar", "See [[deploy-window]] for the day; the freeze is in December.")
    a.sync()
    _, report = b.sync()
    assert report["renamed"] == [{"id": "deploy-window", "replayed_as": "deploy-window-2"}]
    a.sync()
    same_and_clean(a, b)
    files = a.files()
    assert "Tuesdays" in files["note/deploy-window.md"]
    assert "Thursdays" in files["note/deploy-window-2.md"]
    assert "id: deploy-window-2\n" in files["note/deploy-window-2.md"]
    assert "[[deploy-window-2]]" in files["note/freeze-calendar.md"]


def test_supersede_on_both_sides_is_a_fork_and_supersede_archive_ends_superseded(pair):
    a, b, remote = pair
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    shared = a.add("Staging database host", "Staging runs on db-stg-1.")
    other = a.add("Backup schedule", "Backups run at 02:00.")
    a.sync()
    b.sync()
    a.cli(
        "supersede",
        shared,
        "--title",
        "Staging database host",
        "--body",
        "Staging moved to db-stg-2.",
        "--confirm",
    )
    b.cli(
        "supersede",
        shared,
        "--title",
        "Staging database host (new)",
        "--body",
        "Staging runs on db-stg-3 since the migration.",
        "--confirm",
    )
    a.cli(
        "supersede",
        other,
        "--title",
        "Backup schedule",
        "--body",
        "Backups run at 03:00.",
        "--confirm",
    )
    b.cli("archive", other, "--reason", "backups moved to the provider", "--confirm")
    a.sync()
    _, report = b.sync()
    a.sync()
    same_and_clean(a, b)
    assert [f["id"] for f in report["forks"]] == [shared]
    old = a.files()[f"note/{shared}.md"]
    assert "status: superseded" in old and re.search(r"superseded_by: \[.+, .+\]", old)
    _, got = a.cli("get", shared)
    assert isinstance(got["superseded_by"], list) and len(got["superseded_by"]) == 2
    for successor in got["superseded_by"]:
        assert a.cli("get", successor)[1]["status"] == "active"
    backup = a.files()[f"note/{other}.md"]
    assert "status: superseded" in backup and "archive_reason: backups moved" in backup
    _, status = a.cli("remote")
    assert any(f["id"] == shared for f in status["forks"])
    # the browser's overview shows the remote, the last sync, ahead/behind and the fork
    from tests.memory_agent.ui_server import UI, request

    ui = UI(a.path, a.cache)
    try:
        _, _, page = request(ui.base + "/", headers={"Cookie": f"memory_agent_ui={ui.token}"})
    finally:
        assert ui.stop() == 0
    card = page.split('id="sync"', 1)[1].split('<div class="card">', 1)[0]
    assert str(remote) in card and "Last sync" in card and "never" not in card
    assert re.search(r"Ahead / behind</dt><dd>0 / 0", card), card
    assert f">{shared}</a> is superseded by" in card
    assert all(s in card for s in got["superseded_by"])


def test_hand_edits_on_both_sides_keep_upstream_and_a_variant(pair):
    a, b, remote = pair
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    entry = a.add("Release checklist", "1. tag\n2. build\n3. publish")
    a.sync()
    b.sync()
    for home, text in (
        (a, "1. tag\n2. build\n3. publish\n4. announce"),
        (b, "1. tag\n2. test\n3. build\n4. publish"),
    ):
        path = home.kb / "note" / f"{entry}.md"
        path.write_text(path.read_text().replace("1. tag\n2. build\n3. publish", text))
        git(home.kb, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam", "hand edit")
    a.sync()
    _, report = b.sync()
    a.sync()
    same_and_clean(a, b)
    files = a.files()
    assert "4. announce" in files[f"note/{entry}.md"]  # upstream's text stays in place
    [variant] = report["variants"]
    assert "2. test" in files[variant["variant"]] and variant["variant"].startswith("variants/")
    _, status = a.cli("status")
    assert status["consistent"]  # a variant is reported, not served, and breaks nothing


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


def test_a_flat_sides_commits_replay_onto_a_fanned_out_upstream(pair):
    from memory_agent.kb.entries import shard

    a, b, remote = pair
    join_both(a, b, remote)
    a.cli("kb", "fanout", "--confirm")  # a fans out; b has not pulled it
    a.add("Deploy window", "Deploys happen on Tuesdays.")
    b.add("Deploy window", "Deploys happen on Thursdays after the freeze.")
    b.add("Freeze calendar", "See [[deploy-window]] for the day; the freeze is in December.")
    a.sync()
    _, report = b.sync()  # b's flat files go on top of a's moves: the twin is seen in its place
    assert report["renamed"] == [{"id": "deploy-window", "replayed_as": "deploy-window-2"}]
    a.sync()
    same_and_clean(a, b)
    files = a.files()
    assert "Tuesdays" in files[f"note/{shard('deploy-window')}/deploy-window.md"]
    assert "Thursdays" in files["note/deploy-window-2.md"]  # b's layout, read in any layout
    assert "[[deploy-window-2]]" in files["note/freeze-calendar.md"]
    later = b.add("Release train", "The release train leaves on Thursdays.")
    assert f"note/{shard(later)}/{later}.md" in b.files()  # b writes fanned out once it pulled


def test_a_flat_sides_archive_of_an_entry_a_fan_out_moved_changes_the_moved_file(pair):
    from memory_agent.kb.entries import shard

    a, b, remote = pair
    join_both(a, b, remote)
    old = a.add("Backup schedule", "Backups run at 02:00.")
    a.add("Deploy window", "Deploys happen on Tuesdays.")
    a.sync()
    b.sync()
    a.cli("kb", "fanout", "--confirm")
    a.sync()  # upstream is fanned out; b has not pulled it
    b.cli("archive", old, "--reason", "backups moved to the provider", "--confirm")
    b.sync()
    a.sync()
    same_and_clean(a, b)
    files = a.files()
    assert f"note/{old}.md" not in files  # before: a second, flat copy of the entry
    moved = files[f"note/{shard(old)}/{old}.md"]
    assert "status: archived" in moved and "backups moved to the provider" in moved
