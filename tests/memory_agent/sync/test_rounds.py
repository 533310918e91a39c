"""Rounds of sync: the knowledge base shared through a git remote. Two homes join and each finds
what the other wrote, a fresh home takes the remote's history, two demo homes hold one copy of each
entry; writes go on while the remote is away; a push refused because the other side pushed first is
replayed; a rewritten upstream stops sync and keeps every local commit; an uncommitted edit in the
way and a stale index lock are named with their fix; a round embeds the incoming entries before it
takes the write lock; `status` lists forks from a cache; the daemon syncs on its own. Two homes and
a bare repository on disk, real daemons (MiniLM), the real CLI as a subprocess, real git. (Issue
21.)

(`pair`, two homes and a bare remote, is the memory_agent conftest's.)"""

import os
import subprocess

import pytest

from memory_agent.client import DaemonClient
from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.remotes import (
    join_both,
    kb_with_remote,
    log_git_calls,
    note,
    same_and_clean,
    two_kbs_on_branches,
)
from tests.memory_agent.two_homes import Home, shared_pair


def test_two_homes_join_and_each_finds_what_the_other_wrote(pair):
    a, b, remote = pair
    a_id = a.add("Laptop: the VPN needs split tunnelling", "Turn on split tunnelling for the VPN.")
    _, set_ = a.cli("remote", "set", str(remote))
    assert set_["remote"] == str(remote)
    _, first = a.sync()
    assert first["pushed"] >= 1
    b.cli("remote", "set", str(remote))
    b_id = b.add("Desktop: the GPU driver is pinned", "The desktop pins the nvidia driver at 550.")
    _, joined = b.sync()  # b has entries of its own: they are replayed onto the remote history
    assert joined["replayed"] >= 1 and joined["pushed"] >= 1
    a.sync()
    same_and_clean(a, b)
    # found on the other machine without a rebuild or a status call first
    assert b_id in a.search("which nvidia driver does the desktop pin")
    assert a_id in b.search("does the VPN need split tunnelling")
    # the commits carry the machine that wrote them
    log = git(a.kb, "log", "--format=%B")
    assert "Memory-Agent-Machine: laptop" in log and "Memory-Agent-Machine: desktop" in log
    _, status = a.cli("remote")
    assert status["ahead"] == 0 and status["behind"] == 0 and status["last_sync"]


def test_a_fresh_home_takes_the_remote_history(pair):
    a, b, remote = pair
    a.add("Use uv for locking", "Lock dependencies with uv lock.")
    a.cli("remote", "set", str(remote))
    a.sync()
    b.cli("remote", "set", str(remote))
    _, joined = b.sync()  # (its first commit may even be the same: an empty tree, one date)
    assert joined["pulled"] >= 1 and joined["replayed"] == 0 and joined["pushed"] == 0
    same_and_clean(a, b)
    assert git(a.kb, "rev-parse", "HEAD") == git(b.kb, "rev-parse", "HEAD")


def test_two_demo_homes_sync_and_hold_one_copy_of_each_demo_entry(tmp_path, shared_cache):
    """`init --demo` on two machines: the demo KB holds nothing the secret scan refuses (its
    DSN once carried a password and no demo home could push), and the same ids with the same
    text are one entry each, never renamed twins."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = Home(tmp_path / "laptop", shared_cache, "laptop", demo=True)
    b = Home(tmp_path / "desktop", shared_cache, "desktop", demo=True)
    try:
        demo = {k for k in a.files() if k.endswith(".md")}
        a.cli("remote", "set", str(remote))
        _, first = a.sync()
        assert first["pushed"] >= 1
        b.cli("remote", "set", str(remote))
        b.sync()
        a.sync()
        same_and_clean(a, b)
        assert {k for k in b.files() if k.endswith(".md")} == demo  # no twin, nothing lost
    finally:
        a.stop()
        b.stop()


def test_unreachable_remote_writes_go_on_and_sync_catches_up(pair, tmp_path):
    a, b, remote = pair
    moved = tmp_path / "moved.git"
    a.cli("remote", "set", str(remote))
    a.sync()
    remote.rename(moved)
    a_id = a.add("Written offline", "This entry was written while the remote was away.")
    code, err = a.sync(check=False)
    assert (
        code != 0 and err["error"]["code"] == "unavailable" and "remote set" in err["error"]["fix"]
    )
    _, status = a.cli("remote")
    assert status["last_error"]["code"] == "unavailable"
    moved.rename(remote)
    a.sync()
    b.cli("remote", "set", str(remote))
    b.sync()
    assert a_id in b.search("which entry was written while the remote was away")


def test_a_push_refused_because_the_other_side_pushed_first_is_replayed(pair):
    a, b, remote = pair
    join_both(a, b, remote)
    b.add("Desktop note", "Written on the desktop.")
    b.sync()
    a.add("Laptop note", "Written on the laptop.")
    _, report = a.sync()  # fetches b's commit first, replays, pushes
    assert report["replayed"] == 1 and report["pushed"] == 1
    b.sync()
    same_and_clean(a, b)


def test_a_rewritten_upstream_stops_sync_and_keeps_every_local_commit(pair, tmp_path):
    a, b, remote = pair
    a.cli("remote", "set", str(remote))
    a.add("First", "The first entry.")
    a.sync()
    # someone force-pushes an unrelated history
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", "-b", "main", str(other)], check=True)
    (other / "x.txt").write_text("x")
    git(other, "add", "x.txt")
    git(other, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "rewrite")
    branch = git(a.kb, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(other, "push", "-q", "--force", str(remote), f"main:{branch}")
    local = a.add("Second", "The second entry, written after the rewrite.")
    head = git(a.kb, "rev-parse", "HEAD").strip()
    code, err = a.sync(check=False)
    assert (
        code != 0 and err["error"]["code"] == "conflict" and "rewritten" in err["error"]["message"]
    )
    assert git(a.kb, "rev-parse", "HEAD").strip() == head  # nothing moved
    assert (a.kb / "note" / f"{local}.md").exists()
    _, status = a.cli("remote")
    assert status["stopped"]


def test_commits_carry_the_persons_identity(pair):
    a, b, remote = pair
    git(a.kb, "config", "user.name", "Ada Lovelace")
    git(a.kb, "config", "user.email", "ada@example.com")
    a.add("Identity", "Commits carry who wrote them.")
    assert git(a.kb, "log", "-1", "--format=%an <%ae>").strip() == "Ada Lovelace <ada@example.com>"
    b.env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")  # no identity at all
    b.add("Anonymous", "Without an identity, memory-agent's own.")
    assert git(b.kb, "log", "-1", "--format=%an").strip() == "memory-agent"


def test_the_daemon_syncs_on_its_own_and_searches_go_on_meanwhile(pair):
    import threading

    a, b, remote = pair
    for home in (a, b):
        home.cli("remote", "set", str(remote))
        (home.path / "config.toml").write_text('embedder = "minilm"\nsync_interval = 1\n')
        DaemonClient(home.path).stop(wait=True)
    a.add("Seed", "The first entry, so both homes share a history.")
    a.sync()
    b.sync()
    errors, stop = [], threading.Event()

    def searching():
        while not stop.is_set():
            code, reply = b.cli("search", "which port does the staging proxy use", check=False)
            if code != 0:
                errors.append(reply)

    reader = threading.Thread(target=searching)
    reader.start()
    try:
        new = a.add("Staging proxy port", "The staging proxy listens on port 8443.")
        import time

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and new not in b.search("staging proxy port"):
            time.sleep(1)
    finally:
        stop.set()
        reader.join()
    assert new in b.search("which port does the staging proxy use")  # no `sync` was run
    assert errors == []


def test_a_stale_index_lock_is_named_with_its_fix(pair):
    a, b, remote = pair
    join_both(a, b, remote)
    a.add("Moved ahead", "An entry b has not seen.")
    a.sync()
    lock = b.kb / ".git" / "index.lock"
    lock.write_text("")
    os.utime(lock, (1, 1))  # old, and no git process holds it: stale
    code, err = b.sync(check=False)
    assert code != 0 and "stale" in err["error"]["message"] and f"rm {lock}" in err["error"]["fix"]
    lock.unlink()
    b.sync()
    same_and_clean(a, b)


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


OLD = (
    "---\nid: old\ntitle: Old\ntype: note\nstatus: superseded\nsuperseded_by: {}\nsuperseded_at: 2026-11-02T00:00:00Z\n"
    "created: 2026-11-01T00:00:00Z\n---\nThe old text.\n"
)


def test_status_lists_forks_and_variants_without_a_git_grep_while_nothing_changed(
    tmp_path, monkeypatch
):
    kb, _, syncer = kb_with_remote(tmp_path)
    (kb / "note").mkdir()
    (kb / "note" / "old.md").write_text(OLD.format("[new-a, new-b]"))
    git(kb, "add", "note/old.md")
    commit(kb, "a fork")
    calls = log_git_calls(tmp_path, monkeypatch)
    first = syncer.status()
    assert first["forks"] == [{"id": "old", "successors": ["new-a", "new-b"]}]
    for _ in range(3):
        assert syncer.status()["forks"] == first["forks"]
    assert sum(" grep " in f" {c} " for c in calls.read_text().splitlines()) == 1
    # the KB changes (a commit: a round, a write, a person): the next status sees it
    (kb / "note" / "old.md").write_text(OLD.format("[new-a]"))
    git(kb, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam", "resolved")
    assert syncer.status()["forks"] == []
    (kb / "variants").mkdir()
    (kb / "variants" / "old.laptop.md").write_text("another text\n")
    assert syncer.status()["variants"] == [{"variant": "variants/old.laptop.md", "path": "old"}]
    assert sum(" grep " in f" {c} " for c in calls.read_text().splitlines()) == 3


def test_a_sync_embeds_the_incoming_entries_before_it_takes_the_write_lock(pair):
    import json
    import sys

    a, b, remote = shared_pair(pair)
    a.sync()
    b.sync()
    # 40 entries arrive on the laptop in one commit (more than one batch of pre-embedding)
    (a.kb / "note").mkdir(exist_ok=True)
    for i in range(40):
        (a.kb / "note" / f"pulled-{i}.md").write_text(
            f"---\nid: pulled-{i}\ntitle: Pulled entry {i}\ntype: note\nstatus: active\n"
            f"created: 2026-11-01T00:00:00Z\n---\nService {i} answers on port {9000 + i}.\n"
        )
    git(a.kb, "add", "note")
    commit(a.kb, "forty entries")
    a.sync()
    # the desktop's round stops after its first batch of pre-embedding (the `fault` hook)
    b.stop()
    b.env["MEMORY_AGENT_FAULT"] = "pause-sync-embed"
    paused = b.path / "run" / "fault-pause-sync-embed"
    syncing = subprocess.Popen(
        [sys.executable, "-m", "memory_agent", "sync", "--home", str(b.path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=b.env,
    )
    try:
        # the CLI prints the progress it reads from status while the round embeds
        line = ""
        while "embedding incoming entries 32/40" not in line:
            line = syncing.stderr.readline()
            assert line, "the sync ended without reporting any pre-embedding"
        assert paused.exists() and syncing.poll() is None
        _, status = b.cli("remote")
        assert status["progress"] == {"phase": "embedding", "done": 32, "of": 40}
        assert not (b.kb / "note" / "pulled-0.md").exists()  # the branch has not moved yet
        # a write completes meanwhile: the round holds no lock while it embeds
        written = b.add("Desktop during the sync", "Written while the sync was embedding.")
        assert (b.kb / "note" / f"{written}.md").exists()
    finally:
        (b.path / "run" / "fault-continue").touch()
        out, err = syncing.communicate(timeout=300)
    assert syncing.returncode == 0, err
    assert json.loads(out)["pulled"] >= 1
    assert "pulled-39" in b.search("which port does service 39 answer on")
    assert written in b.search("what was written while the sync was embedding")
    _, status = b.cli("remote")
    assert "progress" not in status
    a.sync()
    assert "pulled-7" in a.search("which port does service 7 answer on")
    assert written in a.search("what was written while the sync was embedding")


def test_status_lists_a_fork_whose_file_name_has_a_space_or_is_not_ascii(tmp_path):
    """git grep -l quotes such names and the list was split on spaces: both forks were missed."""
    kb, _, syncer = kb_with_remote(tmp_path)
    (kb / "note").mkdir()
    for name, entry_id in (("two words.md", "two-words"), ("café.md", "cafe")):
        (kb / "note" / name).write_text(
            OLD.format("[new-a, new-b]").replace("id: old", f"id: {entry_id}")
        )
        git(kb, "add", f"note/{name}")
    commit(kb, "two forks")
    assert sorted(f["id"] for f in syncer.status()["forks"]) == ["cafe", "two-words"]


# -- what the rounds did while nobody looked (issue 31, item 4) -----------------------------------
def test_what_the_rounds_did_is_summed_until_a_person_looks():
    from memory_agent.sync.rounds import KEPT, mark_seen, note_round, unseen

    record: dict = {}
    note_round(record, {"pulled": 0, "pushed": 0, "renamed": [], "forks": []}, 1.0)
    assert unseen(record) is None  # a round that did nothing is not kept
    note_round(record, {"pushed": 7}, 2.0)
    renamed = {"id": "deploy-window", "replayed_as": "deploy-window-2"}
    note_round(record, {"pulled": 4, "entries_in": 15, "renamed": [renamed]}, 3.0)
    seen = unseen(record)
    assert seen["rounds"] == 2 and (seen["since"], seen["until"]) == (2.0, 3.0)
    assert (seen["pulled"], seen["pushed"], seen["entries_in"]) == (4, 7, 15)
    assert seen["renamed"] == [renamed]
    assert mark_seen(record, seen["upto"]) and unseen(record) is None
    for n in range(KEPT + 5):
        note_round(record, {"pushed": 1}, 10.0 + n)
    assert len(record["rounds"]) == KEPT and unseen(record)["pushed"] == KEPT


def test_sync_reports_what_the_daemons_own_rounds_did_and_the_renamed_twin(pair):
    """The issue's walk: the daemon's round pushed, pulled and renamed a moment before the
    person typed `sync`, which then said `pulled 0, pushed 0` and nothing of the new id."""
    import re
    import time

    a, b, remote = pair
    join_both(a, b, remote)
    a.add("Deploy window", "Deploys happen on Tuesdays.")
    a.sync()
    b.add("Deploy window", "Deploys happen on Thursdays after the freeze.")
    b.add("Freeze calendar", "The December freeze starts on the 15th.")
    b.add("Pager rotation", "The on-call pager rotates every Monday at ten.")
    b.add("Staging proxy port", "The staging proxy listens on port 8443.")
    DaemonClient(b.path).stop(wait=True)
    (b.path / "config.toml").write_text('embedder = "minilm"\nsync_interval = 1\n')
    b.cli("status")  # the daemon starts, and with it its own rounds
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (b.kb / "note" / "deploy-window-2.md").exists():
        time.sleep(0.5)
    assert (b.kb / "note" / "deploy-window-2.md").exists()
    DaemonClient(b.path).stop(wait=True)  # no more rounds of its own: the person's look now
    (b.path / "config.toml").write_text('embedder = "minilm"\nsync_interval = 0\n')
    plain = b.cli_text("status")
    renamed = "this machine's new entry deploy-window is now deploy-window-2"
    assert renamed in plain, plain
    said = b.cli_text("sync")
    assert "this round pulled 0, pushed 0" in said, said
    assert re.search(r"since you last looked, \d+ round\(s\) of sync", said), said
    assert "pulled 1 commit(s)" in said and re.search(r"pushed [4-9] commit\(s\)", said), said
    assert renamed in said
    again = b.cli_text("sync")
    assert "since you last looked" not in again and renamed not in again
    shown = b.cli_text("remote")
    assert "UTC" in shown and not re.search(r"\d{10}\.\d", shown), shown
