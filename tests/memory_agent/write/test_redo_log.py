"""The gateway's redo log and its stored replies: a request id reused for other content is a
conflict naming the first write, a replay matches the tool too, stored replies expire after the
request TTL, and recovery removes only the temporary files of its own writes. (Issue 9.)"""

import pytest

from memory_agent.clock import Clock, parse_time
from memory_agent.errors import Conflict
from memory_agent.recall import reads
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import make_memory


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


def test_recovery_removes_only_the_temp_files_of_its_own_writes(memory, gateway):
    mine = memory.kb_dir / "note" / ".scratch.tmp"
    mine.parent.mkdir(exist_ok=True)
    mine.write_text("a person's file that happens to end in .tmp")
    other = memory.kb_dir / "fact" / ".environments-and-urls.md.999999.abcdef12.tmp"
    other.write_text("looks like ours, but no write of ours names it")
    gateway.add("Builds are cached", "By the lockfile hash.")
    assert mine.read_text().startswith("a person's file") and other.exists()
