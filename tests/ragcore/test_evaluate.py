import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragcore import metrics

SHARED_BENCH = Path(__file__).resolve().parents[2].parent / "shared" / "bench"


def test_metrics_match_hand_computed_values():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"z": 1}}
    run = {"q1": ["x", "a"], "q2": ["c", "y", "y2", "y3", "y4", "b"], "q3": ["x"]}
    m = metrics(qrels, run)
    assert m["recall@5"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["recall@10"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["mrr@10"] == pytest.approx((0.5 + 1 + 0) / 3)
    ndcg_q1 = (1 / math.log2(3)) / 1
    ndcg_q2 = (1 + 1 / math.log2(7)) / (1 + 1 / math.log2(3))
    assert m["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2 + 0) / 3)


def test_queries_missing_from_the_run_score_zero():
    assert metrics({"q": {"a": 1}}, {})["ndcg@10"] == 0.0


def _write_bench(path: Path) -> None:
    path.mkdir()
    docs = [
        ("d1", "Tabs or spaces", "The project indents Python with four spaces, never tabs."),
        ("d2", "Commit messages", "Write commit messages in the imperative mood."),
        ("d3", "Release process", "Tag the release, then build wheels and upload them."),
        ("d4", "数据库迁移", "每次修改表结构都必须写迁移脚本，并在预发布环境演练。"),
    ]
    with open(path / "corpus.jsonl", "w") as fh:
        for i, t, x in docs:
            fh.write(json.dumps({"id": i, "title": t, "text": x}, ensure_ascii=False) + "\n")
    queries = [
        ("q1", "how do we indent code"),
        ("q2", "how to publish a new version"),
        ("q3", "修改表结构要做什么"),
        ("q4", "unlabelled query"),
    ]
    with open(path / "queries.jsonl", "w") as fh:
        for q, t in queries:
            fh.write(json.dumps({"qid": q, "query": t}, ensure_ascii=False) + "\n")
    (path / "qrels.tsv").write_text("q1\td1\t1\nq2\td3\t1\nq3\td4\t1\n")


def _eval(bench: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, MEMORY_AGENT_CACHE=str(cache), MEMORY_AGENT_HOME=str(cache.parent / "home")
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_agent",
            "eval",
            str(bench),
            "--embedder",
            "minilm",
            "--json",
            "--quiet",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_eval_cli_prints_the_metrics_and_a_second_run_embeds_nothing(tmp_path):
    bench = tmp_path / "bench"
    _write_bench(bench)
    first = _eval(bench, tmp_path / "cache", "--run-out", str(tmp_path / "run.jsonl"))
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert set(out) >= {
        "recall@5",
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "query_p50_ms",
        "query_p95_ms",
        "index_s",
        "docs",
        "queries",
    }
    assert out["docs"] == 4 and out["queries"] == 3  # q4 has no qrels
    assert out["ndcg@10"] == 1.0
    assert out["texts_embedded"] == 4
    runs = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert {r["qid"] for r in runs} == {"q1", "q2", "q3"} and runs[0]["ranked"][0] == "d1"
    second = json.loads(_eval(bench, tmp_path / "cache").stdout)
    assert second["texts_embedded"] == 0
    assert second["ndcg@10"] == out["ndcg@10"]


def test_eval_cli_names_missing_files(tmp_path):
    (tmp_path / "empty").mkdir()
    result = _eval(tmp_path / "empty", tmp_path / "cache")
    assert result.returncode == 2
    assert "needs corpus.jsonl, queries.jsonl and qrels.tsv" in result.stderr
    assert json.loads(result.stdout)["error"]["code"] == "invalid"  # --json: the error as JSON


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED_BENCH / "cmrc2018").is_dir(),
    reason="../shared/bench is absent: the real benchmarks are not in this checkout",
)
def test_chinese_retrieval_on_a_cmrc2018_subset_beats_the_bm25_baseline(tmp_path):
    """200 CMRC 2018 paragraphs and their questions through the production path (real data;
    the full-corpus numbers are in experiments/retrieval-baselines)."""
    src = SHARED_BENCH / "cmrc2018"
    bench = tmp_path / "cmrc-subset"
    bench.mkdir()
    lines = (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:200]
    ids = {json.loads(line)["id"] for line in lines}
    (bench / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    qrels = [r for r in (src / "qrels.tsv").read_text().splitlines() if r.split("\t")[1] in ids]
    (bench / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    qids = {r.split("\t")[0] for r in qrels}
    queries = [
        q
        for q in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(q)["qid"] in qids
    ]
    (bench / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    result = _eval(bench, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["queries"] == len(qids) > 500
    assert out["ndcg@10"] >= 0.979  # BM25 baseline on the full corpus; a subset is easier
