"""The gateway, the only write path: one file in one commit, duplicates written nowhere (a forced
write past a near-duplicate says so in its commit), invalid entries and path tricks refused,
supersede and archive previewed then written (with the timestamps the preview showed), unrelated
dirty files left alone, files edited outside the tool picked up, read-only corpora. (Regression
tests from issues 9 and 18.)"""

import json
import os
from pathlib import Path

import pytest

from memory_agent.clock import Clock
from memory_agent.errors import Conflict, Invalid, NotFound, ReadOnly
from memory_agent.recall import reads
from memory_agent.write.dedup import DEDUP_THRESHOLDS
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import git, make_memory
from tests.memory_agent.pinned_home import CLOCK

BODY = (
    "The CI runners have two cores. Run the test suite with `pytest -n 2` at most; "
    "more workers make the embedding tests time out."
)


def _ids(reply):
    return [h["id"] for h in reply["hits"]]


def test_add_writes_one_file_in_one_commit_and_search_finds_it(memory, gateway):
    before = int(git(memory.kb_dir, "rev-list", "--count", "HEAD"))
    reply = gateway.add("CI runners have two cores", BODY, type="fact", tags=["ci", "testing"])
    assert reply["status"] == "created" and reply["id"] == "ci-runners-have-two-cores"
    path = Path(reply["path"])
    assert path == memory.kb_dir / "fact" / "ci-runners-have-two-cores.md" and path.is_file()
    assert int(git(memory.kb_dir, "rev-list", "--count", "HEAD")) == before + 1
    assert git(memory.kb_dir, "show", "--name-only", "--format=", "HEAD").split() == [
        "fact/ci-runners-have-two-cores.md"
    ]
    assert reply["commit"] == git(memory.kb_dir, "rev-parse", "HEAD").strip()
    assert reply["generation"] == memory.index.current()
    assert _ids(reads.search(memory, "how many pytest workers on CI", limit=3))[0] == reply["id"]
    got = reads.get(memory, reply["id"])
    assert got["body"] == BODY and got["tags"] == ["ci", "testing"] and got["writable"]


def test_exact_and_near_duplicates_write_nothing(memory, gateway):
    first = gateway.add("CI runners have two cores", BODY, type="fact")
    files = sorted(memory.kb_dir.rglob("*.md"))
    head = git(memory.kb_dir, "rev-parse", "HEAD")
    exact = gateway.add("CI runners have two cores", BODY.replace("  ", " ") + "\n", type="fact")
    assert exact == {
        "status": "duplicate",
        "id": first["id"],
        "duplicate_of": first["id"],
        "score": 1.0,
        "match": "exact",
        "next": f"{first['id']} says exactly this already: nothing to add; to change it, "
        f"memory_supersede {first['id']}",
    }
    near = gateway.add(
        "The CI runners have 2 cores",
        "CI runners have two cores. Run the tests with `pytest -n 2` at most; "
        "more workers make embedding tests time out.",
        type="fact",
    )
    assert near["status"] == "duplicate" and near["duplicate_of"] == first["id"]
    assert near["match"] == "near" and near["score"] >= DEDUP_THRESHOLDS["minilm"]
    assert sorted(memory.kb_dir.rglob("*.md")) == files
    assert git(memory.kb_dir, "rev-parse", "HEAD") == head


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"title": "", "body": "x"}, "title: missing"),
        ({"title": "T", "body": "   "}, "body: empty"),
        ({"title": "T", "body": "b", "type": "idea"}, "type: 'idea' is not a type"),
        ({"title": "T", "body": "b", "tags": ["has space"]}, "tags:"),
        ({"title": "line one\nline two", "body": "b"}, "title: contains control characters"),
    ],
)
def test_invalid_entries_are_refused_and_nothing_is_written(memory, gateway, kwargs, message):
    head = git(memory.kb_dir, "rev-parse", "HEAD")
    with pytest.raises(Invalid, match=message):
        gateway.add(**kwargs)
    assert git(memory.kb_dir, "rev-parse", "HEAD") == head
    assert git(memory.kb_dir, "status", "--porcelain") == ""


def test_path_tricks_never_leave_the_kb(memory, gateway):
    reply = gateway.add("../../../etc/cron.d/evil", "An entry whose title looks like a path.")
    assert reply["id"] == "etc-cron-d-evil"
    assert Path(reply["path"]).resolve().is_relative_to(memory.kb_dir.resolve())
    for bad in ("../config", "/etc/passwd", "note/../../x"):
        with pytest.raises(NotFound):
            gateway.archive(bad, "no", confirm=True)


def test_supersede_previews_then_writes_both_files_in_one_commit(memory, gateway):
    old = gateway.add(
        "Lock dependencies with pip-tools", "Run pip-compile to lock.", type="decision"
    )
    head = git(memory.kb_dir, "rev-parse", "HEAD")
    preview = gateway.supersede(
        old["id"], "Lock dependencies with uv", "Run `uv lock`; it is 10x faster than pip-compile."
    )
    assert preview["status"] == "preview" and preview["old_id"] == old["id"]
    texts = list(preview["preview"].values())
    assert f"supersedes:\n- {old['id']}" in texts[0] or f"supersedes: [{old['id']}]" in texts[0]
    assert "status: superseded" in texts[1] and f"superseded_by: {preview['id']}" in texts[1]
    assert git(memory.kb_dir, "rev-parse", "HEAD") == head  # nothing written
    done = gateway.supersede(
        old["id"],
        "Lock dependencies with uv",
        "Run `uv lock`; it is 10x faster than pip-compile.",
        confirm=True,
    )
    assert done["status"] == "superseded" and done["id"] == preview["id"]
    changed = git(memory.kb_dir, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(changed) == sorted([f"decision/{old['id']}.md", f"decision/{done['id']}.md"])
    assert reads.get(memory, old["id"])["status"] == "superseded"
    assert reads.get(memory, done["id"])["supersedes"] == [old["id"]]
    found = _ids(reads.search(memory, "how do we lock dependencies", limit=10))
    assert done["id"] in found and old["id"] not in found
    with pytest.raises(Conflict, match=f"already superseded by {done['id']}"):
        gateway.supersede(old["id"], "Another", "text", confirm=True)


def test_archive_previews_then_retires_the_entry_which_stays_on_disk(memory, gateway):
    added = gateway.add(
        "Staging database is on port 5433", "psql -p 5433 for staging.", type="fact"
    )
    preview = gateway.archive(added["id"], "staging was shut down")
    assert preview["status"] == "preview" and reads.get(memory, added["id"])["status"] == "active"
    done = gateway.archive(added["id"], "staging was shut down", confirm=True)
    assert done["status"] == "archived" and Path(done["path"]).is_file()
    got = reads.get(memory, added["id"])
    assert got["status"] == "archived" and got["archive_reason"] == "staging was shut down"
    assert added["id"] not in _ids(reads.search(memory, "staging database port", limit=10))
    assert added["id"] in _ids(
        reads.search(memory, "staging database port", limit=10, include_archived=True)
    )
    with pytest.raises(Conflict, match="already archived"):
        gateway.archive(added["id"], "again", confirm=True)


def test_unknown_ids_are_refused_with_a_hint(gateway):
    with pytest.raises(NotFound, match="no entry with id 'no-such-entry'") as refused:
        gateway.supersede("no-such-entry", "t", "b", confirm=True)
    assert "memory_search" in refused.value.fix


def test_a_retried_request_id_returns_the_first_reply(memory, gateway):
    first = gateway.add("Retry me", "Body of the retried entry.", request_id="req-1")
    again = gateway.add("Retry me", "Body of the retried entry.", request_id="req-1")
    assert again == first
    assert len(list(memory.kb_dir.rglob("retry-me*.md"))) == 1


def test_an_unrelated_dirty_file_is_neither_committed_nor_changed(memory, gateway):
    dirty = memory.kb_dir / "note" / "draft-by-hand.md"
    dirty.parent.mkdir(exist_ok=True)
    dirty.write_text("half-written, not valid frontmatter")
    tracked = next(memory.kb_dir.glob("fact/*.md"))
    original = tracked.read_text()
    tracked.write_text(original + "\nEdited in an editor, not saved to git yet.\n")
    gateway.add("Something new", "A new entry while the user has dirty files.")
    assert dirty.read_text() == "half-written, not valid frontmatter"
    status = git(memory.kb_dir, "status", "--porcelain")
    assert (
        "?? note/draft-by-hand.md" in status
        and f" M {tracked.relative_to(memory.kb_dir)}" in status
    )
    assert "draft-by-hand" not in git(memory.kb_dir, "log", "--name-only", "--format=")


def test_files_added_or_edited_outside_the_tool_are_picked_up_without_a_rebuild(memory):
    generation = memory.index.generation or memory.status()["generation"]
    new = memory.kb_dir / "fact" / "printer-queue.md"
    new.write_text(
        "---\nid: printer-queue\ntitle: The third-floor printer queue is hp-floor3\n"
        "type: fact\nstatus: active\ncreated: 2026-11-01T10:00:00Z\n---\n"
        "Install the PPD driver from the intranet, then print to hp-floor3.\n"
    )
    reply = reads.search(memory, "which printer queue on the third floor", limit=3)
    assert _ids(reply)[0] == "printer-queue" and reply["generation"] == generation
    new.write_text(new.read_text().replace("hp-floor3.", "hp-floor3 (duplex by default)."))
    hit = reads.search(memory, "duplex printing third floor", limit=1)["hits"][0]
    assert hit["id"] == "printer-queue" and "duplex" in hit["snippet"]
    broken = memory.kb_dir / "note" / "broken.md"
    broken.parent.mkdir(exist_ok=True)
    broken.write_text("---\nid: broken\ntitle: [unclosed\n---\nbody")
    status = memory.status()
    assert status["consistent"] and status["generation"] == generation
    kb = next(s for s in status["sources"] if s["label"] == "kb")
    assert any("broken.md" in p and "not valid YAML" in p for p in kb["problems"])


def test_read_only_corpora_are_searchable_refused_for_writes_and_kept_when_missing(
    env_home, minilm_model, tmp_path
):
    repo = tmp_path / "agent-infra"
    (repo / "docs" / "adr").mkdir(parents=True)
    (repo / "README.md").write_text("# Agent infra\n\nDeploys the agents with Terraform.\n")
    (repo / "docs" / "adr" / "0007-vector-store.md").write_text(
        "# ADR 7: Qdrant as the vector store\n\nWe chose Qdrant local mode for the index.\n"
    )
    (repo / "node_modules" / "x").mkdir(parents=True)
    (repo / "node_modules" / "x" / "README.md").write_text("# vendored, never indexed")
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    (env_home / "repos.json").write_text(json.dumps([{"label": "agent-infra", "path": str(repo)}]))
    hits = reads.search(memory, "which vector store did we choose", limit=3)["hits"]
    assert hits[0]["id"] == "agent-infra/docs/adr/0007-vector-store.md"
    assert hits[0]["writable"] is False and hits[0]["source"] == "agent-infra"
    assert reads.get(memory, "agent-infra/README.md")["writable"] is False
    gateway = Gateway(memory)
    with pytest.raises(ReadOnly, match="read-only corpus 'agent-infra'"):
        gateway.archive("agent-infra/README.md", "old", confirm=True)
    with pytest.raises(ReadOnly):
        gateway.supersede("agent-infra/README.md", "t", "b", confirm=True)
    status = memory.status()
    source = next(s for s in status["sources"] if s["label"] == "agent-infra")
    assert source == {
        "label": "agent-infra",
        "entries": 2,
        "writable": False,
        "available": True,
        "path": str(repo),
    }
    repo.rename(tmp_path / "moved-away")
    status = memory.status()
    source = next(s for s in status["sources"] if s["label"] == "agent-infra")
    assert source["available"] is False and source["entries"] == 2
    assert "missing or unreadable" in source["problems"][0]
    assert status["consistent"] and status["entries"] == 2
    ids = _ids(reads.search(memory, "which vector store did we choose", limit=3))
    assert ids[0] == "agent-infra/docs/adr/0007-vector-store.md"


def test_indented_code_survives_add_and_archive_byte_for_byte(memory, gateway):
    body = "Use this helper:\n\n```python\ndef f(x):\n    if x:\n        return  1\n```\n\n- a\n  - nested"
    added = gateway.add("Helper with an indented code block", body, type="guideline")
    assert reads.get(memory, added["id"])["body"] == body
    gateway.archive(added["id"], "replaced by a library call", confirm=True)
    text = Path(added["path"]).read_text()
    assert "    if x:\n        return  1" in text and "  - nested" in text


def test_two_files_with_the_same_id_are_reported_not_indexed_twice(memory):
    twin = memory.kb_dir / "note" / "use-uv-for-locking.md"
    twin.parent.mkdir(exist_ok=True)
    twin.write_text(
        (memory.kb_dir / "decision" / "use-uv-for-locking.md")
        .read_text()
        .replace("type: decision", "type: note")
    )
    status = memory.status()
    kb = next(s for s in status["sources"] if s["label"] == "kb")
    assert any("already used by decision/use-uv-for-locking.md" in p for p in kb["problems"])
    assert status["consistent"]


def test_corpus_ids_serve_only_the_markdown_a_scan_would_read(env_home, minilm_model, tmp_path):
    repo = tmp_path / "proj"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[remote] url = secret")
    (repo / ".env").write_text("TOKEN=secret")
    (repo / "README.md").write_text("# Proj\n\nHow to build.")
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    (env_home / "repos.json").write_text(json.dumps([{"label": "proj", "path": str(repo)}]))
    assert reads.get(memory, "proj/README.md")["writable"] is False
    for sneaky in ("proj/.env", "proj/.git/config", "proj/../proj/README.md"):
        with pytest.raises(NotFound):
            reads.get(memory, sneaky)
    assert memory.status()["entries"] == 1
    (env_home / "repos.json").write_text("[]")  # the corpus is removed from the list
    assert memory.status()["entries"] == 0
    assert reads.search(memory, "how to build", limit=5)["hits"] == []


def test_corpus_files_are_re_read_only_when_their_stat_changes(env_home, minilm_model, tmp_path):
    repo = tmp_path / "proj"
    repo.mkdir()
    doc = repo / "runbook.md"
    doc.write_text("# Runbook\n\nRestart the ingest worker with kctl ingest restart.\n")
    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(embedder="minilm")
    (env_home / "repos.json").write_text(json.dumps([{"label": "proj", "path": str(repo)}]))
    memory.require_home()
    memory.start_watching()  # as the daemon does
    assert (
        reads.search(memory, "restart the ingest worker", limit=1)["hits"][0]["id"]
        == "proj/runbook.md"
    )
    st = doc.stat()
    doc.write_text(
        "# Runbook\n\nRestart the billing worker with kctl bills restart.\n"
    )  # same size
    os.utime(doc, ns=(st.st_atime_ns, st.st_mtime_ns))
    hit = reads.search(memory, "restart the ingest worker", limit=1)["hits"][0]
    assert "ingest" in hit["snippet"]  # same stat: the file was not read again
    doc.write_text(doc.read_text() + "Ask #oncall first.\n")  # the stat changes: picked up
    hit = reads.search(memory, "restart the billing worker", limit=1)["hits"][0]
    assert hit["id"] == "proj/runbook.md" and "billing" in hit["snippet"]
    memory.close()


def test_a_confirm_writes_the_timestamps_its_preview_showed(tmp_path, shared_cache, minilm_model):
    from tests.memory_agent.helpers import make_memory

    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    memory = make_memory(tmp_path / "home", minilm_model, clock=Clock(CLOCK))
    memory.init(demo=True, embedder="minilm")
    try:
        gateway = Gateway(memory)
        args = {
            "old_id": "use-uv-for-locking",
            "title": "Lock dependencies with uv 0.5",
            "body": "uv lock, then uv sync --locked in CI.",
        }
        preview = gateway.supersede(**args)
        memory.clock.fixed += 59 * 60  # the user reads the preview for a while
        written = gateway.supersede(**args, confirm=True)
        for path, text in preview["preview"].items():
            assert Path(path).read_text(encoding="utf-8") == text, path
        assert written["status"] == "superseded"

        preview = gateway.archive("branch-naming", "moved to the wiki")
        memory.clock.fixed += 59 * 60
        gateway.archive("branch-naming", "moved to the wiki", confirm=True)
        ((path, text),) = preview["preview"].items()
        assert Path(path).read_text(encoding="utf-8") == text
    finally:
        memory.close()


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
