"""A write that fails is rolled back at once and says so: a stale `index.lock`, a commit that fails
after staging (both files restored). Nothing of the failed write is committed later. (Issue 9; each
test failed before its fix, e8baefb.)"""

import pytest

from memory_agent.errors import WriteFailed
from tests.memory_agent.helpers import git
from tests.memory_agent.write.demo_entries import UV, _head


def test_a_stale_index_lock_rolls_the_write_back_now_and_says_so(memory, gateway):
    lock = memory.kb_dir / ".git" / "index.lock"
    lock.write_text("")
    head = _head(memory)
    with pytest.raises(WriteFailed) as failed:
        gateway.add("Builds are cached", "By the lockfile hash.", type="fact")
    assert failed.value.outcome == "rolled back" and "rolled back" in failed.value.message
    assert "index.lock" in failed.value.fix
    assert not (memory.kb_dir / "fact" / "builds-are-cached.md").exists()
    assert memory.pending_writes() == 0 and _head(memory) == head
    lock.unlink()
    # once the fault clears, nothing of the failed write is committed behind the user's back
    later = gateway.add("Releases are tagged", "With vX.Y.Z.", type="fact")
    assert git(memory.kb_dir, "log", "--name-only", "--format=", f"{head}..HEAD").split() == [
        "fact/releases-are-tagged.md"
    ]
    assert later["status"] == "created"


def test_a_commit_that_fails_after_staging_restores_both_files(memory, gateway, monkeypatch):
    old_text = (memory.kb_dir / UV).read_text()
    monkeypatch.setenv("GIT_COMMITTER_DATE", "not a date at all")
    with pytest.raises(WriteFailed) as failed:
        gateway.supersede(
            "use-uv-for-locking", "Lock with uv 0.5", "Pin uv 0.5 in CI.", confirm=True
        )
    assert failed.value.outcome == "rolled back"
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    assert (memory.kb_dir / UV).read_text() == old_text
    assert not (memory.kb_dir / "decision" / "lock-with-uv-0-5.md").exists()
    assert git(memory.kb_dir, "status", "--porcelain") == ""
    assert memory.pending_writes() == 0
