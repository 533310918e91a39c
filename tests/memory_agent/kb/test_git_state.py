"""Git as people use it - the branch the KB writes to and git's state: a write on a detached HEAD,
in a rebase stopped at `edit`, on another branch, in a KB that is a worktree mid-rebase or mid-
merge, is refused with the way out and nothing lost; the branch is recorded at the first start; the
gate retries a lesson it could not write; a person's commit between staging and the HEAD update
finishes the write. Real git in tmp folders, the real daemon and CLI. (Issue 18; each test failed on
the code before its fix, see the comment above it.)

(`home` is kb/conftest.py's.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_agent.capture.gate import Gate, read_state
from memory_agent.capture.records import record_for
from memory_agent.client import DaemonClient
from memory_agent.errors import Conflict, RepoBusy, describe
from memory_agent.intake import journal
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.recall import reads
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import make_memory
from tests.memory_agent.kb.git_by_hand import CLOCK, add, files_of, git, refused
from tests.memory_agent.mcp_helpers import env_for


def cli(home: Path, cache: Path, *args: str, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env_for(home, cache, MEMORY_AGENT_CLOCK=CLOCK),
        timeout=180,
    )


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
