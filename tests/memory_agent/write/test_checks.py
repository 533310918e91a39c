"""What a write is refused for before anything is written: a lifecycle write on a file with an
uncommitted edit or an untracked entry, a supersede that changes nothing, a type folder or an entry
file that is a symbolic link (never followed, by the scan and `memory_get` either). (Issue 9; each
test failed before its fix, e8baefb.)"""

import pytest

from memory_agent.errors import Conflict, Invalid
from memory_agent.recall import reads
from tests.memory_agent.helpers import git
from tests.memory_agent.write.demo_entries import UV, _head


@pytest.mark.parametrize("tool", ["supersede", "archive"])
def test_a_lifecycle_write_refuses_a_file_with_an_uncommitted_edit(memory, gateway, tool):
    path = memory.kb_dir / UV
    edited = path.read_text() + "\nA line written by hand, not committed.\n"
    path.write_text(edited)
    head = _head(memory)
    with pytest.raises(Conflict) as refused:
        if tool == "supersede":
            gateway.supersede("use-uv-for-locking", "Lock with uv", "New text.", confirm=True)
        else:
            gateway.archive("use-uv-for-locking", "outdated", confirm=True)
    assert f"kb/{UV}" in refused.value.message and "uncommitted" in refused.value.message
    assert "commit it" in refused.value.fix and "revert it" in refused.value.fix
    assert _head(memory) == head and path.read_text() == edited
    assert "written by hand" not in git(memory.kb_dir, "show", "HEAD:" + UV)


def test_an_untracked_entry_is_not_committed_by_a_lifecycle_write(memory, gateway):
    path = memory.kb_dir / "note" / "drafted-by-hand.md"
    path.write_text(
        "---\nid: drafted-by-hand\ntitle: Drafted by hand\ntype: note\nstatus: active\n"
        "created: 2026-01-01T00:00:00Z\n---\nNot committed yet.\n"
    )
    with pytest.raises(Conflict, match="untracked"):
        gateway.archive("drafted-by-hand", "no longer true", confirm=True)
    assert "drafted-by-hand" not in git(memory.kb_dir, "log", "--name-only", "--format=")


def test_a_supersede_that_changes_nothing_is_invalid(memory, gateway):
    old = reads.get(memory, "use-uv-for-locking")
    head = _head(memory)
    with pytest.raises(Invalid, match="nothing changed"):
        gateway.supersede(old["id"], old["title"], old["body"], confirm=True)
    assert _head(memory) == head
    # a changed tag is a change
    preview = gateway.supersede(old["id"], old["title"], old["body"], tags=["python", "uv"])
    assert preview["status"] == "preview"


def test_a_symlinked_type_folder_is_never_followed(memory, gateway, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "planted.md").write_text(
        "---\nid: planted\ntitle: Planted from outside\ntype: model\nstatus: active\n"
        "created: 2026-01-01T00:00:00Z\n---\nThis file lives outside the knowledge base.\n"
    )
    (memory.kb_dir / "model").rename(tmp_path / "model-moved")
    (memory.kb_dir / "model").symlink_to(outside)
    status = memory.status()
    kb = next(s for s in status["sources"] if s["label"] == "kb")
    assert any("model is a symbolic link" in p for p in kb["problems"])
    assert "planted" not in {h["id"] for h in reads.search(memory, "planted from outside")["hits"]}
    with pytest.raises(Invalid, match="symbolic link"):
        reads.get(memory, "planted")
    head = _head(memory)
    with pytest.raises(Invalid, match="symbolic link"):
        gateway.add("A new model entry", "Lands in the linked folder?", type="model")
    assert _head(memory) == head and sorted(p.name for p in outside.iterdir()) == ["planted.md"]


def test_a_symlinked_entry_file_is_refused_before_anything_is_written(memory, gateway):
    link = memory.kb_dir / "note" / "alias.md"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(memory.kb_dir / UV)
    before = (memory.kb_dir / UV).read_text()
    head = _head(memory)
    with pytest.raises(Invalid, match="alias.md is a symbolic link"):
        gateway.archive("alias", "through the link", confirm=True)
    with pytest.raises(Invalid, match="symbolic link"):
        reads.get(memory, "alias")
    added = gateway.add("Alias", "A new entry whose slug is taken by the link.")
    assert added["id"] == "alias-2" and link.is_symlink()
    assert (memory.kb_dir / UV).read_text() == before
    assert git(memory.kb_dir, "rev-list", "--count", f"{head}..HEAD").strip() == "1"
