"""`memory-agent import` of past sessions, on the transcripts the real CLIs wrote (issue 29).

The sessions are the ones `conftest.py` plays with Claude Code, Codex and opencode (their
hooks capturing them live into one memory home). Their own records - Claude Code's
transcripts, Codex's rollouts, opencode's database - are imported into a second, fresh home:
first the store as it was after two sessions, then the whole store. What the import writes
must be what the live hooks wrote (the same events, tools, inputs, outcomes, errors, exit
codes, prompts, answers, cwd and project; the source's times), redacted alike, idempotent,
searchable, and read by the gate like live sessions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e import harness
from tests.e2e.conftest import IDENTITY, SESSIONS

pytestmark = pytest.mark.slow

# What may differ between a live record and an imported one: when the hook ran (the import
# keeps the source's time, checked on its own), and `imported`/`from`, which only an import
# writes. opencode's plugin journals an MCP tool's result as `{}` (its `tool.execute.after`
# output carries none of title, output, metadata for an MCP tool); the database holds it.
SAME = ("event", "client", "cwd", "project", "tool", "input", "call", "ok", "error", "exit_code")
SAME += ("denied", "interrupted", "prompt", "answer", "source")


@dataclass
class Imported:
    home: Path
    early_preview: dict = field(default_factory=dict)
    early: dict = field(default_factory=dict)
    later_preview: dict = field(default_factory=dict)
    later: dict = field(default_factory=dict)
    again: dict = field(default_factory=dict)
    later_stderr: str = ""
    bytes_before_again: int = 0
    bytes_after_again: int = 0


def env_for(home: Path, cache: Path) -> dict[str, str]:
    """The pinned clock, and a retention long enough that the sessions stay searchable
    whatever day the suite runs on (the transcripts carry the day they were played)."""
    return harness.base_env(
        HOME=str(home.parent),
        MEMORY_AGENT_CLOCK=os.environ["MEMORY_AGENT_CLOCK"],
        MEMORY_AGENT_JOURNAL_RETENTION_DAYS="36500",
        **harness.memory_env(home, cache),
    )


def run(home: Path, cache: Path, *args: str, cwd: Path | None = None):
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env_for(home, cache),
        cwd=str(cwd or home.parent),
    )
    assert out.returncode == 0, f"memory-agent {args}: {out.stdout}\n{out.stderr}"
    return out


def import_json(home: Path, cache: Path, *args: str) -> tuple[dict, str]:
    out = run(home, cache, "import", *args, "--json")
    return json.loads(out.stdout)["sessions"], out.stderr


def journal_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "journal").iterdir())


@pytest.fixture(scope="module")
def imported(played, tmp_path_factory) -> Imported:
    home = tmp_path_factory.mktemp(f"{played.agent}-import") / "memory"
    harness.init_home(home, played.cache)
    harness.stop_daemon(home, played.cache)  # the next one starts with env_for's settings
    result = Imported(home)
    store = str(played.driver.sessions_store())
    early = str(played.early_store)
    cache = played.cache
    try:
        result.early_preview, _ = import_json(home, cache, early)
        result.early, _ = import_json(home, cache, early, "--confirm")
        result.later_preview, _ = import_json(home, cache, store)
        result.later, result.later_stderr = import_json(home, cache, store, "--confirm")
        result.bytes_before_again = journal_bytes(home)
        result.again, _ = import_json(home, cache, store, "--confirm")
        result.bytes_after_again = journal_bytes(home)
        yield result
    finally:
        harness.stop_daemon(home, cache)


def records_of(home: Path, session: str) -> list[dict]:
    return harness.sessions(home).get(session, [])


def test_the_preview_writes_nothing_and_says_what_it_would(played, imported):
    preview = imported.early_preview
    assert preview["status"] == "preview"
    assert (preview["sessions"], preview["turns"]) == (2, 2)
    assert preview["formats"] == {played.agent: 2}
    assert preview["projects"] == {IDENTITY: 2}
    # the prompt's token, the command's --password, the file's "password" at least, each
    assert preview["secrets_redacted"] >= 3 * 2
    live = [r["ts"] for n in range(2) for r in played.journal(n) if r["event"] == "prompt"]
    assert abs(harness_time(preview["first"]) - min(live)) < 10
    assert preview["last"] is not None and preview["first"] <= preview["last"]
    # the confirm then wrote exactly what the preview announced
    for key in ("sessions", "turns", "records", "secrets_redacted", "projects"):
        assert imported.early[key] == preview[key], key
    assert imported.early["status"] == "imported"


def harness_time(text: str) -> float:
    from memory_agent.clock import parse_time

    return parse_time(text)


def test_imported_records_are_what_the_hooks_wrote(played, imported):
    for n in range(SESSIONS):
        sid = played.session_ids[n]
        live = [r for r in played.journal(n) if r["event"] != "end"]  # no end in a transcript
        got = records_of(imported.home, sid)
        assert [r["event"] for r in got] == [r["event"] for r in live], sid
        for a, b in zip(live, got, strict=True):
            for key in SAME:
                assert a.get(key) == b.get(key), (key, a, b)
            mcp = "memory" in str(a.get("tool")) and played.agent == "opencode"
            if a["event"] == "tool" and not mcp:
                assert a.get("output") == b.get("output"), (a, b)
        assert {r["imported"] for r in got} == {0}  # one turn per session, turn index 0
        assert [r["project"] for r in got if r["event"] == "prompt"] == [IDENTITY]


def test_times_are_the_sources(played, imported):
    """Each imported record has the time the agent recorded, not the import's: within a few
    seconds of the live hook that ran at that moment."""
    for n in range(SESSIONS):
        live = [r for r in played.journal(n) if r["event"] != "end"]
        got = records_of(imported.home, played.session_ids[n])
        for a, b in zip(live, got, strict=True):
            assert abs(a["ts"] - b["ts"]) < 10, (a["event"], a["ts"], b["ts"])
        assert [r["ts"] for r in got] == sorted(r["ts"] for r in got)


def test_a_session_added_later_is_picked_up(played, imported):
    preview = imported.later_preview
    assert (preview["sessions"], preview["turns"]) == (1, 1)
    assert preview["turns_already_imported"] == 2
    assert (imported.later["sessions"], imported.later["turns"]) == (1, 1)
    assert set(harness.sessions(imported.home)) == set(played.session_ids)


def test_importing_again_writes_nothing(imported):
    again = imported.again
    assert again["status"] == "unchanged" and again["turns"] == 0 and again["records"] == 0
    assert again["turns_already_imported"] == SESSIONS
    assert imported.bytes_after_again == imported.bytes_before_again


def test_progress_bar_on_stderr(imported):
    assert "reading sessions [" in imported.later_stderr and "100%" in imported.later_stderr


def test_no_secret_under_the_imported_home(imported):
    assert harness.files_holding(imported.home, harness.SECRETS) == []


def test_the_gate_proposes_from_imported_sessions(played, imported):
    """Three failure -> fix episodes in three imported sessions: the gate (propose, the
    default) puts a lesson in the inbox, from the imported sessions' episodes."""
    assert len(imported.later["gate"]["proposed"]) + len(imported.early["gate"]["proposed"]) >= 1
    props = json.loads(run(imported.home, played.cache, "proposals", "--json").stdout)
    assert props["proposals"], props
    episodes = json.dumps(props["proposals"])
    assert any(sid in episodes for sid in played.session_ids), episodes[:2000]


def test_imported_episodes_are_searchable_in_their_project(played, imported):
    out = run(
        imported.home,
        played.cache,
        "search",
        "config.json not found check.py",
        "--episodes",
        "--json",
        cwd=played.project,
    )
    hits = [h["id"] for h in json.loads(out.stdout)["hits"]]
    assert any(h.startswith("episodes/") and h.split("/")[1] in played.session_ids for h in hits)


def test_since_and_project_restrict_what_is_read(played, imported):
    store = str(played.driver.sessions_store())
    # --since just before the third session's first turn as its transcript times it (a hook's
    # clock runs ahead of the transcript's by the hook's own latency, and whole seconds cut
    # 1.3 s apart sessions in the wrong place)
    import datetime as dt

    from memory_agent.capture.session_sources import find_sources, read_source

    sources, _ = find_sources([store])
    started = {s.session_id: s.started for src in sources for s in read_source(src)}
    third = started[played.session_ids[2]]
    when = dt.datetime.fromtimestamp(third - 0.001, dt.UTC).isoformat()
    since, _ = import_json(imported.home, played.cache, store, "--since", when)
    assert since["sessions_before_since"] == 2
    other, _ = import_json(imported.home, played.cache, store, "--project", "example.com/x/y")
    assert other["sessions_of_other_projects"] == SESSIONS
    same, _ = import_json(imported.home, played.cache, store, "--project", str(played.project))
    assert same["sessions_of_other_projects"] == 0
    assert same["turns_already_imported"] == SESSIONS


def test_a_large_folder_is_streamed(played, tmp_path):
    """Forty copies of each real transcript (each under a session id of its own) are read one
    session at a time: the memory the preview holds at its peak stays far below the folder."""
    if played.agent == "opencode":
        pytest.skip("opencode's store is one database, read one session at a time by query")
    import tracemalloc

    from memory_agent.capture.session_import import import_sessions
    from memory_agent.capture.session_sources import find_sources

    folder = tmp_path / "many"
    folder.mkdir()
    originals = sorted(played.driver.sessions_store().rglob("*.jsonl"))
    for copy in range(40):
        for path in originals:
            text = path.read_text()
            for sid in played.session_ids:
                text = text.replace(sid, f"{sid[:-4]}{copy:04d}")
            name = path.name
            for sid in played.session_ids:
                name = name.replace(sid, f"{sid[:-4]}{copy:04d}")
            (folder / name).write_text(text)
    sources, _ = find_sources([str(folder)])
    total = sum(s.size for s in sources)
    tracemalloc.start()
    try:
        report = import_sessions(sources, tmp_path / "journal", confirm=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.sessions == 40 * SESSIONS and report.errors == []
    assert total > 5_000_000 and peak < total / 5, (total, peak)


def test_the_sessions_benchmark_scores_real_transcripts(played, tmp_path):
    """`benchmarks/sessions.py` on the three sessions the CLI wrote: the second and third
    sessions hit the failure the first resolved and edit the file it edited, so both rules
    judge their prompts; every system's share is a share, and the gate proposed the lesson."""
    out = subprocess.run(
        [
            sys.executable,
            str(harness.ROOT / "benchmarks" / "sessions.py"),
            str(played.driver.sessions_store()),
            "--work",
            str(tmp_path / "work"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, PYTHONPATH=str(harness.ROOT), MEMORY_AGENT_CACHE=str(played.cache)),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert (result["sessions"], result["prompts_replayed"]) == (SESSIONS, SESSIONS)
    assert result["judged_prompts"]["failure"] == 2 and result["judged_prompts"]["files"] == 2
    overall = result["scores"]["overall"]
    assert overall["prompts"] == 2
    for system in ("injection", "search@8", "recency", "bm25@6", "bm25@8"):
        assert 0.0 <= overall[system] <= 1.0
    assert result["replay"]["errors"] == {}
    assert result["lessons"]["proposed"] >= 1
