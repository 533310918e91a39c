"""The `openai` embedder's settings: the URL and model in the settings table (the environment
overrides config.toml), the API key from the environment only (never a setting, refused in
config.toml), and the errors' fixes in this product's words."""

from __future__ import annotations

import pytest

from memory_agent import config
from memory_agent.errors import ConfigError, describe
from ragcore import EndpointError

KEY = "sk-settings-test-0b7e41d2"


@pytest.fixture
def home(tmp_path, monkeypatch):
    for s in config.SETTINGS:
        monkeypatch.delenv(s.env, raising=False)
    monkeypatch.delenv(config.API_KEY_ENV, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_the_url_and_model_come_from_config_toml_and_the_environment_overrides(home, monkeypatch):
    (home / "config.toml").write_text(
        'embedder = "openai"\nembedding_url = "http://localhost:11434/v1"\n'
        'embedding_model = "nomic-embed-text"\n'
    )
    cfg = config.load({"home": str(home)})
    assert (cfg.embedding_url, cfg.embedding_model) == (
        "http://localhost:11434/v1",
        "nomic-embed-text",
    )
    assert config.endpoint_of(cfg) == {"url": cfg.embedding_url, "model": cfg.embedding_model}
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDING_MODEL", "mxbai-embed-large")
    monkeypatch.setenv("MEMORY_AGENT_EMBEDDING_BATCH_SIZE", "16")
    monkeypatch.setenv(config.API_KEY_ENV, KEY)
    cfg = config.load({"home": str(home)})
    options = config.embedder_args(cfg)["options"]
    assert options == {
        "url": "http://localhost:11434/v1",
        "model": "mxbai-embed-large",
        "api_key": KEY,  # from the environment, handed to the embedder only
        "batch_size": 16,
        "timeout": 30.0,
    }
    assert KEY not in repr(cfg.values)  # not a setting: no copy of it in the config


def test_the_other_embedders_get_no_endpoint_options(home):
    cfg = config.load({"home": str(home), "embedder": "minilm"})
    assert config.embedder_args(cfg)["options"] == {"query_precision": "int8"}  # MiniLM's own
    assert config.endpoint_of(cfg) is None


def test_the_api_key_is_no_setting_and_config_toml_holding_one_is_refused(home):
    assert config.API_KEY_ENV not in {s.env for s in config.SETTINGS}
    (home / "config.toml").write_text(f'embedder = "openai"\nembedding_api_key = "{KEY}"\n')
    with pytest.raises(ConfigError) as err:
        config.load({"home": str(home)})
    said = err.value.message + err.value.fix
    assert "'embedding_api_key' is not a setting" in said and config.API_KEY_ENV in said
    assert KEY not in said


def test_an_endpoint_error_gets_the_products_fix_by_kind():
    down = EndpointError(
        "embedding endpoint http://h:1/v1/embeddings: down", "check", kind="unreachable", url="u"
    )
    info = describe(down)
    assert info.code == "model" and info.fix.startswith("check; the endpoint is the embedding_url")
    assert "MEMORY_AGENT_EMBEDDING_URL" in info.fix and "--embedder minilm" in info.fix
    auth = describe(EndpointError("HTTP 401", "give the key", kind="auth", url="u"))
    assert "MEMORY_AGENT_EMBEDDING_API_KEY only" in auth.fix
