"""Issue 18, "git as people use it": real git in tmp folders, the real daemon and CLI.

Each test failed on the code before the fix (see the comment above it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.capture.gate import Gate, read_state
from memory_agent.capture.records import record_for
from memory_agent.client import DaemonClient
from memory_agent.errors import Conflict, GitError, RepoBusy, ToolCallError, describe
from memory_agent.index.links import link_graph
from memory_agent.index.memory import Memory
from memory_agent.intake import journal
from memory_agent.kb.entries import MAX_LINKS_READ
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.gitrun import git_processes
from memory_agent.recall import reads
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import make_memory
from tests.memory_agent.mcp_helpers import ROOT, daemon_pids, env_for

CLOCK = "2026-12-01T12:00:00Z"


def git(kb: Path, *args: str, env: dict | None = None, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", "-C", str(kb), *args],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "u",
            "GIT_AUTHOR_EMAIL": "u@x",
            "GIT_COMMITTER_NAME": "u",
            "GIT_COMMITTER_EMAIL": "u@x",
            **(env or {}),
        },
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args}: {proc.stderr}")
    return proc.stdout


def cli(home: Path, cache: Path, *args: str, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env_for(home, cache, MEMORY_AGENT_CLOCK=CLOCK),
        timeout=180,
    )


def _stop(home: Path) -> None:
    try:
        DaemonClient(home).stop(wait=True, timeout=10)
    except Exception:
        pass
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def home(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", CLOCK)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the daemon runs this tree's code
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    yield home
    _stop(home)


def add(home: Path, title: str, body: str, **kw) -> dict:
    return DaemonClient(home).call_tool("memory_add", {"title": title, "body": body, **kw})


def refused(home: Path, title: str, body: str) -> ToolCallError:
    with pytest.raises(ToolCallError) as caught:
        add(home, title, body)
    return caught.value


def files_of(kb: Path) -> set[str]:
    return {str(p.relative_to(kb)) for p in kb.rglob("*.md") if ".git" not in p.parts}


# 1 -------------------------------------------------------------------------------------------
# Before: the add replied `created` with a commit on the detached HEAD; `git checkout <branch>`
# and the entry was gone (only the reflog held it).
def test_a_write_on_a_detached_head_is_refused_and_nothing_is_lost(home, shared_cache):
    kb = home / "kb"
    branch = git(kb, "symbolic-ref", "--short", "HEAD").strip()
    git(kb, "checkout", "-q", "--detach")
    head, files = git(kb, "rev-parse", "HEAD"), files_of(kb)
    out = cli(
        home,
        shared_cache,
        "add",
        "--title",
        "Detached writes vanish",
        "--body",
        "A write on a detached HEAD is lost at the next checkout.",
        "--json",
    )
    assert out.returncode != 0, out.stdout
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "conflict" and "detached HEAD" in error["message"]
    assert f"checkout {branch}" in error["fix"]
    assert git(kb, "rev-parse", "HEAD") == head and files_of(kb) == files
    assert git(kb, "status", "--porcelain") == ""
    assert git(kb, "config", "--get", "memory-agent.branch").strip() == branch  # from init
    git(kb, "checkout", "-q", branch)  # the fix; then the same add works and stays
    done = add(home, "Detached writes vanish", "A write on a detached HEAD is lost at checkout.")
    assert done["status"] == "created"
    git(kb, "checkout", "-q", "--detach")
    git(kb, "checkout", "-q", branch)
    assert Path(done["path"]).is_file()
    assert git(kb, "log", "-1", "--format=%H", branch).strip() == done["commit"]


# Before: the add was committed onto the rebase's detached HEAD; `git rebase --abort` lost it.
def test_a_write_in_a_rebase_stopped_at_edit_is_refused(home):
    kb = home / "kb"
    add(home, "Rebase target", "Something to rebase over.")
    head, files = git(kb, "rev-parse", "HEAD"), files_of(kb)
    git(kb, "rebase", "-i", "HEAD~1", env={"GIT_SEQUENCE_EDITOR": "sed -i 1s/pick/edit/"})
    assert (kb / ".git" / "rebase-merge").is_dir()
    error = refused(home, "Written mid-rebase", "This must not be committed during a rebase.")
    assert error.code == "conflict" and "rebase" in error.message
    assert "git rebase --abort" in error.fix and "git rebase --continue" in error.fix
    assert files_of(kb) == files
    git(kb, "rebase", "--abort")
    assert git(kb, "rev-parse", "HEAD") == head and git(kb, "status", "--porcelain") == ""


# Before: the add was committed to whatever branch was checked out.
def test_a_kb_on_another_branch_is_refused_naming_both(home):
    kb = home / "kb"
    branch = git(kb, "symbolic-ref", "--short", "HEAD").strip()
    git(kb, "checkout", "-q", "-b", "experiment")
    error = refused(
        home, "On the wrong branch", "A write here would not be on the memory's branch."
    )
    assert error.code == "conflict"
    assert "'experiment'" in error.message and f"'{branch}'" in error.message
    assert f"checkout {branch}" in error.fix and "memory-agent.branch experiment" in error.fix
    assert git(kb, "log", "-1", "--format=%s").strip().startswith("Add the demo")
    git(kb, "config", "memory-agent.branch", "experiment")  # the fix's second way
    assert add(home, "On the wrong branch", "Now the memory writes here.")["status"] == "created"


def test_a_home_made_before_the_record_takes_its_branch_at_the_first_start(home):
    kb = home / "kb"
    branch = git(kb, "symbolic-ref", "--short", "HEAD").strip()
    git(kb, "config", "--unset", "memory-agent.branch", check=False)
    DaemonClient(home).call_tool("memory_index_status", {})  # starts the daemon
    deadline = time.monotonic() + 60
    while git(kb, "config", "--get", "memory-agent.branch", check=False).strip() != branch:
        assert time.monotonic() < deadline, "the branch was not recorded at the daemon's start"
        DaemonClient(home).call_tool("memory_index_status", {})
    git(kb, "checkout", "-q", "-b", "other")
    assert refused(home, "Elsewhere", "Not on the memory's branch.").code == "conflict"


# 2, 3 ----------------------------------------------------------------------------------------
class IdeLoop:
    """What an editor does to a repository: `git status` again and again, each refreshing the
    index under `.git/index.lock` for a moment (held here for 15-40 ms, as a large repo's
    refresh does)."""

    def __init__(self, kb: Path):
        self.kb, self.stop, self.held = kb, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        lock = self.kb / ".git" / "index.lock"
        n = 0
        while not self.stop.is_set():
            n += 1
            subprocess.run(
                ["git", "-C", str(self.kb), "status", "--porcelain"], capture_output=True
            )
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            self.held += 1
            self.stop.wait(0.015 + 0.025 * (n % 2))
            os.close(fd)
            os.unlink(lock)
            self.stop.wait(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


# Before: 20-32 of 60 adds failed with write_failed (the fix said to delete index.lock), and
# their files stayed staged: `git checkout -- .` brought back entries reported as not written.
def test_sixty_adds_beside_an_editors_git_loop_are_retried_and_leave_nothing_staged(home):
    kb = home / "kb"
    add(home, "Warm the daemon", "The first add loads the model.")
    results: list[dict | ToolCallError] = []
    with IdeLoop(kb) as loop:
        for n in range(60):
            try:
                title, body = f"Editor loop entry {n}", f"Body {n}: distinct text {n * 7919}."
                results.append(add(home, title, body, force=True))  # near each other
            except ToolCallError as exc:
                results.append(exc)
    assert loop.held > 20  # the lock really was taken again and again
    failed = [r for r in results if isinstance(r, ToolCallError)]
    assert not failed, [(e.code, e.message, e.fix) for e in failed]
    assert all(r["status"] == "created" for r in results)
    assert git(kb, "status", "--porcelain") == ""
    before = files_of(kb)
    git(kb, "checkout", "--", ".")
    assert files_of(kb) == before
    assert {f"note/{r['id']}.md" for r in results} <= before


# Before: the fix said "if no git command is running there, remove that file" for any lock,
# waited for nothing, and told a stale lock from a busy one by no sign.
def test_a_stale_index_lock_is_named_stale_with_the_command_that_removes_it(home):
    kb = home / "kb"
    add(home, "Warm the daemon", "The first add loads the model.")
    lock = kb / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    files = files_of(kb)
    error = refused(home, "Blocked by a stale lock", "git died and left its lock.")
    assert error.code == "write_failed" and "rolled back, nothing changed" in error.message
    assert "stale" in error.message and "no git process" in error.message
    assert f"rm {lock}" in error.fix
    lock.unlink()
    assert files_of(kb) == files and git(kb, "status", "--porcelain") == ""
    again = add(home, "Blocked by a stale lock", "git died and left its lock.")
    assert again["status"] == "created", again


def test_a_lock_held_while_git_runs_names_the_process_and_says_wait(tmp_path):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    (kb / "note").mkdir()
    (kb / "note" / "a.md").write_text("a\n")
    holder = subprocess.Popen(
        ["git", "hash-object", "--stdin"], cwd=kb, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    lock = kb / ".git" / "index.lock"
    try:
        lock.write_text("")
        started = time.monotonic()
        with pytest.raises(GitError) as caught:
            KBRepo(kb).commit_paths([kb / "note" / "a.md"], "memory: add a")
        assert time.monotonic() - started >= 5  # it waited for the lock first (10 s)
        assert (
            f"pid {holder.pid}" in caught.value.message
            and "git hash-object" in caught.value.message
        )
        assert "wait" in caught.value.fix and "rm " not in caught.value.fix
        lock.unlink()
        assert repo.commit_paths([kb / "note" / "a.md"], "memory: add a")
    finally:
        holder.stdin.close()
        holder.wait(10)


# 4 -------------------------------------------------------------------------------------------
# Before: git's ENOSPC message names index.lock, and the error said to remove it (or, when the
# entry file could not be written, to make the folder writable).
def test_a_full_disk_is_called_a_full_disk(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    kb = home / "kb"
    kb.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(kb)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    monkeypatch.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", CLOCK)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    try:
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
        add(home, "Warm the daemon", "The first add loads the model.")
        head, files = git(kb, "rev-parse", "HEAD"), files_of(kb)
        pad = kb / ".pad"
        pad.write_bytes(b"x" * 4096)  # one page, freed below: room for the entry, not for git

        def fill_up(name: str) -> None:
            fd = os.open(kb / name, os.O_CREAT | os.O_WRONLY)
            try:
                while os.write(fd, b"x" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)

        fill_up(".fill")
        pad.unlink()
        # first there is room for the entry's file but not for git's object, then for nothing
        for step in ("git", "file"):
            if step == "file":
                fill_up(".fill-2")
            error = refused(home, f"Written to a full disk ({step})", "There is no room for this.")
            assert error.code == "write_failed" and "rolled back, nothing changed" in error.message
            assert "disk is full" in error.message, error.message
            assert ("`git update-index`" in error.message) == (step == "git"), error.message
            assert "free some space" in error.fix and "index.lock" not in error.fix
            assert files_of(kb) == files and git(kb, "rev-parse", "HEAD") == head
    finally:
        _stop(home)
        subprocess.run(["umount", "-l", str(kb)], capture_output=True)


# 5 -------------------------------------------------------------------------------------------
def _entry(entry_id: str, entry_type: str, title: str, body: str) -> str:
    return (
        f"---\nid: {entry_id}\ntitle: {title}\ntype: {entry_type}\nstatus: active\n"
        f"created: 2026-11-01T10:00:00Z\n---\n{body}\n"
    )


def _search_ids(home: Path, query: str) -> list[str]:
    reply = DaemonClient(home).call_tool("memory_search", {"query": query, "limit": 10})
    return [h["id"] for h in reply["hits"]]


def _kb_problems(home: Path) -> list[str]:
    status = DaemonClient(home).call_tool("memory_index_status", {})
    (kb,) = [s for s in status["sources"] if s["label"] == "kb"]
    return kb.get("problems", [])


def _until(check, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():  # each call is a sync: the daemon reads the kernel's change events
        assert time.monotonic() < deadline, what


def _full_rescan(home: Path) -> tuple[list[str], dict]:
    m = Memory(config.load({"home": str(home)}))
    try:
        m.scanner.full(lambda _: None, lambda: (), [])
        return m.scanner.sources({})["kb"].problems, m.scanner
    finally:
        m.close()


# Before: the change-driven scan let the copy take over the id in search; deleting the copy
# dropped the original from search while status said consistent; a removed symlink stayed in
# status; memory_get served a misplaced file as a writable entry while status rejected it.
def test_the_change_driven_scan_applies_the_full_scans_rules(home):
    kb = home / "kb"
    client = DaemonClient(home)
    add(home, "Warm the daemon", "The first add loads the model.")  # the daemon watches now
    original = kb / "decision" / "use-uv-for-locking.md"
    assert "use-uv-for-locking" in _search_ids(home, "uv lock file")
    # a copy with the same id in another type folder
    copy = kb / "note" / "use-uv-for-locking.md"
    copy.write_text(
        _entry(
            "use-uv-for-locking",
            "note",
            "Zebra quartz velvet",
            "Zebra quartz velvet marmalade harpsichord.",
        )
    )
    _until(lambda: any("already used by" in p for p in _kb_problems(home)), "no duplicate problem")
    assert client.call_tool("memory_get", {"id": "use-uv-for-locking"})["path"] == str(original)
    hits = client.call_tool("memory_search", {"query": "zebra quartz velvet marmalade"})["hits"]
    assert all(h["title"] != "Zebra quartz velvet" for h in hits)
    problems, _ = _full_rescan(home)
    assert _kb_problems(home) == problems
    copy.unlink()
    _until(lambda: not any("already used by" in p for p in _kb_problems(home)), "stale duplicate")
    assert "use-uv-for-locking" in _search_ids(home, "uv lock file")
    status = client.call_tool("memory_index_status", {})
    assert status["consistent"] and status["entries"] > 40
    # a symbolic link, added and removed
    link = kb / "note" / "linked-entry.md"
    link.symlink_to(original)
    _until(lambda: any("linked-entry.md" in p for p in _kb_problems(home)), "link not reported")
    link.unlink()
    _until(lambda: not any("linked-entry.md" in p for p in _kb_problems(home)), "link stays")
    # a file whose folder disagrees with its type
    misplaced = kb / "note" / "misplaced-decision.md"
    misplaced.write_text(
        _entry(
            "misplaced-decision",
            "decision",
            "Misplaced decision",
            "Kept in the note folder though it says decision.",
        )
    )
    _until(lambda: any("misplaced-decision" in p for p in _kb_problems(home)), "misplaced file")
    with pytest.raises(ToolCallError) as caught:
        client.call_tool("memory_get", {"id": "misplaced-decision"})
    assert "decision/misplaced-decision.md" in caught.value.message
    assert "misplaced-decision" not in _search_ids(home, "misplaced decision note folder")
    problems, _ = _full_rescan(home)
    assert _kb_problems(home) == problems


# 6 -------------------------------------------------------------------------------------------
# Before: every link of a hand-written file was read into the graph the ranking walks (5,000
# edges for one entry, all listed by an explained search).
def test_an_entry_with_five_thousand_links_is_read_only_up_to_the_bound(home):
    kb = home / "kb"
    add(home, "Warm the daemon", "The first add loads the model.")
    targets = sorted(p.stem for p in kb.rglob("*.md") if ".git" not in p.parts)
    # 5,000 links: 1,000 [[wikilinks]] in the body (its 100,000 characters allow no more of
    # these), 4,000 typed links in the frontmatter; many to existing entries, many repeated
    wikilinks = " ".join(f"[[{targets[n % len(targets)]}]] [[missing-{n}]]" for n in range(500))
    typed = ", ".join(targets[n % len(targets)] for n in range(4000))
    (kb / "note" / "hub-of-links.md").write_text(
        "---\nid: hub-of-links\ntitle: Hub of links about locking\ntype: note\nstatus: active\n"
        f"created: 2026-11-01T10:00:00Z\nlinks: {{references: [{typed}]}}\n---\n"
        f"Hub of links about locking and uv.\n\n{wikilinks}\n"
    )
    reply = DaemonClient(home).call_tool(
        "memory_search", {"query": "hub of links about locking", "explain": True, "limit": 5}
    )
    (hub,) = [h for h in reply["hits"] if h["id"] == "hub-of-links"]
    assert len(hub["why"]["edges"]) <= MAX_LINKS_READ
    m = Memory(config.load({"home": str(home)}), embedder=None)
    _stop(home)  # the index is the daemon's while it runs
    try:
        with m.session():
            graph = link_graph(m.index)
        assert len(graph["hub-of-links"]) <= MAX_LINKS_READ
        assert all(len(edges) <= len(targets) + MAX_LINKS_READ for edges in graph.values())
    finally:
        m.close()


# Review of the fixes above ---------------------------------------------------------------------
def _journal_lesson(home: Path, now: float, command: str, error: str) -> None:
    """Three failure -> fix episodes of two sessions in the journal, as the capture hooks
    write them: one lesson the gate qualifies."""
    folder = home / "journal"

    def record(session: str, event: str, **payload) -> None:
        journal.append(folder, session, record_for(event, payload, now, "claude-code"))

    for session, n in (("lesson-a", 1), ("lesson-a", 2), ("lesson-b", 3)):
        record(session, "prompt", prompt=f"run the checks ({n})", cwd="/w")
        record(
            session,
            "tool-failure",
            tool_name="Bash",
            tool_input={"command": command},
            error=f"Exit code 1\n{error}",
        )
        record(
            session,
            "tool",
            tool_name="Edit",
            tool_input={"file_path": f"/w/{n}/setup.cfg"},
            tool_response={"stdout": "ok"},
        )
        record(
            session,
            "tool",
            tool_name="Bash",
            tool_input={"command": command},
            tool_response={"stdout": "ok"},
        )
        record(session, "stop", last_assistant_message="fixed")


# Review 5. Before: the gate caught the detached HEAD's `conflict` as "this lesson cannot be
# written" and put it in `skipped` for good: after `git checkout <branch>` it was never
# promoted.
def test_the_gate_retries_a_lesson_it_could_not_write_on_a_detached_head(
    env_home, minilm_model, monkeypatch
):
    monkeypatch.setenv("MEMORY_AGENT_GATE", "auto")
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    try:
        kb = memory.kb_dir
        _journal_lesson(
            env_home, memory.clock(), "make migrate", "error: the schema lock is held by tenant 7"
        )
        gate = Gate(memory, Gateway(memory))
        branch = git(kb, "symbolic-ref", "--short", "HEAD").strip()
        head = git(kb, "rev-parse", "HEAD")
        git(kb, "checkout", "-q", "--detach")
        first = gate.run()
        assert first["promoted"] == [] and first["skipped"] == [], first
        assert len(first["failed"]) == 1  # not written yet: retried by the next run
        assert read_state(env_home)["skipped"] == {}
        assert git(kb, "rev-parse", "HEAD") == head and git(kb, "status", "--porcelain") == ""
        git(kb, "checkout", "-q", branch)
        second = gate.run()
        assert len(second["promoted"]) == 1 and second["failed"] == [], second
        (entry,) = second["promoted"]
        assert git(kb, "log", "-1", "--format=%s", branch).strip().startswith("memory: add")
        assert entry in git(kb, "show", "--name-only", "--format=", branch)
        git(kb, "checkout", "-q", "--detach")
        with pytest.raises(RepoBusy) as caught:  # the same code on the wire as before
            KBRepo(kb).check_writable()
        assert isinstance(caught.value, Conflict) and describe(caught.value).code == "conflict"
    finally:
        memory.close()


# Review 8. Before: git_processes() read /proc or nothing; with no /proc (macOS) a lock older
# than 10 s was called stale at once and the fix said `rm` it - under a `git commit` whose
# user is typing the message. A git process of another user (cwd unreadable) was skipped.
def _locked_kb(tmp_path: Path) -> tuple[Path, Path, Path]:
    kb = tmp_path / "kb"
    KBRepo.init(kb)
    (kb / "note").mkdir()
    (kb / "note" / "a.md").write_text("a\n")
    lock = kb / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 3600  # an hour old: "stale" if nobody could hold it
    os.utime(lock, (old, old))
    return kb, kb / "note" / "a.md", lock


@pytest.mark.parametrize("table", ["none", "empty", "unreadable-cwd"])
def test_a_lock_is_not_called_stale_where_the_process_table_cannot_be_read(tmp_path, table):
    kb, entry, lock = _locked_kb(tmp_path)
    proc = tmp_path / "proc"
    if table != "none":
        proc.mkdir()
    if table == "unreadable-cwd":  # this process, and a git process whose cwd is hidden
        (proc / str(os.getpid())).mkdir()
        (proc / "4242").mkdir()
        (proc / "4242" / "comm").write_text("git\n")
    assert git_processes(kb, proc) is None
    started = time.monotonic()
    with pytest.raises(GitError) as caught:
        KBRepo(kb, lock_wait=1.0, proc_root=proc).commit_paths([entry], "memory: add a")
    assert time.monotonic() - started >= 1.0  # waited for it first
    error = caught.value
    assert "cannot tell whether a git process holds it" in error.message, error.message
    assert "stale" not in error.message
    assert error.fix.startswith("wait for any git command") and "git commit" in error.fix
    # the real process table says it: no git process there, the lock is stale (no wait)
    started = time.monotonic()
    with pytest.raises(GitError) as caught:
        KBRepo(kb, lock_wait=5.0).commit_paths([entry], "memory: add a")
    assert time.monotonic() - started < 5.0
    assert "stale" in caught.value.message and f"rm {lock}" in caught.value.fix


def _worktree_kb(tmp_path: Path) -> Path:
    origin = tmp_path / "origin"  # a project's repository; the KB is a worktree of it
    origin.mkdir()
    git(origin, "init", "-q")
    git(origin, "commit", "-q", "--allow-empty", "-m", "start")
    kb = tmp_path / "kb"
    git(origin, "worktree", "add", "-q", "-b", "memory", str(kb))
    assert (kb / ".git").is_file()
    for name in ("a", "b"):
        (kb / f"{name}.md").write_text(f"{name}\n")
        git(kb, "add", f"{name}.md")
        git(kb, "commit", "-q", "-m", f"add {name}")
    return kb


# Before: for a KB whose .git is a file, the markers were looked for in <kb>/.git/: a rebase
# was reported as a detached HEAD (with the wrong way out), and a merge in progress (HEAD on
# the branch) was not seen at all - the write went through.
def test_a_kb_that_is_a_worktree_is_refused_mid_rebase_and_mid_merge(tmp_path):
    kb = _worktree_kb(tmp_path)
    git(kb, "rebase", "-i", "HEAD~1", env={"GIT_SEQUENCE_EDITOR": "sed -i 1s/pick/edit/"})
    with pytest.raises(RepoBusy) as caught:
        KBRepo(kb).check_writable()
    assert "in the middle of a rebase" in caught.value.message, caught.value.message
    assert "git rebase --abort" in caught.value.fix
    git(kb, "rebase", "--abort")
    KBRepo(kb).check_writable()  # on its branch again
    git(kb, "checkout", "-q", "-b", "other", "HEAD~1")
    (kb / "b.md").write_text("the other b\n")
    git(kb, "add", "b.md")
    git(kb, "commit", "-q", "-m", "other b")
    git(kb, "checkout", "-q", "memory")
    git(kb, "merge", "other", check=False)  # a conflict: the merge stops
    assert git(kb, "symbolic-ref", "--short", "HEAD").strip() == "memory"
    with pytest.raises(RepoBusy) as caught:
        KBRepo(kb).check_writable()
    assert "in the middle of a merge" in caught.value.message
    assert "git merge --abort" in caught.value.fix


# Review 11. Before: the paths were staged in the user's index, then HEAD moved only if it had
# not; a `git commit` in between took the entry along, our HEAD update failed, the rollback
# deleted the file and the reply said "rolled back, nothing changed" while HEAD held it.
def test_a_user_commit_between_staging_and_head_update_finishes_the_write(
    env_home, minilm_model, monkeypatch
):
    monkeypatch.setenv("MEMORY_AGENT_FAULT", "pause-commit")
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    try:
        kb, run = memory.kb_dir, memory.run_dir
        gateway = Gateway(memory)
        outcome: list = []

        def write() -> None:
            try:
                outcome.append(
                    gateway.add("Pin the resolver", "Pin the resolver in CI.", type="decision")
                )
            except Exception as exc:  # noqa: BLE001 - looked at below
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 60
        while not (run / "fault-pause-commit").exists():  # the write reached the pause point
            assert writer.is_alive() and time.monotonic() < deadline, outcome
            writer.join(0.05)
        git(kb, "commit", "-q", "-m", "the user's own commit")  # takes the staged entry along
        user_commit = git(kb, "rev-parse", "HEAD").strip()
        (run / "fault-continue").touch()
        writer.join(60)
        (reply,) = outcome
        assert isinstance(reply, dict), describe(reply)
        assert reply["status"] == "created" and reply["commit"] == user_commit
        path = Path(reply["path"])
        assert path.is_file()
        rel = str(path.relative_to(kb))
        assert git(kb, "show", f"HEAD:{rel}") == path.read_text()
        assert git(kb, "status", "--porcelain") == "" and not gateway.redo.pending()
        assert reads.get(memory, reply["id"])["title"] == "Pin the resolver"
    finally:
        memory.close()
