"""A fork - an entry two machines superseded, `superseded_by: [a, b]` after a sync - resolved with
one command through the gateway: keep one successor (the other archived, naming the fork) or merge
both into a new entry; a preview first, then one commit, nothing deleted; `history` follows every
branch; a supersede of one successor with the other's text names the way out. Then the whole path:
two homes, a bare remote, the CLI. (Issue 31, item 1.)

(`memory`, `gateway` and `pair` are the memory_agent conftest's.)"""

import re

import pytest

from memory_agent.errors import Conflict, Invalid
from memory_agent.kb.entries import Entry, parse_entry, render_entry
from memory_agent.recall.history import history
from memory_agent.sync.remote import Syncer
from tests.memory_agent.helpers import commit, git

OLD = ("Prefer small PRs", "Keep pull requests small so they get reviewed the same day.")
MINE = ("Prefer small PRs (under 400 lines)", "Keep each pull request under 400 changed lines.")
THEIRS = ("Prefer small PRs: one change each", "One pull request carries one logical change.")


def fork(memory, gateway) -> tuple[str, str, str]:
    """An entry with two successors, as a sync's merge leaves it: one superseded here, one
    superseded on another machine (its file, and the old entry's `superseded_by: [a, b]`)."""
    old = gateway.add(*OLD, type="guideline")["id"]
    mine = gateway.supersede(old, *MINE, confirm=True)["id"]
    theirs = "prefer-small-prs-one-change-each"
    path = memory.find_path(old)
    entry = parse_entry(path.read_text(encoding="utf-8"), str(path))
    other = Entry(
        theirs,
        THEIRS[0],
        "guideline",
        "active",
        front(memory, mine).created,  # (the clock is pinned: every entry made at one time)
        THEIRS[1],
        [],
        {"supersedes": [old]},
    )
    (path.parent / f"{theirs}.md").write_text(render_entry(other), encoding="utf-8")
    entry.extra["superseded_by"] = sorted([mine, theirs])
    path.write_text(render_entry(entry), encoding="utf-8")
    git(memory.kb_dir, "add", "-A")
    commit(memory.kb_dir, "the other machine's supersede, merged by a sync")
    return old, mine, theirs


def forks_waiting(memory) -> list:
    syncer = Syncer(memory.kb_dir, memory.run_dir, memory.write_lock, refresh=lambda _: None)
    return syncer.waiting()["forks"]


def front(memory, entry_id: str) -> Entry:
    path = memory.find_path(entry_id)
    return parse_entry(path.read_text(encoding="utf-8"), str(path))


def test_keeping_one_successor_archives_the_other_in_one_commit_and_ends_the_fork(memory, gateway):
    old, mine, theirs = fork(memory, gateway)
    assert [f["id"] for f in forks_waiting(memory)] == [old]
    head = git(memory.kb_dir, "rev-parse", "HEAD").strip()
    preview = gateway.resolve_fork(old, keep=theirs, reason="we agreed on one change per PR")
    assert (
        preview["status"] == "preview" and git(memory.kb_dir, "rev-parse", "HEAD").strip() == head
    )
    assert len(preview["preview"]) == 2  # the old entry and the successor archived
    done = gateway.resolve_fork(
        old, keep=theirs, reason="we agreed on one change per PR", confirm=True
    )
    assert done["status"] == "resolved" and done["kept"] == theirs and done["archived"] == [mine]
    assert git(memory.kb_dir, "rev-list", "--count", f"{head}..HEAD").strip() == "1"
    assert sorted(git(memory.kb_dir, "show", "--name-only", "--format=", "HEAD").split()) == [
        f"guideline/{mine}.md",
        f"guideline/{old}.md",
    ]
    assert front(memory, old).extra["superseded_by"] == theirs  # one id again
    dropped = front(memory, mine)
    assert dropped.status == "archived"  # nothing deleted
    assert dropped.extra["archive_reason"] == (
        f"fork of {old} resolved: {theirs} kept (we agreed on one change per PR)"
    )
    assert front(memory, theirs).status == "active"
    assert forks_waiting(memory) == []
    with pytest.raises(Conflict, match="not a fork"):
        gateway.resolve_fork(old, keep=theirs)


def test_merging_both_writes_one_entry_that_supersedes_them(memory, gateway):
    old, mine, theirs = fork(memory, gateway)
    with pytest.raises(
        Invalid, match="itself: nothing to merge"
    ):  # a "merge" that is one of them: keep it
        gateway.resolve_fork(old, title=MINE[0], body=MINE[1])
    body = "Keep each pull request under 400 changed lines, and one logical change each."
    done = gateway.resolve_fork(old, title="Prefer small PRs", body=body, confirm=True)
    merged = done["merged_into"]
    assert done["status"] == "resolved" and sorted(done["superseded"]) == sorted([mine, theirs])
    new = front(memory, merged)
    assert new.status == "active" and new.body == body
    assert new.extra["supersedes"] == [old, *sorted([mine, theirs])]
    for successor in (mine, theirs):
        assert front(memory, successor).status == "superseded"
        assert front(memory, successor).extra["superseded_by"] == merged
    assert front(memory, old).extra["superseded_by"] == merged
    assert forks_waiting(memory) == []
    assert git(memory.kb_dir, "log", "-1", "--format=%s").startswith(
        f"memory: resolve the fork of {old}: merge"
    )


def test_history_follows_every_branch_of_a_fork(memory, gateway):
    old, mine, theirs = fork(memory, gateway)
    chain = history(memory, mine)["chain"]
    assert [s["id"] for s in chain] == [old, theirs, mine]  # oldest first: every branch
    assert "a fork" in chain[0]["reason"] and "memory-agent resolve" in chain[0]["reason"]
    gateway.resolve_fork(old, keep=mine, confirm=True)
    steps = {s["id"]: s for s in history(memory, old)["chain"]}
    assert set(steps) == {old, mine, theirs}
    assert steps[theirs]["branch"] and "branch" not in steps[mine]
    assert steps[theirs]["status"] == "archived" and "fork of" in steps[theirs]["reason"]


def test_the_other_successors_text_is_a_duplicate_that_names_the_resolve_command(memory, gateway):
    old, mine, theirs = fork(memory, gateway)
    reply = gateway.supersede(mine, *THEIRS, confirm=True)
    assert reply["status"] == "duplicate" and reply["duplicate_of"] == theirs
    assert f"memory-agent resolve {old} --keep {theirs}" in reply["next"]
    with pytest.raises(Conflict) as refused:
        gateway.supersede(old, "Anything", "else", confirm=True)
    assert "memory-agent resolve" in refused.value.fix


def test_the_two_homes_fork_is_resolved_with_one_command_and_synced(pair):
    """The issue's walk: both homes supersede one entry; sync makes a fork; plain `status`
    shows it; `resolve --keep` on one home; after a round on each, no home reports it."""
    a, b, remote = pair
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    shared = a.add(*OLD)
    a.sync()
    b.sync()
    _, mine = a.cli("supersede", shared, "--title", MINE[0], "--body", MINE[1], "--confirm")
    _, theirs = b.cli("supersede", shared, "--title", THEIRS[0], "--body", THEIRS[1], "--confirm")
    a.sync()
    b.sync()
    a.sync()
    plain = a.cli_text("status")
    assert re.search(rf"fork: {shared} was superseded on two machines", plain), plain
    shown = a.cli_text("resolve", shared)
    assert mine["id"] in shown and theirs["id"] in shown and "--keep" in shown
    _, preview = a.cli("resolve", shared, "--keep", mine["id"])
    assert preview["status"] == "preview"
    _, done = a.cli("resolve", shared, "--keep", mine["id"], "--confirm")
    assert done["status"] == "resolved" and done["archived"] == [theirs["id"]]
    a.sync()
    b.sync()
    for home in (a, b):
        _, state = home.cli("remote")
        assert state["forks"] == [], state
        assert home.cli("get", shared)[1]["superseded_by"] == mine["id"]
        assert home.cli("get", theirs["id"])[1]["status"] == "archived"
    assert "fork:" not in b.cli_text("status")
