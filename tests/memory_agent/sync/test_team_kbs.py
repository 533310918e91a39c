"""A team: a second, shared KB in one home. Shared between two homes without a rebuild, one id in
two KBs, writes landing in the team KB (and a crashed one finished there), a read-only KB, `kb
remove` keeping unpushed work, the registry, scopes inside the team KB, the browser's KB filter, the
daemons' own rounds, a clone deleted by hand. Two homes and a bare repository for the team KB on
disk, real daemons (MiniLM), the real CLI as a subprocess, real git. (Issue 21.)"""

import re
import subprocess

import pytest

from tests.memory_agent.helpers import commit, git
from tests.memory_agent.sync.remotes import kb_with_remote, note
from tests.memory_agent.two_homes import Home


class TeamHome(Home):
    def error(self, *args):
        code, reply = self.cli(*args, check=False)
        assert code != 0, reply
        return reply["error"]

    def add_to(self, kb, title, body, *extra):
        _, reply = self.cli("add", "--kb", kb, "--title", title, "--body", body, *extra)
        assert reply["status"] == "created", reply
        return reply["id"]

    def hits(self, query, *extra):
        _, reply = self.cli("search", query, "--limit", "20", *extra)
        return {h["id"]: h for h in reply["hits"]}

    def get(self, entry_id):
        return self.cli("get", entry_id)[1]

    @property
    def team(self):
        return self.path / "kbs" / "team"


@pytest.fixture
def homes(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDER", "minilm")
    remote = tmp_path / "team.git"  # the team KB's shared repository: empty at first
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = TeamHome(tmp_path / "alice", shared_cache, "alice")
    b = TeamHome(tmp_path / "bob", shared_cache, "bob")
    yield a, b, remote
    a.stop()
    b.stop()


def remote_head(remote):
    return git(remote, "rev-parse", "refs/heads/main").strip()


def test_a_team_kb_is_shared_between_two_homes_without_a_rebuild(homes):
    a, b, remote = homes
    _, added = a.cli("kb", "add", "team", str(remote))
    assert added["name"] == "team" and added["writable"] and added["entries"] == 0
    assert remote_head(remote) == git(a.team, "rev-parse", "HEAD").strip()  # first commit pushed
    tid = a.add_to(
        "team",
        "The staging database is reset nightly",
        "Staging Postgres is reset from a snapshot at 02:00 UTC every night.",
    )
    assert tid.startswith("team:")
    assert git(a.kb, "log", "--format=%s").count("memory:") == 0  # the personal KB untouched
    assert f"memory: add {tid.split(':', 1)[1]}" in git(a.team, "log", "--format=%s")
    _, synced = a.sync()  # no personal remote: the team KB alone
    assert [(k["kb"], k["pushed"]) for k in synced["kbs"]] == [("team", 1)]

    _, joined = b.cli("kb", "add", "team", str(remote))
    assert joined["entries"] == 1
    hit = b.hits("when is the staging database reset")[tid]  # no rebuild, no status first
    assert hit["kb"] == "team" and hit["writable"] is True and hit["source"] == "kb:team"
    got = b.get(tid)
    assert got["id"] == tid and got["kb"] == "team" and "02:00 UTC" in got["body"]
    _, listed = b.cli("kb")
    assert [(k["name"], k["entries"]) for k in listed["kbs"]] == [("personal", 0), ("team", 1)]

    # bob writes to the team; alice's next round pulls it and her index follows the files
    bid = b.add_to(
        "team",
        "Feature flags live in LaunchDarkly",
        "Every feature flag is defined in LaunchDarkly, never in code.",
    )
    b.sync()
    a.sync()
    assert a.hits("where are feature flags defined")[bid]["kb"] == "team"
    assert bid not in a.hits("where are feature flags defined", "--kb", "personal")
    assert a.error("search", "flags", "--kb", "nope")["code"] == "not_found"
    _, status = a.cli("remote")
    assert status["remote"] is None  # the personal KB has none ...
    assert status["kbs"][0]["kb"] == "team" and status["kbs"][0]["behind"] == 0  # ... the team has
    _, full = a.cli("status")
    assert full["remote"]["kbs"][0]["ahead"] == 0
    assert {s["label"]: s["entries"] for s in full["sources"]}["kb:team"] == 2


def test_one_id_in_two_kbs_is_two_entries_and_dedup_looks_across_kbs(homes):
    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    mine = a.add("Deploy window", "I deploy my side projects on Fridays.")
    theirs = a.add_to("team", "Deploy window", "The team deploys on Tuesdays after standup.")
    assert (mine, theirs) == ("deploy-window", "team:deploy-window")
    assert "Fridays" in a.get(mine)["body"] and a.get(mine)["kb"] == "personal"
    assert "Tuesdays" in a.get(theirs)["body"]
    found = a.hits("deploy window day")
    assert found[mine]["kb"] == "personal" and found[theirs]["kb"] == "team"

    # what the team KB already says is not copied into the personal KB (nor the reverse)
    said = a.add_to("team", "Use uv for locking", "Lock Python dependencies with uv lock.")
    code, dup = a.cli(
        "add",
        "--title",
        "Use uv for locking",
        "--body",
        "Lock Python dependencies with uv lock.",
        check=False,
    )
    assert (
        code == 2
        and dup["status"] == "duplicate"
        and dup["duplicate_of"] == said == "team:use-uv-for-locking"
    )
    code, dup = a.cli(
        "add",
        "--kb",
        "team",
        "--title",
        "Deploy window",
        "--body",
        "I deploy my side projects on Fridays.",
        check=False,
    )
    assert code == 2 and dup["status"] == "duplicate" and dup["duplicate_of"] == mine


def test_supersede_and_archive_of_a_team_entry_land_in_the_team_kb(homes):
    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    old = a.add_to("team", "CI runs on Jenkins", "Our CI runs on the Jenkins box in the lab.")
    personal_head = git(a.kb, "rev-parse", "HEAD")
    _, new = a.cli(
        "supersede",
        old,
        "--title",
        "CI runs on GitHub Actions",
        "--body",
        "CI moved from Jenkins to GitHub Actions in November.",
        "--confirm",
    )
    assert new["status"] == "superseded" and new["old_id"] == old and new["id"].startswith("team:")
    local_new = new["id"].split(":", 1)[1]
    assert (a.team / "note" / f"{local_new}.md").is_file()
    assert not (a.kb / "note" / f"{local_new}.md").exists()
    assert git(a.kb, "rev-parse", "HEAD") == personal_head
    assert "superseded_by: " + local_new in (a.team / "note" / "ci-runs-on-jenkins.md").read_text()
    assert a.get(old)["superseded_by"] == new["id"]
    _, hist = a.cli("history", new["id"])
    assert [s["id"] for s in hist["chain"]] == [old, new["id"]]
    ids = a.hits("which CI system do we use")
    assert new["id"] in ids and old not in ids
    _, archived = a.cli(
        "archive", new["id"], "--reason", "we stopped tracking CI here", "--confirm"
    )
    assert archived["status"] == "archived" and archived["id"] == new["id"]
    assert git(a.kb, "rev-parse", "HEAD") == personal_head


def test_a_read_only_kb_refuses_writes_pulls_and_never_pushes(homes):
    a, b, remote = homes
    a.cli("kb", "add", "team", str(remote))
    tid = a.add_to("team", "On-call rotates weekly", "The on-call rotation changes every Monday.")
    a.sync()
    _, added = b.cli("kb", "add", "team", str(remote), "--read-only")
    assert added["writable"] is False and added["sync"]["pushed"] == 0 and added["entries"] == 1
    assert b.hits("when does the on-call rotation change")[tid]["writable"] is False
    err = b.error("add", "--kb", "team", "--title", "A note", "--body", "Some text here.")
    assert err["code"] == "read_only" and "kb remove team" in err["fix"]
    err = b.error(
        "supersede", tid, "--title", "On-call rotates daily", "--body", "Daily.", "--confirm"
    )
    assert err["code"] == "read_only"
    err = b.error("archive", tid, "--reason", "old", "--confirm")
    assert err["code"] == "read_only"
    assert b.get(tid)["writable"] is False

    # a commit made in the clone by hand is never pushed; what alice pushes is pulled
    (b.team / "note").mkdir(exist_ok=True)
    (b.team / "note" / "by-hand.md").write_text(
        "---\nid: by-hand\ntitle: By hand\ntype: note\nstatus: active\n"
        "created: 2026-11-30T09:00:00Z\n---\nWritten by hand.\n"
    )
    git(b.team, "add", "note/by-hand.md")
    git(b.team, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", "by hand")
    before = remote_head(remote)
    newer = a.add_to("team", "Runbooks live in the wiki", "Every runbook is a page in the wiki.")
    a.sync()
    _, report = b.sync()
    team = report["kbs"][0]
    assert team["kb"] == "team" and team["pushed"] == 0 and team["not_pushed"] == 1
    assert team["pulled"] == 1
    assert remote_head(remote) != before  # alice's push
    assert "by hand" not in git(remote, "log", "--format=%s", "main")  # bob's never
    assert newer in b.hits("where do runbooks live")
    _, again = b.sync()  # the next round is not mistaken for a rewritten upstream
    assert again["kbs"][0]["not_pushed"] == 1


def test_kb_remove_keeps_unpushed_work_and_its_entries_leave_the_index(homes):
    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    tid = a.add_to("team", "The VPN needs split tunnelling", "Turn on split tunnelling.")
    err = a.error("kb", "remove", "team")
    assert err["code"] == "conflict"
    assert "memory: add the-vpn-needs-split-tunnelling" in err["message"]
    assert "memory-agent sync --kb team" in err["fix"]
    assert a.team.is_dir() and tid in a.hits("does the VPN need split tunnelling")
    a.cli("sync", "--kb", "team")
    _, removed = a.cli("kb", "remove", "team")
    assert removed["removed"] is True
    kept = removed["moved_to"]
    assert (a.path / "kbs" / ".removed").is_dir() and not a.team.exists()
    assert "split tunnelling" in open(f"{kept}/note/the-vpn-needs-split-tunnelling.md").read()
    assert tid not in a.hits("does the VPN need split tunnelling")
    assert a.error("get", tid)["code"] == "not_found"
    err = a.error("add", "--kb", "team", "--title", "Again", "--body", "Some text.")
    assert err["code"] == "not_found" and "memory-agent kb list" in err["fix"]
    _, listed = a.cli("kb")
    assert [k["name"] for k in listed["kbs"]] == ["personal"]


def test_bad_names_and_unknown_kbs_are_refused_with_the_fix(homes):
    a, _, remote = homes
    err = a.error("kb", "add", "Team Notes", str(remote))
    assert err["code"] == "invalid" and "a-z, 0-9" in err["fix"]
    err = a.error("kb", "add", "personal", str(remote))
    assert err["code"] == "invalid"
    err = a.error("kb", "add", "team", str(remote.parent / "missing.git"))
    assert err["code"] == "git" and not (a.path / "kbs" / "team").exists()
    err = a.error("add", "--kb", "nope", "--title", "A title", "--body", "Some text.")
    assert err["code"] == "not_found" and "memory-agent kb list" in err["fix"]
    err = a.error("kb", "remove", "personal")
    assert err["code"] == "invalid"


def test_scopes_apply_inside_the_team_kb(homes, tmp_path):
    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    project = tmp_path / "alpha"
    project.mkdir()
    git(project, "init", "-q")
    git(project, "remote", "add", "origin", "https://github.com/acme/alpha.git")
    other = tmp_path / "beta"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "remote", "add", "origin", "https://github.com/acme/beta.git")
    tid = a.add_to(
        "team",
        "Alpha builds with Bazel",
        "The alpha repository builds with Bazel.",
        "--scope",
        "project",
        "--project",
        str(project),
    )
    assert "alpha: github.com/acme/alpha" in (a.team / "projects.yaml").read_text()
    assert "scope: alpha" in (a.team / "note" / "alpha-builds-with-bazel.md").read_text()
    assert not (a.kb / "projects.yaml").exists()  # the team's map, not the personal one
    query = "how does the alpha repository build"
    assert tid in a.hits(query, "--project", str(project))
    assert tid not in a.hits(query, "--project", str(other))
    assert tid in a.hits(query, "--scope", "all")
    # dedup inside the project sees the team's entry from the personal KB too
    code, dup = a.cli(
        "add",
        "--title",
        "Alpha builds with Bazel",
        "--body",
        "The alpha repository builds with Bazel.",
        "--scope",
        "project",
        "--project",
        str(project),
        check=False,
    )
    assert code == 2 and dup["status"] == "duplicate" and dup["duplicate_of"] == tid


def test_the_registry_refuses_a_malformed_file_with_the_fix(tmp_path):
    from memory_agent.kb.kbs import Registry

    (tmp_path / "kbs.json").write_text("{not json")
    with pytest.raises(Exception) as caught:
        Registry(tmp_path).others()
    assert getattr(caught.value, "code", None) == "config" and "kb add" in caught.value.fix


def test_the_browser_shows_and_filters_by_kb_and_a_team_entrys_history(homes, shared_cache):
    from urllib.parse import quote, urlencode

    from tests.memory_agent.ui_server import UI, request

    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    tid = a.add_to("team", "Backups are tested monthly", "A restore from backup is tested monthly.")
    a.add("Backups at home", "My NAS backs up to a USB disk every Sunday.")
    ui = UI(a.path, shared_cache)
    try:
        cookie = {"Cookie": f"memory_agent_ui={ui.token}"}
        _, _, page = request(ui.base + "/search?q=backup+restore&source=kb", headers=cookie)
        assert "Backups are tested monthly" in page and "Backups at home" in page
        assert "kb team" in page  # the team hit is marked with its KB
        _, _, only = request(ui.base + "/search?q=backup+restore&source=kb&kb=team", headers=cookie)
        assert "Backups are tested monthly" in only and "Backups at home" not in only
        _, _, listing = request(ui.base + "/entries?source=kb:team", headers=cookie)
        assert "Backups are tested monthly" in listing and "Backups at home" not in listing
        status, _, entry = request(ui.base + f"/entry?id={quote(tid)}", headers=cookie)
        assert status == 200 and "kb team" in entry
        assert "memory: add backups-are-tested-monthly" in entry  # the team KB's git history
        # the add form picks the KB
        _, _, form = request(ui.base + "/add", headers=cookie)
        assert '<option value="personal"' in form and '<option value="team"' in form
        csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
        post = {
            "csrf": csrf,
            "title": "Restores take an hour",
            "type": "fact",
            "kb": "team",
            "body": "A full restore of the main database takes about an hour.",
        }
        status, _, done = request(
            ui.base + "/entry/add",
            method="POST",
            data=urlencode(post).encode(),
            headers={**cookie, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert status == 200 and "Created" in done and "team:restores-take-an-hour" in done
        assert (a.team / "fact" / "restores-take-an-hour.md").is_file()
        assert not (a.kb / "fact" / "restores-take-an-hour.md").exists()
    finally:
        assert ui.stop() == 0


def test_the_daemons_own_rounds_carry_a_team_write_to_the_other_home(homes):
    import time

    from memory_agent.client import DaemonClient

    a, b, remote = homes
    a.cli("kb", "add", "team", str(remote))
    b.cli("kb", "add", "team", str(remote))
    for home in (a, b):
        (home.path / "config.toml").write_text('embedder = "minilm"\nsync_interval = 1\n')
        DaemonClient(home.path).stop(wait=True)  # the next daemon reads the interval
    new = a.add_to("team", "The staging proxy port", "The staging proxy listens on port 8443.")
    deadline = time.monotonic() + 90  # alice pushes 5 s after the write; bob pulls each second
    while time.monotonic() < deadline and new not in b.hits("staging proxy port"):
        time.sleep(1)
    assert new in b.hits("which port does the staging proxy use")  # no `sync` was run
    assert "memory: add the-staging-proxy-port" in git(remote, "log", "--format=%s", "main")


def test_a_team_write_cut_by_a_crash_is_finished_in_the_team_kb(homes):
    import sys

    from memory_agent.client import DaemonClient
    from tests.memory_agent.mcp_helpers import env_for

    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    DaemonClient(a.path).stop(wait=True)  # the next one starts with the fault set
    before = git(a.team, "rev-parse", "HEAD").strip()
    personal = git(a.kb, "rev-parse", "HEAD").strip()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_agent",
            "add",
            "--kb",
            "team",
            "--title",
            "Written as the daemon died",
            "--body",
            "The daemon died after writing this file.",
            "--home",
            str(a.path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env_for(
            a.path,
            a.cache,
            MEMORY_AGENT_CLOCK="2026-11-30T09:00:00Z",
            MEMORY_AGENT_FAULT="after-write",
        ),
    )
    assert proc.returncode == 2 and "stopped answering" in proc.stdout
    assert git(a.team, "rev-parse", "HEAD").strip() == before  # written, not committed
    pending = a.path / "run" / "kbs" / "team" / "pending"
    assert len(list(pending.glob("*.json"))) == 1  # the team KB's own redo log
    nxt = a.add_to("team", "Another team entry", "Written after the crash.")
    assert not list(pending.glob("*.json"))
    log = git(a.team, "log", "--format=%s", f"{before}..HEAD").split("\n")
    assert log[:2] == [
        f"memory: add {nxt.split(':', 1)[1]}",
        "memory: add written-as-the-daemon-died (recovered)",
    ]
    assert git(a.kb, "rev-parse", "HEAD").strip() == personal  # nothing in the personal KB
    assert "team:written-as-the-daemon-died" in a.hits("what did the daemon write as it died")


def test_a_kb_whose_first_push_fails_is_added_and_says_why(homes, tmp_path):
    a, _, _ = homes
    locked = tmp_path / "locked.git"  # an empty remote that refuses every push
    subprocess.run(["git", "init", "-q", "--bare", str(locked)], check=True)
    hook = locked / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are closed' >&2\nexit 1\n")
    hook.chmod(0o755)
    _, added = a.cli("kb", "add", "team", str(locked))
    assert added["name"] == "team" and added["sync"]["error"]["code"] in ("conflict", "unavailable")
    _, listed = a.cli("kb")
    assert [k["name"] for k in listed["kbs"]] == ["personal", "team"]
    tid = a.add_to("team", "Kept locally", "This entry waits here until pushes open again.")
    assert tid in a.hits("which entry waits until pushes open")
    assert a.error("kb", "remove", "team")["code"] == "conflict"  # its commits are not pushed


def test_a_keyword_search_before_the_first_scan_covers_every_kb(homes):
    """While the model loads, a daemon answers from the lexical channel without a scan: the
    KBs it searches are then the registry's, not those of a scan that has not run yet."""
    from memory_agent import config
    from memory_agent.client import DaemonClient
    from memory_agent.index.memory import Memory
    from memory_agent.recall.reads import search

    a, _, remote = homes
    a.cli("kb", "add", "team", str(remote))
    tid = a.add_to("team", "Grafana lives on port 3000", "The team's Grafana is on port 3000.")
    DaemonClient(a.path).stop(wait=True)
    memory = Memory(config.load({"home": str(a.path)}), resident=True)
    try:
        hits = search(memory, "grafana port", use_dense=False)["hits"]
    finally:
        memory.close()
    assert [h["id"] for h in hits][:1] == [tid] and hits[0]["kb"] == "team"


def test_a_team_clone_deleted_by_hand_leaves_status_and_the_other_kbs_sync_working(homes):
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
    subject = git(moved, "log", "-1", "--no-show-signature", "--format=%s", "kept-by-hand")
    assert subject.strip() == "by hand"
