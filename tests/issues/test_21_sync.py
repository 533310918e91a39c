"""Issue 21 (sync): the knowledge base shared through a git remote. Two homes and a bare
repository on disk, real daemons (MiniLM), the real CLI as a subprocess, real git."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import daemon_pids, env_for

CLOCK = "2026-11-30T09:00:00Z"


class Home:
    def __init__(self, path, cache, machine, demo=False):
        self.path, self.cache, self.machine = path, cache, machine
        Memory(config.load({"home": str(path)})).init(demo=demo, embedder="minilm", sync=False)
        (path / "config.toml").write_text('embedder = "minilm"\nsync_interval = 0\n')
        self.env = env_for(path, cache, MEMORY_AGENT_CLOCK=CLOCK, MEMORY_AGENT_MACHINE=machine)

    @property
    def kb(self):
        return self.path / "kb"

    def cli(self, *args, check=True):
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(self.path), "--json"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        if check and proc.returncode != 0:
            raise AssertionError(proc.stderr or proc.stdout)
        return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}

    def add(self, title, body, *extra):
        _, reply = self.cli("add", "--title", title, "--body", body, *extra)
        assert reply["status"] == "created", reply
        return reply["id"]

    def sync(self, check=True):
        return self.cli("sync", check=check)

    def search(self, query):
        _, reply = self.cli("search", query, "--limit", "20")
        return [h["id"] for h in reply["hits"]]

    def files(self):
        out = {}
        for p in sorted(self.kb.rglob("*")):
            if p.is_file() and ".git" not in p.parts:
                out[str(p.relative_to(self.kb))] = p.read_text()
        return out

    def stop(self):
        DaemonClient(self.path).stop(wait=True)
        for pid in daemon_pids(self.path):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pair(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = Home(tmp_path / "laptop", shared_cache, "laptop")
    b = Home(tmp_path / "desktop", shared_cache, "desktop")
    yield a, b, remote
    a.stop()
    b.stop()


def same_and_clean(a, b):
    """Both homes hold the same files, git is sound, and no conflict marker is anywhere."""
    assert a.files() == b.files()
    for home in (a, b):
        git(home.kb, "fsck", "--no-progress")
        for text in home.files().values():
            assert not re.search(r"^(<<<<<<<|>>>>>>>|=======)( |$)", text, re.M)


def join_both(a, b, remote):
    """Both homes on the remote, each synced once (a first, then b takes its history)."""
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    a.sync()
    b.sync()


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


def test_a_push_the_remote_refuses_by_its_own_rule_is_named_so_not_retried_as_a_race(pair):
    """A server hook (or a protected branch) declining the push is not "the other side pushed
    first": the round says the remote refused it and why, keeps the commit, and pushes it once
    the rule is lifted."""
    a, _, remote = pair
    a.cli("remote", "set", str(remote))
    a.sync()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(  # the remote's words are data: quoted, and a secret in them is masked
        "#!/bin/sh\necho 'pushes are frozen for the release'\n"
        "echo 'use token ghp_0123456789abcdefghijABCDEFGHIJ012345'\nexit 1\n"
    )
    hook.chmod(0o755)
    a_id = a.add("Written during the freeze", "An entry written while pushes were refused.")
    code, err = a.sync(check=False)
    assert code != 0 and err["error"]["code"] == "unavailable", err
    message = err["error"]["message"]
    assert "refused the push" in message and "frozen for the release" in message, message
    assert "ghp_0123456789" not in message and "ghp_0123456789" not in json.dumps(
        a.cli("remote")[1]
    )  # nor in what status keeps (run/remote.json)
    assert "kept moving" not in message
    assert "next round" in err["error"]["fix"]
    hook.unlink()
    _, report = a.sync()
    assert report["pushed"] == 1
    published = subprocess.run(
        ["git", "-C", str(remote), "ls-tree", "-r", "--name-only", report["branch"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert any(name.endswith(f"/{a_id}.md") for name in published), published


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


def test_a_token_in_the_remote_url_is_never_shown_or_stored_by_us(pair):
    a, b, remote = pair
    url = "https://me:ghp_tokentokentoken@127.0.0.1:9/memory.git"  # nothing listens on port 9
    _, set_ = a.cli("remote", "set", url)
    code, err = a.sync(check=False)
    _, status = a.cli("remote")
    assert code != 0 and err["error"]["code"] == "unavailable"
    shown = json.dumps([set_, err, status]) + (a.path / "run" / "remote.json").read_text()
    assert "ghp_tokentokentoken" not in shown and "me:***@127.0.0.1" in shown
