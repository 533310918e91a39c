"""The index follows git: the KB commit it reflects is recorded (`refs/memory-agent/indexed`) and
the files git changed between it and HEAD are refreshed - a pull or a reset made with plain git
while the daemon was stopped, a recorded commit git no longer has, a commit made by hand without
inotify. Two homes and a bare repository on disk, real daemons (MiniLM), the real CLI, real git.
(Issue 21.)

(`pair`, two homes and a bare remote, is the memory_agent conftest's.)"""

from memory_agent.recall import reads
from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.two_homes import shared_pair

INDEXED_REF = "refs/memory-agent/indexed"


def head(home) -> str:
    return git(home.kb, "rev-parse", "HEAD").strip()


def rename_entry(kb, old: str, new: str, folder: str = "note") -> None:
    """A person renames an entry by hand: its file and its id move together."""
    git(kb, "mv", f"{folder}/{old}.md", f"{folder}/{new}.md")
    path = kb / folder / f"{new}.md"
    path.write_text(path.read_text().replace(f"id: {old}\n", f"id: {new}\n"))
    git(kb, "add", f"{folder}/{new}.md")


def test_a_pull_made_by_plain_git_while_the_daemon_was_stopped_is_searched_at_once(pair):
    a, b, remote = shared_pair(pair)
    gone = a.add("Legacy proxy hostname", "The legacy proxy answers at old-proxy.internal.")
    moved = a.add("Kiwi cluster quota", "The kiwi cluster allows forty GPUs per team.")
    a.sync()
    b.sync()
    assert gone in b.search("which host does the legacy proxy answer at")
    _, status = b.cli("status")
    assert status["indexed_commit"] == head(b)  # status names the commit the index reflects
    b.stop()
    # Meanwhile, on the laptop: one entry deleted, one renamed, one added - all by hand.
    git(a.kb, "rm", "-q", f"note/{gone}.md")
    rename_entry(a.kb, moved, "kiwi-gpu-quota")
    commit(a.kb, "tidy by hand")
    new = a.add("Papaya build cache", "The papaya builds share a cache bucket named papaya-cc.")
    a.sync()
    # The desktop's person pulls with plain git; no daemon runs there.
    branch = git(b.kb, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(b.kb, "pull", "-q", "--ff-only", str(remote), branch)
    # The first call after the start: no sync, no rebuild, no status first.
    hits = b.search("which cache bucket do the papaya builds share")
    assert new in hits
    assert "kiwi-gpu-quota" in b.search("how many GPUs does the kiwi cluster allow")
    assert moved not in b.search("how many GPUs does the kiwi cluster allow")
    assert gone not in b.search("which host does the legacy proxy answer at")
    _, status = b.cli("status")
    assert status["indexed_commit"] == head(b) and status["consistent"]
    assert git(b.kb, "rev-parse", INDEXED_REF).strip() == head(b)


def test_a_reset_to_an_older_commit_while_stopped_brings_the_old_entries_back(pair):
    a, _, _ = pair
    kept = a.add("Mango release train", "The mango release train leaves every second Monday.")
    before = head(a)
    dropped = a.add("Quince feature flag", "The quince feature flag is named QUINCE_ON.")
    a.cli("archive", kept, "--reason", "the train was cancelled", "--confirm")
    assert kept not in a.search("when does the mango release train leave")
    a.stop()
    git(a.kb, "reset", "-q", "--hard", before)  # a person undoes the last two writes
    assert kept in a.search("when does the mango release train leave")  # active again
    assert dropped not in a.search("what is the quince feature flag named")


def test_an_unreachable_indexed_commit_means_a_full_scan_said_in_the_log(pair):
    a, _, _ = pair
    a.add("Plum deploy key", "The plum deploy key rotates every quarter.")
    a.stop()
    # the recorded commit is gone (say, a `git gc` after a reset): the ref names a missing object
    ref = a.kb / ".git" / INDEXED_REF
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text("0123456789abcdef0123456789abcdef01234567\n")
    git(a.kb, "rm", "-q", "note/plum-deploy-key.md")
    commit(a.kb, "drop the plum key by hand")
    new = a.add("Fig mirror", "The fig mirror syncs nightly from upstream.")
    assert new in a.search("how often does the fig mirror sync")
    assert "plum-deploy-key" not in a.search("how often does the plum deploy key rotate")
    log = (a.path / "run" / "daemon.log").read_text()
    assert "0123456789ab" in log and "full scan" in log
    assert git(a.kb, "rev-parse", INDEXED_REF).strip() == head(a)


def test_without_inotify_a_commit_made_by_hand_is_indexed_at_the_next_refresh(
    env_home, minilm_model
):
    import time

    from tests.memory_agent.helpers import make_memory

    make_memory(env_home, minilm_model).init(demo=True, embedder="minilm")
    resident = make_memory(env_home, minilm_model, resident=True)  # no watcher started
    resident.require_home()
    try:
        with resident.session():
            resident.refresh()
        kb = env_home / "kb"
        (kb / "note").mkdir(exist_ok=True)
        (kb / "note" / "lychee-port.md").write_text(
            "---\nid: lychee-port\ntitle: Lychee listens on 7443\ntype: note\nstatus: active\n"
            "created: 2026-11-01T00:00:00Z\n---\nThe lychee service listens on port 7443.\n"
        )
        git(kb, "add", "note/lychee-port.md")
        commit(kb, "a note written by hand")
        resident.scanner.last_full = time.monotonic()  # the once-a-second rescan just ran
        with resident.session():
            report = resident.refresh()
        assert report["added"] == ["lychee-port"]
        assert resident.indexed_commit() == head_of(kb)
    finally:
        resident.close()


def _git_commands(trace) -> list[str]:
    """The git subcommands the product ran, from git's own trace (GIT_TRACE)."""
    return [
        line.split("built-in: git ", 1)[1].split()[0]
        for line in trace.read_text().splitlines()
        if "built-in: git " in line
    ]


def test_a_writes_own_commit_is_indexed_without_asking_git_what_changed(
    memory, gateway, tmp_path, monkeypatch
):
    """The gateway knows which files its commit changed: the refresh after it takes them from
    there - one `git diff` per add (the commit's own check), not two (at a million entries in
    one folder a diff of two trees costs ~0.3 s). What git says about other commits still counts."""
    trace = tmp_path / "git-trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    added = gateway.add("Guava cache size", "The guava service caches 512 MB per node.")
    assert _git_commands(trace).count("diff") == 1
    assert git(memory.kb_dir, "rev-parse", INDEXED_REF).strip() == head_of(memory.kb_dir)
    found = reads.search(memory, "how much does the guava service cache", limit=3)
    assert found["hits"][0]["id"] == added["id"]

    # a person's commit on top of the write's own: git is asked, and their entry is found
    made = added["commit"]
    by_hand = memory.kb_dir / "note" / "lychee-port.md"
    by_hand.write_text(
        "---\nid: lychee-port\ntitle: Lychee port\ntype: note\nstatus: active\n"
        "created: '2026-11-30T09:00:00Z'\n---\n"
        "The lychee service listens on port 7443.\n"
    )
    git(memory.kb_dir, "add", "note/lychee-port.md")
    commit(memory.kb_dir, "lychee by hand")
    parent = git(memory.kb_dir, "rev-parse", f"{made}^").strip()
    memory.kb_commit.record(parent)  # as if the refresh after the write had not run yet
    memory.kb_commit.wrote(parent, made, (f"note/{added['id']}.md",))
    trace.write_text("")
    # from git: HEAD is not the write's commit
    assert memory.kb_moved() == [memory.kb_dir / "note" / f"{added['id']}.md", by_hand]
    assert _git_commands(trace).count("diff") == 1
    memory.refresh(force=True)
    found = reads.search(memory, "which port does the lychee service listen on", limit=3)
    assert "lychee-port" in [h["id"] for h in found["hits"]]
