"""The default install, as a laptop gets it: a clean copy into a fresh venv, no extras, an empty
embedding cache. No torch, no CUDA, and the product works: init --demo, a search that is not
degraded, an add (docs/adr/0010)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from install import clean_copy, install  # noqa: E402


def _registry_reachable(folder: Path) -> bool:
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "-d",
            str(folder),
            "six==1.16.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return probe.returncode == 0


@pytest.mark.slow
def test_the_default_install_has_no_torch_and_serves_search_and_add(tmp_path):
    if not _registry_reachable(tmp_path / "probe"):
        pytest.skip("no package registry reachable: the clean install cannot be tried here")
    source = clean_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    report = install(venv, source)
    assert report["heavy"] == [], report  # no torch, nvidia-* or triton distribution
    home, cache = tmp_path / "home", tmp_path / "empty-cache"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMORY_AGENT_") and k != "PYTHONPATH"
    }
    env.update(
        MEMORY_AGENT_HOME=str(home),
        MEMORY_AGENT_CACHE=str(cache),
        MEMORY_AGENT_IDLE_EXIT="120",
        HOME=str(tmp_path / "user"),
    )
    bin_ = venv / "bin" / "memory-agent"

    def run(*args: str, stdin: str | None = None) -> dict:
        proc = subprocess.run(
            [str(bin_), *args, "--json"],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return json.loads(proc.stdout)

    try:
        init = run("init", "--demo")
        assert init["embedder"] == "minilm"  # the default follows the install
        assert 'embedder = "minilm"' in (home / "config.toml").read_text()
        found = run("search", "store timestamps in UTC")
        assert not found.get("degraded"), found
        assert found["hits"] and found["hits"][0]["id"] == "store-timestamps-as-utc"
        added = run(
            "add",
            "--title",
            "The laptop install has no torch",
            "--type",
            "fact",
            stdin="Installed without extras: MiniLM on ONNX Runtime, its graph built from the "
            "shipped weights.",
        )
        assert added["status"] == "created" and added["commit"]
        loaded = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import importlib.util as u; print([m for m in ('torch', 'sentence_transformers', "
                "'FlagEmbedding', 'qdrant_client') if u.find_spec(m)])",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert loaded.stdout.strip() == "[]", loaded.stderr
    finally:
        subprocess.run([str(bin_), "stop"], env=env, capture_output=True, timeout=60)
