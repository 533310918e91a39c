"""Issue 18, item 15: the suite runs on a pinned clock (tests/conftest.py), a test that sets
its own keeps it, and the memory's own times come from the Clock, never the system's."""

import json
import os
import subprocess
import sys

from memory_agent import config
from memory_agent.capture.gate import Gate, read_state
from memory_agent.clock import Clock, parse_time
from memory_agent.index.memory import Memory
from tests.conftest import PINNED_CLOCK
from tests.memory_agent.mcp_helpers import env_for

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
