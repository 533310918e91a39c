"""Every experiment script runs, on today's code, on a tiny input, so none can rot unseen.

Each `experiments/*/*.py` is run as a user runs it (`python experiments/X/Y.py ...`, a fresh
process, this checkout on PYTHONPATH) and must exit 0 and print its result. ARGS gives the
tiny input of each script this file knows (a bench folder the test writes: a handful of
documents and queries shaped like ../shared/bench's); a script it does not know is run with
`--tiny` - the convention for a new experiment: accept `--tiny` and do the smallest real run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
SCRIPTS = sorted(p.relative_to(EXPERIMENTS).as_posix() for p in EXPERIMENTS.glob("*/*.py"))
DOCS = {
    "d1": ("Caroline's dog", "Caroline adopted a dog named Biscuit in Lisbon last spring."),
    "d2": ("Ledger job", "The ledger reconciliation runs nightly at two in the morning."),
    "d3": ("Pottery", "Melanie signed up for a pottery class on Tuesday evenings."),
    "d4": ("Staging", "The staging cluster runs in eu-west-1 with Postgres 16."),
    "d5": ("Cache", "Redis 7 with Sentinel handles failover for the cache tier."),
    "d6": ("时区", "定时任务按 UTC 执行，不是北京时间。"),
}
QUERIES = [
    ("q1", "What is the name of Caroline's dog?", "single-hop", "d1"),
    ("q2", "When does the reconciliation run?", "temporal", "d2"),
    ("q3", "Which class did Melanie take?", "multi-hop", "d3"),
    ("q4", "定时任务按什么时区执行？", "single-hop", "d6"),
]
BENCHES = ("locomo", "scifact", "cmrc2018")  # the names the scripts expect under a bench root


def write_bench(folder: Path) -> None:
    folder.mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, (title, text) in DOCS.items():
            fh.write(json.dumps({"id": doc_id, "title": title, "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, query, category, _ in QUERIES:
            fh.write(json.dumps({"qid": qid, "query": query, "category": category}) + "\n")
    (folder / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, _, d in QUERIES)
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny-bench")
    for name in BENCHES:
        write_bench(root / name)
    return root


def run(script: str, *args: str, cwd: Path, cache: Path) -> str:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "PYTHONPATH": str(ROOT),
        "MEMORY_AGENT_HOME": str(cwd / "home"),
        "MEMORY_AGENT_CACHE": str(cache),
        "MEMORY_AGENT_EMBEDDER": "minilm",
        "MEMORY_AGENT_CLOCK": "2026-12-01T09:00:00Z",
    }
    proc = subprocess.run(
        [sys.executable, str(EXPERIMENTS / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{script} printed nothing:\n{proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def channel_dumps(bench, tmp_path_factory, shared_cache) -> list[Path]:
    out = tmp_path_factory.mktemp("channels")
    dumps = []
    for name in BENCHES:
        dump = out / f"{name}.json"
        env_run = subprocess.run(
            [
                sys.executable,
                str(EXPERIMENTS / "retrieval-baselines/channels.py"),
                str(bench / name),
                str(dump),
            ],
            cwd=out,
            capture_output=True,
            text=True,
            timeout=900,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(out),
                "PYTHONPATH": str(ROOT),
                "MEMORY_AGENT_CACHE": str(shared_cache),
            },
        )
        assert env_run.returncode == 0, env_run.stderr[-3000:]
        dumps.append(dump)
    return dumps


def args_for(script: str, bench: Path, dumps) -> list[str]:
    known = {
        "dedup-threshold/calibrate.py": lambda: [],  # the demo KB is its input
        "reinforcement/run.py": lambda: [],  # the demo KB and its labelled queries
        "multihop/sweep.py": lambda: [str(bench / "locomo")],
        "retrieval-baselines/ablations.py": lambda: [str(bench)],
        "retrieval-baselines/lexical_sweep.py": lambda: [str(bench / "cmrc2018")],
        "retrieval-baselines/fusion_sweep.py": lambda: [str(p) for p in dumps()],
        "scale/candidates.py": lambda: ["--sizes", "300", "--queries", "3"],
    }
    return known[script]() if script in known else ["--tiny"]


@pytest.mark.slow
@pytest.mark.parametrize("script", [s for s in SCRIPTS if s != "retrieval-baselines/channels.py"])
def test_the_experiment_runs_on_a_tiny_input(script, bench, tmp_path, shared_cache, request):
    args = args_for(script, bench, lambda: request.getfixturevalue("channel_dumps"))
    run(script, *args, cwd=tmp_path, cache=shared_cache)


@pytest.mark.slow
def test_channels_dumps_each_channels_ranking(channel_dumps):
    """channels.py crashed on `Index.bm25` (issue 18, item 16); it reads today's read model."""
    data = json.loads(channel_dumps[1].read_text())
    assert set(data["runs"]) == {q for q, *_ in QUERIES}
    for row in data["runs"].values():
        assert row["lexical"] and row["dense"]


def test_every_script_is_known_or_takes_tiny():
    """A new experiment either has its tiny input above or accepts --tiny."""
    unknown = [
        s
        for s in SCRIPTS
        if s != "retrieval-baselines/channels.py"
        and args_for(s, Path("/b"), lambda: []) == ["--tiny"]
        and "--tiny" not in (EXPERIMENTS / s).read_text(encoding="utf-8")
    ]
    assert unknown == [], "give these a tiny input in tests/test_experiments.py or --tiny"


@pytest.mark.slow
def test_the_sync_benchmark_runs_on_a_tiny_input(tmp_path, shared_cache):
    """`benchmarks/sync.py` is the command of experiments/sync's figures (issue 21): two
    homes, a bare repository and real daemons, at 50 entries."""
    out = run(
        "../benchmarks/sync.py",
        "--tiny",
        "--work",
        str(tmp_path / "work"),
        cwd=tmp_path,
        cache=shared_cache,
    )
    assert "first sync of 50 entries" in out and "found all True" in out
