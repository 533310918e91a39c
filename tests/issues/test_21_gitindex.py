"""Issue 21 (the sync core): the index follows git (the KB commit it reflects is recorded and
the files between it and HEAD are refreshed), a first sync embeds outside the write lock, the
pre-push scan reads the blobs with one process, and `status` serves forks from a cache. Two
homes and a bare repository on disk, real daemons (MiniLM), the real CLI, real git."""

import os
import shutil
import subprocess
import threading

from memory_agent.kb.gitrepo import KBRepo
from memory_agent.sync.remote import Syncer
from tests.issues.test_21_sync import pair  # noqa: F401 - the two homes and the remote
from tests.memory_agent.helpers import git

INDEXED_REF = "refs/memory-agent/indexed"


def head(home) -> str:
    return git(home.kb, "rev-parse", "HEAD").strip()


def shared_pair(pair):  # noqa: F811
    a, b, remote = pair
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    return a, b, remote


def rename_entry(kb, old: str, new: str, folder: str = "note") -> None:
    """A person renames an entry by hand: its file and its id move together."""
    git(kb, "mv", f"{folder}/{old}.md", f"{folder}/{new}.md")
    path = kb / folder / f"{new}.md"
    path.write_text(path.read_text().replace(f"id: {old}\n", f"id: {new}\n"))
    git(kb, "add", f"{folder}/{new}.md")


def commit(kb, message: str) -> None:
    git(kb, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", message)


def test_a_pull_made_by_plain_git_while_the_daemon_was_stopped_is_searched_at_once(pair):  # noqa: F811
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


def test_a_reset_to_an_older_commit_while_stopped_brings_the_old_entries_back(pair):  # noqa: F811
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


def test_an_unreachable_indexed_commit_means_a_full_scan_said_in_the_log(pair):  # noqa: F811
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


def head_of(kb) -> str:
    return git(kb, "rev-parse", "HEAD").strip()


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
    # the newest commit holding a secret is named, in the words the error always had
    newest = secrets[9]
    assert caught.value.message == (
        f"kb/note/n9.md holds what looks like a secret (commit {newest[:12]}); nothing was pushed"
    )
    assert caught.value.fix == (
        "take it out of the unpushed commits (README 'Two machines and a team', 'A secret in "
        f"a commit'): `git -C {kb} branch rescue-secret HEAD`, then `git -C {kb} rebase -i "
        f"{since[:12]}` and edit commit {newest[:12]} to remove it (writes wait while the "
        "rebase runs), then `memory-agent sync`"
    )
    assert "ghp_" not in git(remote, "log", "--all", "-p")


def kb_with_remote(tmp_path):
    """A KB and a bare remote on disk, joined by a first round of a real `Syncer`."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    kb = tmp_path / "kb"
    KBRepo.init(kb)
    syncer = Syncer(kb, tmp_path / "run", threading.RLock(), refresh=lambda paths: None)
    syncer.set_url(str(remote))
    syncer.run()
    return kb, remote, syncer


def log_git_calls(tmp_path, monkeypatch):
    """Every git process started from here on is logged (a shim in front of the real git)."""
    calls = tmp_path / "calls.log"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("git")} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    calls.touch()
    return calls


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


def test_a_sync_embeds_the_incoming_entries_before_it_takes_the_write_lock(pair):  # noqa: F811
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
