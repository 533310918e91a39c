"""The KB's git index as a KB grows (issue 30): a commit of exactly the touched paths reads the
index twice, not four times (the tree check is `git diff` of two trees, which reads no index),
and still takes `git commit --only` beside staged work or unmerged paths; a large KB gets git's split
index unless a person has set `core.splitIndex`; a path git would quote (non-ASCII, spaces)
still goes by plumbing. Real repositories in tmp dirs; the size threshold is lowered so a few
files count as large."""

from __future__ import annotations

from pathlib import Path

import pytest

import memory_agent.kb.gitrepo as gitrepo
from memory_agent.faults import Faults
from memory_agent.kb.gitrepo import KBRepo
from tests.memory_agent.kb.git_by_hand import git


def _entry(kb: Path, name: str) -> Path:
    path = kb / "note" / f"{name}.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"---\nid: x\ntitle: {name}\n---\nText of {name}.\n")
    return path


def _shared_indexes(kb: Path) -> list[Path]:
    return sorted((kb / ".git").glob("sharedindex.*"))


def test_a_large_kb_gets_the_split_index_and_its_commits_stay_exact(tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    repo.commit_paths([_entry(kb, f"old-{i}") for i in range(5)], "five entries")
    assert not repo.split_index_if_large()  # a few hundred bytes of index: whole
    assert _shared_indexes(kb) == []

    monkeypatch.setattr(gitrepo, "SPLIT_INDEX_ABOVE", 100)
    assert repo.split_index_if_large()
    assert git(kb, "config", "--get", "core.splitIndex").strip() == "true"
    assert len(_shared_indexes(kb)) == 1
    assert not repo.split_index_if_large()  # set now: left as it is

    (kb / "left-by-a-person.md").write_text("a person's file, not the memory's\n")
    commit = repo.commit_paths([_entry(kb, "new")], "a new entry")
    assert commit == repo.head()
    assert git(kb, "show", "--name-only", "--format=", commit).split() == ["note/new.md"]
    assert git(kb, "status", "--porcelain").splitlines() == ["?? left-by-a-person.md"]
    assert len(git(kb, "ls-files").split()) == 6


def test_a_persons_split_index_setting_stands(tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    repo.commit_paths([_entry(kb, "one")], "one")
    git(kb, "config", "core.splitIndex", "false")
    monkeypatch.setattr(gitrepo, "SPLIT_INDEX_ABOVE", 100)
    assert not repo.split_index_if_large()
    assert _shared_indexes(kb) == []
    assert git(kb, "config", "--get", "core.splitIndex").strip() == "false"


def test_a_held_index_lock_leaves_the_index_whole_and_raises_nothing(tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    repo.commit_paths([_entry(kb, "one")], "one")
    (kb / ".git" / "index.lock").write_text("")
    monkeypatch.setattr(gitrepo, "SPLIT_INDEX_ABOVE", 100)
    assert not KBRepo(kb, lock_wait=0.2).split_index_if_large()
    assert _shared_indexes(kb) == []


@pytest.mark.parametrize("name", ["café notes", "tab\there"])
def test_a_path_git_would_quote_is_committed_by_plumbing(tmp_path, name):
    kb = tmp_path / "kb"
    KBRepo.init(kb)
    run = tmp_path / "run"
    run.mkdir()
    (run / "fault-continue").touch()  # the pause point marks that it was reached, then goes on
    repo = KBRepo(kb, faults=Faults("pause-commit", run))
    commit = repo.commit_paths([_entry(kb, name)], "quoted")
    assert (run / "fault-pause-commit").exists()  # the plumbing path, not `git commit --only`
    assert git(kb, "show", "-z", "--name-only", "--format=", commit).strip("\0") == (
        f"note/{name}.md"
    )
    assert git(kb, "status", "--porcelain").strip() == ""


def test_a_commit_beside_staged_work_records_its_paths_alone(tmp_path):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    (kb / "draft.md").write_text("a person's staged draft\n")
    git(kb, "add", "draft.md")
    commit = repo.commit_paths([_entry(kb, "entry")], "an entry")
    assert git(kb, "show", "--name-only", "--format=", commit).split() == ["note/entry.md"]
    assert git(kb, "diff", "--cached", "--name-only").split() == ["draft.md"]


def test_unmerged_paths_elsewhere_leave_the_commit_to_git_commit_only(tmp_path):
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    blob = git(kb, "hash-object", "-w", "--stdin", input_text="one side\n").strip()
    other = git(kb, "hash-object", "-w", "--stdin", input_text="other side\n").strip()
    git(
        kb,
        "update-index",
        "--index-info",
        input_text=f"100644 {blob} 2\tclash.md\n100644 {other} 3\tclash.md\n",
    )
    commit = repo.commit_paths([_entry(kb, "entry")], "an entry")  # write-tree cannot: unmerged
    assert commit == repo.head()
    assert git(kb, "show", "--name-only", "--format=", commit).split() == ["note/entry.md"]
    assert git(kb, "ls-files", "--unmerged").count("clash.md") == 2  # the person's, kept


def test_a_commits_new_tree_is_written_without_compression(tmp_path):
    """A folder's tree is written whole at every commit and is mostly hashes: zlib costs time
    (write-tree ~2x at 100,000 entries, experiments/million/tree_write.py) for little space, so a commit's objects go loose
    uncompressed (`core.looseCompression=0`) and the upkeep packs them later."""
    kb = tmp_path / "kb"
    repo, _ = KBRepo.init(kb)
    repo.commit_paths([_entry(kb, f"entry-{i:04d}") for i in range(500)], "a folder")
    commit = repo.commit_paths([_entry(kb, "one-more")], "one more")
    tree = git(kb, "rev-parse", f"{commit}:note").strip()
    raw = int(git(kb, "cat-file", "-s", tree))  # 500 names of ~15 letters: zlib would halve it
    loose = kb / ".git" / "objects" / tree[:2] / tree[2:]
    assert loose.stat().st_size >= raw
    assert git(kb, "show", "--name-only", "--format=", commit).split() == ["note/one-more.md"]
