"""Quality through an endpoint: `memory-agent eval` on LoCoMo's dev split scores the same
nDCG@10 with the `openai` embedder, against a stand-in server on 127.0.0.1 serving MiniLM's
vectors, as with MiniLM in process on its float query graph (within 0.002: the server embeds a
query as a document, MiniLM in process as a query, and JSON carries float32 exactly). The
in-process run asks for `query_precision = float`: the endpoint has no int8 graph, and the int8
query's vectors differ by CPU (ADR 0027's addendum: on one AMD EPYC the two runs' nDCG@10 were
0.0021 apart, the CI's failure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.embedding_server import EmbeddingServer
from ragcore import CachedEmbedder, EmbeddingCache

LOCOMO = Path(__file__).resolve().parents[3].parent / "shared" / "bench" / "locomo"


def evaluate(cache: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", "eval", str(LOCOMO), "--json", "--quiet"]
        + ["--cache", str(cache), *args],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **(env or {})},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow
@pytest.mark.skipif(
    not (LOCOMO / "corpus.jsonl").is_file(),
    reason="../shared/bench is absent: the real benchmarks are not in this checkout",
)
def test_eval_through_the_endpoint_scores_as_minilm_in_process(tmp_path, minilm_model):
    in_process = evaluate(
        tmp_path / "cache", "--embedder", "minilm", env={"MEMORY_AGENT_QUERY_PRECISION": "float"}
    )
    assert in_process["query_graph"] == "float"
    # The server embeds with the same MiniLM, its documents' vectors from the cache the run
    # above filled (keyed by MiniLM's own id): the same vectors, embedded once.
    store = EmbeddingCache(tmp_path / "cache")
    server = EmbeddingServer(CachedEmbedder(minilm_model, store))
    url = server.start()
    try:
        endpoint = evaluate(
            tmp_path / "endpoint-cache",
            "--embedder",
            "openai",
            "--embedding-url",
            url,
            "--embedding-model",
            "all-minilm",
        )
    finally:
        server.stop()
        store.close()
    assert "query_graph" not in endpoint  # an endpoint has no choice of graph
    assert endpoint["docs"] == in_process["docs"] == 3435
    assert endpoint["queries"] == in_process["queries"] == 883
    assert endpoint["texts_embedded"] == 3435  # every chunk through the endpoint
    assert len(server.requests) >= 883 + 3435 // 64  # every query too, batches of 64
    print(f"nDCG@10 in process {in_process['ndcg@10']}, endpoint {endpoint['ndcg@10']}")
    assert abs(endpoint["ndcg@10"] - in_process["ndcg@10"]) <= 0.002
    assert abs(endpoint["recall@10"] - in_process["recall@10"]) <= 0.005
