"""The scale benchmark's texts (benchmarks/daemon_home.py): a copy of the code away from the
checkout (a `git archive` in /tmp) finds SciFact/LoCoMo through MEMORY_AGENT_BENCH_DATA, and a
run that falls back to word salad says so on stderr (and `real_text` in its JSON says which).
A run from such a copy once measured word salad while its figures were read as real text."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = "from daemon_home import Text; t = Text(); print(t.real, len(t.sentences), t.queries[:1])"


def probe(bench: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT / "benchmarks",
        env={**os.environ, "PYTHONPATH": str(ROOT), "MEMORY_AGENT_BENCH_DATA": str(bench)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_texts_are_found_where_the_setting_says(tmp_path):
    scifact = tmp_path / "bench" / "scifact"
    scifact.mkdir(parents=True)
    text = "Stem cells divide slowly in the aged bone marrow of mice. Copper conducts heat and electricity better than most metals."
    (scifact / "corpus.jsonl").write_text(json.dumps({"text": text}) + "\n")
    (scifact / "queries.jsonl").write_text(json.dumps({"query": "do stem cells age"}) + "\n")
    run = probe(tmp_path / "bench")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[:2] == ["True", "2"]
    assert "do stem cells age" in run.stdout
    assert "word salad" not in run.stderr


def test_word_salad_is_said_on_stderr(tmp_path):
    run = probe(tmp_path / "nothing-here")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("False")
    assert "word salad" in run.stderr and "MEMORY_AGENT_BENCH_DATA" in run.stderr
