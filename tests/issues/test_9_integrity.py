"""Issue 9, data integrity: the README's promises under a person's hands and an adversary's.
Each test failed on main before the fix (e8baefb)."""

import json
import os
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.clock import Clock, parse_time
from memory_agent.errors import Conflict, Invalid, WriteFailed, describe
from memory_agent.index.memory import Memory
from memory_agent.recall import reads
from memory_agent.write.gateway import Gateway
from ragcore import IndexInconsistent
from tests.memory_agent.helpers import git, make_memory

UV = "decision/use-uv-for-locking.md"


def _head(memory):
    return git(memory.kb_dir, "rev-parse", "HEAD").strip()


# 1 ------------------------------------------------------------------------------------------
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


# 2, 7 ---------------------------------------------------------------------------------------
def test_a_request_id_reused_for_other_content_is_a_conflict_naming_the_first_write(gateway):
    first = gateway.add("Deploys run on Fridays", "Only before noon.", request_id="r-1")
    assert gateway.add("Deploys run on Fridays", "Only before noon.", request_id="r-1") == first
    with pytest.raises(Conflict) as refused:
        gateway.add("Something else entirely", "Another body.", request_id="r-1")
    assert first["id"] in refused.value.message and "new request_id" in refused.value.fix
    assert not list(gateway.memory.kb_dir.rglob("something-else-entirely*.md"))


def test_replay_matches_the_tool_too(gateway):
    first = gateway.add("Deploys run on Fridays", "Only before noon.", request_id="r-2")
    with pytest.raises(Conflict, match="memory_add"):
        gateway.supersede(
            first["id"], "Deploys run on Thursdays", "Moved.", confirm=True, request_id="r-2"
        )
    with pytest.raises(Conflict):
        gateway.archive(first["id"], "gone", confirm=True, request_id="r-2")
    assert reads.get(gateway.memory, first["id"])["status"] == "active"


def test_stored_replies_expire_after_the_request_ttl(env_home, minilm_model, monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_REQUEST_TTL", "3600")
    start = parse_time("2026-03-01T09:00:00Z")
    memory = make_memory(env_home, minilm_model)
    memory.clock = Clock(start)
    memory.init(embedder="minilm")
    first = Gateway(memory).add("Deploys run on Fridays", "Only before noon.", request_id="r-3")
    memory.clock = Clock(start + 1800)  # within the hour: a retry replays
    assert Gateway(memory).add("Deploys run on Fridays", "Only before noon.", request_id="r-3") == (
        first
    )
    memory.clock = Clock(start + 7200)  # expired: the id is free for a new write
    later = Gateway(memory).add("Builds are cached", "By the lockfile hash.", request_id="r-3")
    assert later["status"] == "created" and later["id"] != first["id"]
    stored = list((memory.run_dir / "requests").glob("*.json"))
    Gateway(memory).requests.prune(force=True)
    assert len(stored) == 1  # one id, one record: the expired one was replaced


# 3 ------------------------------------------------------------------------------------------
def test_a_supersede_that_changes_nothing_is_invalid(memory, gateway):
    old = reads.get(memory, "use-uv-for-locking")
    head = _head(memory)
    with pytest.raises(Invalid, match="nothing changed"):
        gateway.supersede(old["id"], old["title"], old["body"], confirm=True)
    assert _head(memory) == head
    # a changed tag is a change
    preview = gateway.supersede(old["id"], old["title"], old["body"], tags=["python", "uv"])
    assert preview["status"] == "preview"


# 4 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"types": ["bogus"]}, "types: 'bogus' is not a type"),
        ({"limit": 0}, "limit: 0 is out of range"),
        ({"limit": -1}, "limit: -1 is out of range"),
        ({"limit": 100000}, "limit: 100000 is out of range"),
        ({"limit": True}, "limit: True is not a whole number"),
    ],
)
def test_search_filters_are_validated(memory, kwargs, words):
    with pytest.raises(Invalid) as refused:
        reads.search(memory, "how do we lock dependencies", **kwargs)
    assert words in refused.value.message


# 5 ------------------------------------------------------------------------------------------
def test_search_and_get_use_one_rule_for_corpus_files(env_home, minilm_model, tmp_path):
    repo = tmp_path / "proj"
    files = {
        "README.md": "# Readme\n\nThe gizmo service readme.",
        ".github/CONTRIBUTING.md": "# Contributing\n\nThe gizmo contribution guide.",
        "docs/guide.md": "# Guide\n\nThe gizmo user guide.",
        "docs/deep/inner.md": "# Inner\n\nThe gizmo inner notes.",
        "notes/plan.md": "# Plan\n\nThe gizmo plan.",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    (env_home / "repos.json").write_text(
        json.dumps([{"label": "proj", "path": str(repo), "include": ["docs/*.md", "README.md"]}])
    )
    found = {h["id"] for h in reads.search(memory, "gizmo", limit=20)["hits"]}
    assert found == {"proj/README.md", "proj/docs/guide.md"}
    for rel in files:
        entry_id = f"proj/{rel}"
        try:
            reads.get(memory, entry_id)
            served = True
        except Exception:
            served = False
        assert served == (entry_id in found), entry_id


# 6 ------------------------------------------------------------------------------------------
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


# 8 ------------------------------------------------------------------------------------------
def test_recovery_removes_only_the_temp_files_of_its_own_writes(memory, gateway):
    mine = memory.kb_dir / "note" / ".scratch.tmp"
    mine.parent.mkdir(exist_ok=True)
    mine.write_text("a person's file that happens to end in .tmp")
    other = memory.kb_dir / "fact" / ".environments-and-urls.md.999999.abcdef12.tmp"
    other.write_text("looks like ours, but no write of ours names it")
    gateway.add("Builds are cached", "By the lockfile hash.")
    assert mine.read_text().startswith("a person's file") and other.exists()


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


# 14 -----------------------------------------------------------------------------------------
def test_force_writes_past_a_near_duplicate_and_says_so_in_the_commit(memory, gateway):
    first = gateway.add(
        "Write after a crash with request id",
        "A retried write that carries its request id returns the first reply.",
    )
    near = gateway.add(
        "Write after a crash without request id",
        "A retried write that carries no request id may write twice.",
    )
    assert near["status"] == "duplicate" and near["match"] == "near"
    assert "force=true" in near["next"]
    forced = gateway.add(
        "Write after a crash without request id",
        "A retried write that carries no request id may write twice.",
        force=True,
    )
    assert forced["status"] == "created" and forced["forced_past"] == first["id"]
    message = git(memory.kb_dir, "log", "-1", "--format=%B")
    assert f"Forced past the near-duplicate {first['id']}" in message
    exact = gateway.add(
        "Write after a crash with request id",
        "A retried write that carries its request id returns the first reply.",
        force=True,
    )
    assert exact["status"] == "duplicate" and exact["match"] == "exact"


# 15 -----------------------------------------------------------------------------------------
def test_a_fresh_demo_home_has_nothing_dormant_whatever_the_date(tmp_path, minilm_model):
    from memory_agent.recall.gc import plan

    for when in ("2026-11-30T12:00:00Z", "2031-07-04T08:00:00Z"):
        home = tmp_path / when[:4]
        memory = Memory(config.load({"home": str(home)}), embedder=minilm_model)
        memory.clock = Clock(when)
        memory.init(demo=True, embedder="minilm")
        with memory.session():
            report = plan(memory, memory.clock())
        assert report["entries"] == 74 and report["dormant"] == [] and report["archive"] == []
        created = reads.get(memory, "use-uv-for-locking")["created"]
        age_days = (memory.clock() - parse_time(created)) / 86400
        assert 2 <= age_days <= 40
        later = memory.clock() + 200 * 86400  # the same home half a year on: things fade
        with memory.session():
            assert plan(memory, later)["dormant"] or plan(memory, later)["archive"]
        memory.close()


# 18 -----------------------------------------------------------------------------------------
def test_status_is_inconsistent_when_current_names_a_missing_generation(env_home, minilm_model):
    memory = make_memory(env_home, minilm_model, resident=True)  # as the daemon holds it
    memory.init(embedder="minilm")
    assert memory.status()["consistent"]
    (memory.cfg.index_dir / "CURRENT").write_text("gen-000042\n")
    status = memory.status()
    assert status["consistent"] is False
    assert "gen-000042" in status["problems"][0] and "missing" in status["problems"][0]
    with pytest.raises(IndexInconsistent) as refused:
        reads.search(memory, "how do we lock dependencies")
    assert "memory-agent rebuild" in describe(refused.value).fix  # the product's words


def test_a_new_home_is_owner_only(env_home, minilm_model, gateway):
    for folder in (env_home, env_home / "kb", env_home / "run", env_home / "index"):
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700", folder
    added = gateway.add("Owner only", "Entry files are written 0600.")
    assert oct(os.stat(added["path"]).st_mode & 0o777) == "0o600"
    assert Path(added["path"]).is_relative_to(env_home)
