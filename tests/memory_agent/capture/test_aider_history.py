"""Aider's chat history as past sessions (issue 29): read from the markers Aider writes
(`aider_writer.AiderHistory` follows aider/io.py), then imported into the journal of the
repository that holds it."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.capture.aider_history import read_aider
from memory_agent.capture.session_sources import detect, find_sources
from memory_agent.clock import Clock
from tests.memory_agent.capture.aider_writer import AiderHistory
from tests.memory_agent.mcp_helpers import ROOT

SECRET = "ghp_AiderHistorySecretToken0123456789abcd"
LINT = """
# Fix any errors below, if possible.

## Running: flake8 --select=E9,F821,F823,F831,F406,F407,F701,F702,F704,F706 --show-source --isolated app.py

app.py:7:12: F821 undefined name 'json'

## See relevant line below marked with █.

app.py:
...⋮...
  6│def load():
  7█    return json.loads("{}")
"""


def write_history(
    path: Path, starts: tuple[str, str] = ("2026-11-20 10:00:00", "2026-11-21 09:30:00")
) -> None:
    """Two sessions as Aider logs them (started at `starts`, local time): a fix with its
    edit, a lint report and a failing test; then questions."""
    h = AiderHistory(path)
    h.started(starts[0])
    h.user_input("/add app.py")
    h.tool_output("Added app.py to the chat")
    h.user_input(f"test_app fails with NameError, fix it. The CI token is {SECRET}")
    h.ai_output(
        "The module uses `os` without importing it.\n\napp.py\n```python\n<<<<<<< SEARCH\n"
        "import sys\n=======\nimport os\nimport sys\n>>>>>>> REPLACE\n```"
    )
    h.tool_output("Applied edit to app.py")
    h.tool_output("Commit 1a2b3c4 fix: Import os in app.py")
    h.tool_warning(LINT)
    h.confirm_ask("Attempt to fix lint errors?", "yes")
    h.ai_output("Added the missing json import.")
    h.tool_output("Applied edit to app.py")
    h.user_input("/test pytest -q")
    h.tool_output("Added 14 lines of output to the chat.")
    h.user_input("/run git status")
    h.confirm_ask("Add 0.1k tokens of command output to the chat?", "no")
    h.started(starts[1])
    h.user_input("Explain how load() works\nand where it is called")
    h.ai_output("load() parses the settings file; main() calls it once.")
    h.user_input("/ask is there a cache?")
    h.ai_output("No: every call reads the file again.")


def local(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


def test_sessions_turns_and_steps_come_from_aiders_markers(tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    write_history(path)
    assert detect(path) == "aider"
    first, second = list(read_aider(path))
    assert first.session_id != second.session_id and first.cwd == str(tmp_path)
    assert [t.prompt for t in first.turns] == [
        f"test_app fails with NameError, fix it. The CI token is {SECRET}"
    ]
    turn = first.turns[0]
    steps = [
        (c.event, c.payload["tool_name"], json.dumps(c.payload["tool_input"])) for c in turn.calls
    ]
    assert steps == [
        ("tool", "Edit", '{"file_path": "app.py"}'),
        (
            "tool-failure",
            "Bash",
            json.dumps({"command": LINT.split("## Running: ")[1].split("\n")[0]}),
        ),
        ("tool", "Edit", '{"file_path": "app.py"}'),
        ("tool-failure", "Bash", '{"command": "pytest -q"}'),
        ("tool", "Bash", '{"command": "git status"}'),
    ]
    assert turn.calls[1].payload["error"] == "app.py:7:12: F821 undefined name 'json'"
    assert turn.answer == "Added the missing json import."
    assert turn.ts == local("2026-11-20 10:00:00")
    assert [t.prompt for t in second.turns] == [
        "Explain how load() works\nand where it is called",
        "is there a cache?",
    ]
    assert second.turns[1].answer == "No: every call reads the file again."
    assert second.started == local("2026-11-21 09:30:00")
    # the same file read again: the same sessions (their ids derive from the file and line)
    assert [s.session_id for s in read_aider(path)] == [first.session_id, second.session_id]


def test_a_markdown_note_is_not_a_history(tmp_path):
    note = tmp_path / "notes.md"
    note.write_text("# aider tips\n\nUse /add before asking.\n")
    assert detect(note) is None
    assert find_sources([str(tmp_path)])[0] == []


def cli(home: Path, *args: str, cwd: Path) -> dict:
    env = dict(os.environ, MEMORY_AGENT_HOME=str(home), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow
def test_the_history_is_imported_into_its_repositorys_project(home, tmp_path):
    repo = tmp_path / "shop"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@example.com:acme/shop.git"],
        check=True,
    )
    now = Clock.from_setting(os.environ.get("MEMORY_AGENT_CLOCK", "")).now()
    days_ago = [  # within the episodes' retention (90 days) whatever the memory's clock says
        dt.datetime.fromtimestamp(now - days * 86400).strftime("%Y-%m-%d %H:%M:%S")
        for days in (15, 14)
    ]
    write_history(repo / ".aider.chat.history.md", (days_ago[0], days_ago[1]))
    (repo / "CLAUDE.md").write_text("# Shop\n\n## Conventions\n\nPrices are integers in cents.\n")
    preview = cli(home, "import", str(repo), cwd=repo)
    sessions = preview["sessions"]
    assert (sessions["status"], sessions["sessions"], sessions["turns"]) == ("preview", 2, 3)
    assert sessions["projects"] == {"example.com/acme/shop": 2}
    assert sessions["secrets_redacted"] >= 1
    titles = [e["title"] for e in preview["entries"]]  # the notes beside it, as before
    assert titles == ["Conventions"]
    assert not (home / "journal").exists() or not list((home / "journal").iterdir())

    done = cli(home, "import", str(repo), "--confirm", cwd=repo)
    assert done["sessions"]["status"] == "imported" and done["sessions"]["records"] > 0
    records = [
        json.loads(line)
        for path in sorted((home / "journal").glob("aider-*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    prompts = [r for r in records if r["event"] == "prompt"]
    assert len(prompts) == 3 and all(r["project"] == "example.com/acme/shop" for r in prompts)
    assert SECRET not in json.dumps(records)
    # sessions land in files named by session id, so the redacted prompt's place is not fixed
    assert any("[REDACTED" in r["prompt"] for r in prompts)
    assert {r["client"] for r in records} == {"aider"}

    hits = cli(home, "search", "NameError fix test_app", "--episodes", cwd=repo)["hits"]
    assert any(h["id"].startswith("episodes/aider-") for h in hits)
    again = cli(home, "import", str(repo / ".aider.chat.history.md"), "--confirm", cwd=repo)
    assert again["sessions"]["status"] == "unchanged"
    assert again["sessions"]["turns_already_imported"] == 3
