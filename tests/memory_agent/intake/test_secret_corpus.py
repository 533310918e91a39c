"""The corpus of secret shapes (experiments/secrets/corpus.py: AWS credentials CSVs and key pairs,
PyPI, Vault, Docker Hub, SendGrid, age, Twilio, Shopify, DigitalOcean, Databricks, Telegram,
GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Google, npm, Hugging Face, JWTs, a GCP
service-account JSON, private keys, a `.env` dump, credentialed URLs - each plain,
base64-wrapped and split across lines) through every way in: capture (the real hook command),
`memory-agent import` (the real CLI and daemon), `memory_add` (the real gateway) and the push
check (a real `Syncer`, a bare remote). Nothing of any of them is stored, committed or pushed.
(Issues 32 and 33.)"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.intake.secrets import SecretFound
from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.intake.journal_hooks import hook, journal_of
from tests.memory_agent.mcp_helpers import ROOT, daemon_pids, env_for, serve_home
from tests.memory_agent.stored_secrets import stored
from tests.memory_agent.sync.remotes import kb_with_remote, note
from tests.memory_agent.two_homes import CLOCK


def load_corpus():
    spec = importlib.util.spec_from_file_location(
        "secret_corpus", ROOT / "experiments" / "secrets" / "corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


corpus = load_corpus()
CASES = [
    (f"{shape.name} ({variant})", text, secrets)
    for shape in corpus.secret_shapes(random.Random(7))
    for variant, text, secrets in corpus.variants(shape)
]
EVERY_SECRET = tuple(s for _, _, secrets in CASES for s in secrets)


def test_the_corpus_holds_every_shape_plain_wrapped_and_split():
    names = {name for name, _, _ in CASES}
    for shape in ("aws console credentials.csv", "token pypi", "token vault", "token docker-hub",
                  "token sendgrid", "token age", "token twilio", "token shopify",
                  "token digitalocean", "token databricks", "telegram bot token",
                  "gcp service-account json", "token slack-bot", "token stripe-live",
                  "token jwt", "openssh private key", ".env dump", "credentialed url"):  # fmt: skip
        for variant in ("plain", "base64", "split"):
            assert f"{shape} ({variant})" in names


def test_capture_stores_none_of_them(capture_home):
    for i, (name, text, _) in enumerate(CASES):
        payload = {"session_id": "corpus", "cwd": "/tmp", "prompt": f"{name}:\n{text}"}
        proc = hook(capture_home, "prompt", json.dumps(payload).encode())
        assert proc.returncode == 0, (i, proc.stderr)
    assert len(journal_of(capture_home, "corpus")) == len(CASES)
    assert corpus.leaked(stored(capture_home), EVERY_SECRET) == []


def test_memory_add_stores_none_of_them(memory, gateway):
    head = head_of(memory.kb_dir)
    for name, text, _ in CASES:
        with pytest.raises(SecretFound):
            gateway.add(f"Corpus {name}", text, type="note")
    assert head_of(memory.kb_dir) == head
    assert corpus.leaked(stored(memory.home), EVERY_SECRET) == []


def test_the_push_check_pushes_none_of_them(tmp_path):
    kb, remote, syncer = kb_with_remote(tmp_path)
    for i, (name, text, _) in enumerate(CASES):
        note(kb, "corpus", text)
        commit(kb, f"corpus {i}: {name}")
        with pytest.raises(SecretFound):
            syncer.run()
        git(kb, "reset", "-q", "--hard", "HEAD~1")
    assert corpus.leaked(git(remote, "log", "--all", "-p"), EVERY_SECRET) == []


@pytest.fixture
def served(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    serve_home(home, shared_cache, monkeypatch, CLOCK)
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def test_import_stores_none_of_them(served, shared_cache, tmp_path):
    doc = tmp_path / "docs" / "NOTES.md"
    doc.parent.mkdir()
    doc.write_text("# Notes\n\n" + "".join(f"## {n}\n\n{t}\n\n" for n, t, _ in CASES))
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "import", str(doc), "--confirm"]
        + ["--home", str(served), "--json"],
        capture_output=True,
        text=True,
        env=env_for(served, shared_cache, MEMORY_AGENT_CLOCK=CLOCK),
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done["status"] == "imported" and done["counts"]["new"] > len(CASES) // 2
    assert corpus.leaked(stored(served), EVERY_SECRET) == []
    history = git(served / "kb", "log", "-p", "--all", "--format=%B")
    assert corpus.leaked(history, EVERY_SECRET) == []
