"""`/health` answers at once from what is there: it makes neither the model nor the index, so a
daemon whose embedder cannot even be made still answers, and it says how dense search runs
(`serve.health`, `Memory.dense_state`)."""

import pytest

from memory_agent import config
from memory_agent.index.memory import Memory
from memory_agent.serve.service import Service
from ragcore import EmbedderError


@pytest.fixture
def service(memory):
    memory.resident = True  # as in the daemon: the index stays open between calls
    service = Service(memory)
    yield service
    service.events.close()


def test_health_says_the_dense_search_of_a_small_index_is_the_exact_scan(service):
    service.model.wait()  # loaded and repaired
    assert service.health()["model_loaded"] is True
    assert service.health()["query_graph"] == "int8"  # MiniLM's queries, the default (ADR 0027)
    service.search(query="how do I run the tests")  # the search opens it
    health = service.health()
    assert health["status"] == "ok" and health["dense"] == "exact"  # far below 50k chunks
    assert health["rebuilding"] is False and health["generation"] == "gen-000001"


def test_health_answers_when_the_embedder_cannot_be_made_and_makes_no_index(tmp_path):
    memory = Memory(config.load({"home": str(tmp_path / "home"), "embedder": "no-such-model"}))
    service = Service(memory)
    try:
        health = service.health()
        assert health["status"] == "ok" and health["embedder"] == "no-such-model"
        assert health["dense"] == "closed" and health["generation"] is None
        assert health["query_graph"] is None  # no model made
        with pytest.raises(EmbedderError, match="unknown embedder"):
            _ = memory.index  # what health would have met had it made the index
        assert service.health()["dense"] == "closed"
    finally:
        service.events.close()
        memory.close()
