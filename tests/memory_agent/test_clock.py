"""The clock: `clock.parse_time`, the one date parser, and what each of its callers makes of a bad
value; the suite's pinned clock in force here and in every process a test starts, a test that sets
its own keeping it, and the memory's own times from the Clock, never the system's (issue 18, item
15)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from memory_agent import config
from memory_agent.capture.gate import Gate, read_state
from memory_agent.clock import Clock, parse_time
from memory_agent.errors import ConfigError, Invalid
from memory_agent.index.memory import Memory
from memory_agent.kb.entries import validate
from memory_agent.recall.ranking import _ts
from memory_agent.recall.reads import as_of_cutoff
from tests.conftest import PINNED_CLOCK
from tests.memory_agent.mcp_helpers import env_for

NOON = 1796040000.0  # 2026-11-30T12:00:00Z


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-30T12:00:00Z",
        "2026-11-30T12:00:00+00:00",
        "2026-11-30T13:00:00+01:00",
        "2026-11-30T12:00:00",
        " 2026-11-30T12:00:00Z ",
        dt.datetime(2026, 11, 30, 12),
        dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC),
    ],
)
def test_a_time_is_read_with_or_without_its_offset_and_without_one_as_utc(value):
    assert parse_time(value) == NOON


def test_a_date_alone_means_its_midnight_utc():
    midnight = NOON - 12 * 3600
    assert parse_time("2026-11-30") == parse_time(dt.date(2026, 11, 30)) == midnight
    assert parse_time("2026-11-30", date_only=True) == midnight


@pytest.mark.parametrize("value", [None, "", "yesterday", "2026-13-01", 1796040000, [], True])
def test_anything_else_is_a_value_error_naming_the_form(value):
    with pytest.raises(ValueError, match=r"is not a time; use ISO 8601 such as 2026-11-30T09"):
        parse_time(value)


def test_date_only_refuses_a_time():
    with pytest.raises(ValueError, match=r"is not a date; use ISO 8601 such as 2026-11-30$"):
        parse_time("2026-11-30T12:00:00Z", date_only=True)


# -- each caller keeps its own answer to a bad value -------------------------------------------------
def test_the_clock_setting_refuses_a_bad_time(monkeypatch, tmp_path):
    from memory_agent import config

    assert Clock("2026-11-30T12:00:00Z").now() == NOON
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", "soon")
    with pytest.raises(ConfigError, match="'soon' is not a time"):
        config.load({"home": str(tmp_path)})


def test_a_ranking_signal_without_a_readable_time_is_left_out():
    assert [_ts(v) for v in (None, "", "garbage", [1])] == [None, None, None, None]
    assert _ts(NOON) == NOON and _ts(17) == 17.0  # a number is already seconds
    assert _ts("2026-11-30T12:00:00Z") == NOON


def test_an_entry_with_an_unreadable_date_is_invalid_and_a_yaml_date_is_not():
    meta = {
        "id": "x",
        "title": "X",
        "type": "fact",
        "created": "last tuesday",
        "updated": 1796040000,
        "superseded_at": dt.date(2026, 11, 30),
        "archived_at": dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC),
    }
    problems = [p for p in validate(meta, "body") if " is not a date" in p]
    assert problems == [
        "created: 'last tuesday' is not a date; use ISO 8601 like 2026-11-30T09:00:00Z",
        "updated: 1796040000 is not a date; use ISO 8601 like 2026-11-30T09:00:00Z",
    ]


def test_as_of_is_a_date_and_means_the_end_of_that_day():
    assert as_of_cutoff("2026-11-30") == NOON + 12 * 3600 - 0.001
    for bad in ("2026-11-30T12:00:00Z", "30/11/2026", "9999-12-31"):
        with pytest.raises(Invalid, match="as_of"):
            as_of_cutoff(bad)


NOW_IN_A_SUBPROCESS = (
    "from memory_agent import config; from memory_agent.clock import Clock; "
    "print(Clock.from_setting(config.load().clock).now())"
)


def test_the_pinned_clock_is_in_force_here_and_in_every_process_a_test_starts(
    pinned_clock, tmp_path, shared_cache
):
    assert pinned_clock == (os.environ.get("MEMORY_AGENT_CLOCK") or PINNED_CLOCK)
    memory = Memory(config.load({"home": str(tmp_path / "home")}))
    assert memory.clock.now() == parse_time(pinned_clock)
    out = subprocess.run(
        [sys.executable, "-c", NOW_IN_A_SUBPROCESS],
        env=env_for(tmp_path / "home", shared_cache),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert float(out) == parse_time(pinned_clock)


def test_a_test_that_sets_its_own_clock_keeps_it(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORY_AGENT_CLOCK", "2031-05-04T12:00:00Z")
    cfg = config.load({"home": str(tmp_path / "home")})
    assert Clock.from_setting(cfg.clock).now() == parse_time("2031-05-04T12:00:00Z")


def test_a_rejected_proposal_is_stamped_by_the_memorys_clock(tmp_path):
    """The gate stamped proposals and rejections with the system time (time.time())."""
    memory = Memory(config.load({"home": str(tmp_path / "home")}))
    memory.init(embedder="minilm", sync=False)
    memory.clock = Clock("2030-01-02T03:04:05Z")
    inbox = memory.home / "inbox"
    inbox.mkdir(exist_ok=True)
    proposal = {"title": "Log in before kubectl", "episodes": []}
    (inbox / "state.json").write_text(json.dumps({"proposed": {"kubectl-login": proposal}}))
    Gate(memory, gateway=None).reject("kubectl-login", "not a lesson")
    rejected = read_state(memory.home)["rejected"]["kubectl-login"]
    assert rejected["at"] == parse_time("2030-01-02T03:04:05Z")
