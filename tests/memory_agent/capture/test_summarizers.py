"""The lesson summarizer is chosen by name: the built-in `chat`, or one a package registers under
the entry-point group `memory_agent.summarizers` - which the real gate then uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.capture.gate import Gate
from memory_agent.capture.records import record_for
from memory_agent.capture.summarizers import (
    ChatSummarizer,
    make_summarizer,
    registered_summarizers,
)
from memory_agent.errors import ConfigError
from memory_agent.intake import journal
from memory_agent.kb.entries import entry_path, read_entry
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import make_memory

TOY = '''
class Toy:
    """A third party's summarizer: a plain class, made by its factory from the settings."""

    def __init__(self, cfg):
        self.model = cfg.summarizer_model or "toy-default"

    def summarize(self, lesson):
        return f"Toy summary ({self.model}): `{lesson.command}` needs its fix first."


class Broken:
    def __init__(self, cfg):
        pass

    def summarize(self, lesson):
        raise RuntimeError("the toy model is down")
'''


@pytest.fixture
def toy_package(tmp_path, monkeypatch):
    """As pip installs a plugin: a module and a dist-info folder with entry_points.txt on
    sys.path."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_summarizer.py").write_text(TOY)
    info = site / "toy_summarizer-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-summarizer\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[memory_agent.summarizers]\ntoy = toy_summarizer:Toy\nbroken = toy_summarizer:Broken\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def _journal_lesson(home: Path, now: float, command: str, error: str) -> None:
    """Three failure -> fix episodes of two sessions, as the hooks write them: one lesson."""

    def record(session: str, event: str, **payload) -> None:
        journal.append(home / "journal", session, record_for(event, payload, now, "claude-code"))

    for session, n in (("toy-a", 1), ("toy-a", 2), ("toy-b", 3)):
        record(session, "prompt", prompt=f"run the checks ({n})", cwd="/w")
        record(
            session,
            "tool-failure",
            tool_name="Bash",
            tool_input={"command": command},
            error=f"Exit code 1\n{error}",
        )
        record(
            session,
            "tool",
            tool_name="Edit",
            tool_input={"file_path": f"/w/{n}/setup.cfg"},
            tool_response={"stdout": "ok"},
        )
        record(
            session,
            "tool",
            tool_name="Bash",
            tool_input={"command": command},
            tool_response={"stdout": "ok"},
        )
        record(session, "stop", last_assistant_message="fixed")


def _auto_gate_writes(env_home, minilm_model, monkeypatch, summarizer: str) -> str:
    """The body of the lesson the real gate writes with `summarizer` selected by name."""
    monkeypatch.setenv("MEMORY_AGENT_GATE", "auto")
    monkeypatch.setenv("MEMORY_AGENT_SUMMARIZER", summarizer)
    monkeypatch.setenv("MEMORY_AGENT_SUMMARIZER_MODEL", "tiny-1")
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    try:
        _journal_lesson(env_home, memory.clock(), "make migrate", "error: schema lock held")
        report = Gate(memory, Gateway(memory)).run()
        (entry,) = report["promoted"]
        return read_entry(entry_path(memory.kb_dir, "pitfall", entry)).body
    finally:
        memory.close()


def test_a_package_registers_a_summarizer_by_entry_point_and_the_gate_uses_it(
    toy_package, env_home, minilm_model, monkeypatch
):
    assert registered_summarizers()["toy"] == "toy_summarizer:Toy"
    body = _auto_gate_writes(env_home, minilm_model, monkeypatch, "toy")
    assert body.startswith("Toy summary (tiny-1): `make migrate` needs its fix first.\n\n")
    assert "**Observed output.**" in body and "error: schema lock held" in body  # kept below


def test_a_summarizer_that_fails_costs_its_lesson_the_rewrite_only(
    toy_package, env_home, minilm_model, monkeypatch
):
    body = _auto_gate_writes(env_home, minilm_model, monkeypatch, "broken")
    assert body.startswith("**Observed output.**")  # the gate's own text, written all the same
    assert "Toy summary" not in body


def test_the_default_is_the_built_in_chat_summarizer(tmp_path):
    cfg = config.load({"home": str(tmp_path)})
    assert cfg.summarizer == "chat"
    summarizer = make_summarizer(cfg)
    assert isinstance(summarizer, ChatSummarizer)
    assert summarizer.summarize(None) is None  # no summarizer_url: the heuristic text


def test_an_unknown_summarizer_names_the_choices_and_how_to_add_one(tmp_path):
    cfg = config.load({"home": str(tmp_path)})
    with pytest.raises(ConfigError) as refused:
        make_summarizer(cfg, "gpt-9")
    assert "unknown summarizer 'gpt-9': choose one of chat" in refused.value.message
    assert "memory_agent.summarizers" in refused.value.fix
