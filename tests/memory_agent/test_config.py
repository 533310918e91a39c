"""The settings table: an unknown key in config.toml refused with the nearest name, every setting a
module reads in the table, a setting read when it is used (the start timeout), the fault setting
read from config.toml like any other. (Issue 18, item 14.)"""

import re
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.errors import DaemonError
from tests.memory_agent.mcp_helpers import daemon_pids, env_for
from tests.memory_agent.pinned_home import CLOCK, _commits, _new_home, _stop, cli


def test_an_unknown_config_key_is_refused_with_the_nearest_name(tmp_path, shared_cache):
    home = _new_home(tmp_path / "home", shared_cache)
    toml = home / "config.toml"
    toml.write_text('embeder = "minilm"\n', encoding="utf-8")
    typo = cli(home, shared_cache, "status", timeout=120)
    assert typo.returncode == 2, typo.stderr
    assert "config:" in typo.stderr and "'embeder'" in typo.stderr
    assert "'embedder'" in typo.stderr and str(toml) in typo.stderr
    toml.write_text('embedder = "minilm"\nreranker_window = 40\n', encoding="utf-8")
    newer = cli(home, shared_cache, "status", timeout=120)
    assert newer.returncode == 2 and "'reranker_window'" in newer.stderr
    assert "newer version" in newer.stderr
    assert not daemon_pids(home)  # refused before anything started


def test_every_setting_a_module_reads_is_in_the_table():
    names = {s.name for s in config.SETTINGS}
    assert {"start_timeout", "fault"} <= names
    root = Path(__file__).resolve().parents[2] / "memory_agent"
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for env in ("MEMORY_AGENT_START_TIMEOUT", "MEMORY_AGENT_FAULT"):
            assert env not in text or path.name == "config.py", (path, env)
    # every MEMORY_AGENT_* name the package mentions is a setting of the table (the opencode
    # plugin's MEMORY_AGENT_BIN is the plugin's own variable, not one of ours; the openai
    # embedder's and the Qdrant server's API keys are on purpose no settings: the environment
    # alone holds them)
    table = {s.env for s in config.SETTINGS}
    named = {
        name
        for path in root.rglob("*.py")
        for name in re.findall(r"MEMORY_AGENT_[A-Z_]+", path.read_text(encoding="utf-8"))
    }
    keys = {config.API_KEY_ENV, config.QDRANT_API_KEY_ENV}
    assert named - table - {"MEMORY_AGENT_BIN", *keys} == set()


def test_the_start_timeout_is_read_when_a_start_happens(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    monkeypatch.setenv("MEMORY_AGENT_START_TIMEOUT", "0.5")  # after memory_agent.client's import
    started = time.monotonic()
    with pytest.raises(DaemonError, match=r"within 0\.5 s"):
        DaemonClient(home)._wait_healthy()
    assert time.monotonic() - started < 10


def test_the_fault_setting_is_read_from_config_toml_like_any_other(tmp_path, shared_cache):
    home = _new_home(tmp_path / "home", shared_cache)
    with (home / "config.toml").open("a", encoding="utf-8") as f:
        f.write('fault = "after-commit"\n')
    env = env_for(home, shared_cache, MEMORY_AGENT_CLOCK=CLOCK)
    env.pop("MEMORY_AGENT_FAULT", None)
    try:
        before = _commits(home)
        added = cli(home, shared_cache, "add", "--title", "Faulted write", "--body", "b", env=env)
        assert added.returncode != 0 and "daemon" in added.stderr, added.stderr
        assert _commits(home) == before + 1  # killed right after its commit, as the hook says
    finally:
        _stop(home)


def test_minilm_queries_run_on_the_int8_graph_unless_set_to_float(tmp_path, monkeypatch):
    """The setting reaches the embedder the daemon and `eval` make (`embedder_args`)."""
    from ragcore import make_embedder

    monkeypatch.delenv("MEMORY_AGENT_QUERY_PRECISION", raising=False)
    cfg = config.load({"home": str(tmp_path), "embedder": "minilm", "runtime": "onnx"})
    assert make_embedder(cfg.embedder, **config.embedder_args(cfg)).query_precision == "int8"
    monkeypatch.setenv("MEMORY_AGENT_QUERY_PRECISION", "float")
    cfg = config.load({"home": str(tmp_path), "embedder": "minilm", "runtime": "onnx"})
    assert make_embedder(cfg.embedder, **config.embedder_args(cfg)).query_precision == "float"


def test_a_query_precision_is_checked_when_the_settings_are_read(tmp_path, monkeypatch):
    """A typo is one clear error naming the setting and both places to set it - not a model
    that fails to load later, taking writes and lexical searches with it."""
    from memory_agent.errors import ConfigError

    monkeypatch.setenv("MEMORY_AGENT_QUERY_PRECISION", "fp32")
    with pytest.raises(ConfigError) as err:
        config.load({"home": str(tmp_path)})
    assert "MEMORY_AGENT_QUERY_PRECISION" in err.value.fix and "config.toml" in err.value.fix
    for given, read in (("INT8", "int8"), (" Float ", "float"), ("", "int8")):
        monkeypatch.setenv("MEMORY_AGENT_QUERY_PRECISION", given)
        assert config.load({"home": str(tmp_path)}).query_precision == read
