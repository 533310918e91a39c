"""The `openai` embedder end to end: `memory-agent init --embedder openai`, then the real daemon
and proxy (subprocesses) adding and searching through a stand-in OpenAI-compatible server on
127.0.0.1 that embeds with real MiniLM (`minilm_endpoint`, tests/memory_agent/conftest.py).
The API key lives in the environment only; the index never mixes two models; a server that
is down leaves search on the lexical channel, saying why."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from memory_agent.client import DaemonClient
from ragcore import EmbeddingCache
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids, env_for

KEY = "sk-endpoint-test-7d41c0e9b25a"
OPENAI = {"MEMORY_AGENT_EMBEDDER": "openai"}  # a proxy's environment (mcp_helpers says minilm)


def endpoint_env(home: Path, cache: Path, **extra: str) -> dict[str, str]:
    """The environment of a user of the openai embedder: the embedder is config.toml's."""
    env = env_for(home, cache, **extra)
    env.pop("MEMORY_AGENT_EMBEDDER")
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def init(env: dict[str, str], url: str, model: str = "all-minilm", *more: str):
    return cli(
        env,
        "init",
        "--embedder",
        "openai",
        "--embedding-url",
        url,
        "--embedding-model",
        model,
        *more,
    )


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def structured(result: dict) -> dict:
    assert not result.get("isError"), result
    return result["structuredContent"]


def every_byte_under(home: Path) -> list[tuple[str, bytes]]:
    """Every file under `home` as stored, and as it reads uncompressed: git's loose objects
    (zlib), gzipped journals, and every object git holds (packed ones too)."""
    out = []
    for path in sorted(home.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        out.append((str(path), data))
        for unpack in (zlib.decompress, gzip.decompress):
            try:
                out.append((f"{path} (unpacked)", unpack(data)))
            except Exception:  # noqa: BLE001, S112 - not that kind of file
                continue
    objects = subprocess.run(
        ["git", "-C", str(home / "kb"), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert objects  # the KB's commits, trees and blobs
    out.append(("git objects", objects))
    return out


def test_init_add_search_through_the_endpoint_and_the_key_is_written_nowhere(
    home, shared_cache, minilm_endpoint
):
    server = minilm_endpoint
    server.key = KEY
    env = endpoint_env(home, shared_cache, MEMORY_AGENT_EMBEDDING_API_KEY=KEY)
    outputs = []
    made = init(env, server.url, "all-minilm", "--demo")
    outputs += [made.stdout, made.stderr]
    assert made.returncode == 0, made.stderr
    port = server.url.split(":")[2].split("/")[0]
    model_id = f"openai:127.0.0.1:{port}/all-minilm/dim384"
    assert f"the endpoint answered: model id {model_id}" in made.stdout
    assert "79 entries, consistent" in made.stdout  # the demo KB, embedded by the server
    config = (home / "config.toml").read_text()
    assert f'embedding_url = "{server.url}"' in config
    assert 'embedding_model = "all-minilm"' in config and 'embedder = "openai"' in config

    s = ProxySession(home, shared_cache, **OPENAI, MEMORY_AGENT_EMBEDDING_API_KEY=KEY)
    try:
        s.initialize()
        before = len(server.requests)
        added = structured(
            s.call(
                "memory_add",
                title="The nightly export job writes parquet files to the cold bucket",
                body="Every night at 02:00 UTC the export job dumps the orders table as "
                "parquet into s3://acme-cold/exports; files older than 90 days are deleted.",
                type="fact",
            )
        )
        assert added["status"] == "created"
        assert len(server.requests) > before  # its chunks were embedded by the server
        before = len(server.requests)
        found = structured(s.call("memory_search", query="where do the nightly dumps go"))
        assert "degraded" not in found
        assert found["hits"][0]["id"] == added["id"]
        assert len(server.requests) == before + 1  # the query, embedded by the server
        status = structured(s.call("memory_index_status"))
        assert status["embedder"] == model_id and status["consistent"]
        assert status["embedding_url"] == server.url
        assert status["embedding_model"] == "all-minilm"
        outputs.append(json.dumps([added, found, status]))
    finally:
        outputs.append(s.close())
    shown = cli(env, "status")
    outputs += [shown.stdout, shown.stderr]
    assert f"embedding endpoint {server.url}, model all-minilm" in shown.stdout
    searched = cli(env, "search", "parquet export", "--json")
    outputs += [searched.stdout, searched.stderr]
    assert searched.returncode == 0, searched.stderr
    health = DaemonClient(home).health()
    assert health["embedding_endpoint"] == {"url": server.url, "model": "all-minilm"}
    outputs.append(json.dumps(health))
    assert server.requests and all(r["key_ok"] for r in server.requests)  # sent every time
    stopped = cli(env, "stop")
    assert stopped.returncode == 0

    secret = KEY.encode()
    leaks = [name for name, data in every_byte_under(home) if secret in data]
    assert leaks == []
    assert all(KEY not in text for text in outputs)
    assert (home / "run" / "daemon.log").stat().st_size > 0  # a log was written, without it


def test_init_without_the_url_or_the_model_is_refused_and_writes_nothing(
    home, shared_cache, minilm_endpoint
):
    env = endpoint_env(home, shared_cache)
    for args in (
        ["--embedding-model", "all-minilm"],
        ["--embedding-url", minilm_endpoint.url],
        [],
    ):
        refused = cli(env, "init", "--embedder", "openai", *args)
        assert refused.returncode == 2, refused.stderr
        assert "invalid: init --embedder openai: no --embedding-" in refused.stderr
        assert "fix: memory-agent init --embedder openai --embedding-url" in refused.stderr
        assert not home.exists()
    assert minilm_endpoint.requests == []


@pytest.mark.parametrize("failure", ["unreachable", "wrong key", "unknown model"])
def test_a_failed_switch_changes_nothing(home, shared_cache, minilm_endpoint, failure):
    env = endpoint_env(home, shared_cache, MEMORY_AGENT_EMBEDDER="minilm")
    made = cli(env, "init", "--embedder", "minilm", "--no-index")
    assert made.returncode == 0, made.stderr
    before = (home / "config.toml").read_bytes()
    files = sorted(p for p in home.rglob("*"))
    url, model = minilm_endpoint.url, "all-minilm"
    env = endpoint_env(home, shared_cache)
    if failure == "unreachable":
        url = "http://127.0.0.1:9/v1"  # discard: nothing listens
    elif failure == "wrong key":
        minilm_endpoint.key = KEY
        env["MEMORY_AGENT_EMBEDDING_API_KEY"] = KEY + "-revoked"
    else:
        model = "nomic-embed-text"
    switched = init(env, url, model)
    assert switched.returncode == 2, switched.stderr
    first, fix = switched.stderr.strip().splitlines()[:2]
    assert first.startswith("memory-agent init: model: embedding endpoint ")
    assert f"{url}/embeddings" in first
    expected = {
        "unreachable": "not reachable after 1 attempt(s)",
        "wrong key": "HTTP 401: the server refused the API key",
        "unknown model": "HTTP 404: model 'nomic-embed-text' not found",
    }[failure]
    assert expected in first and fix.startswith("  fix: ")
    assert KEY not in switched.stderr
    assert (home / "config.toml").read_bytes() == before
    assert sorted(p for p in home.rglob("*")) == files  # nothing written anywhere


def test_an_endpoint_down_at_daemon_start_leaves_search_lexical_and_degraded(
    home, shared_cache, minilm_model
):
    from benchmarks.embedding_server import EmbeddingServer

    server = EmbeddingServer(minilm_model)
    url = server.start()
    env = endpoint_env(home, shared_cache)
    made = init(env, url, "all-minilm", "--demo")
    assert made.returncode == 0, made.stderr
    assert cli(env, "stop").returncode == 0
    port = server.httpd.server_address[1]
    server.stop()  # the server goes away while no daemon runs

    s = ProxySession(home, shared_cache, **OPENAI)
    try:
        s.initialize()
        found = structured(s.call("memory_search", query="jieba 词典加载 kctl 启动慢"))
        assert found["degraded"].startswith("embedding model not answering: lexical channel only")
        assert f"{url}/embeddings" in found["degraded"]
        assert "ConnectionRefusedError" in found["degraded"] and "fix: " in found["degraded"]
        assert found["hits"][0]["id"] == "jieba-dictionary-load-slows-cli"  # by its keywords
        health = DaemonClient(home).health()
        assert health["model"] == "failed" and "not reachable" in health["model_error"]
        status = structured(s.call("memory_index_status"))
        assert status["degraded"].startswith("model not answering (embedding endpoint ")
        refused = s.call("memory_add", title="A write needs its vectors", body="It waits.")
        assert refused["isError"]
        error = refused["structuredContent"]["error"]
        assert error["code"] == "not_ready" and url in error["message"]
        assert "asks it again" in error["fix"]

        again = EmbeddingServer(minilm_model, port=port)  # the server is back, same address
        again.start()
        try:
            deadline = time.monotonic() + 60  # the daemon asks again 10 s after the failure
            while "degraded" in found and time.monotonic() < deadline:
                time.sleep(0.5)
                found = structured(s.call("memory_search", query="jieba 词典加载 kctl 启动慢"))
            assert "degraded" not in found, found.get("degraded")
            assert again.requests  # the query went to the server
            assert DaemonClient(home).health()["model"] == "ready"
        finally:
            again.stop()
    finally:
        s.close()


def test_a_changed_model_name_asks_for_a_rebuild_and_never_mixes(
    home, shared_cache, minilm_endpoint
):
    server = minilm_endpoint
    env = endpoint_env(home, shared_cache)
    assert init(env, server.url, "all-minilm", "--demo").returncode == 0
    health = DaemonClient(home).health()
    port = server.url.split(":")[2].split("/")[0]
    old_id = f"openai:127.0.0.1:{port}/all-minilm/dim384"
    new_id = f"openai:127.0.0.1:{port}/minilm-2/dim384"
    head = subprocess.run(
        ["git", "-C", str(home / "kb"), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout

    switched = init(env, server.url, "minilm-2")  # the same server, another model name
    assert switched.returncode == 0, switched.stderr
    assert f"stopped the daemon (pid {health['pid']})" in switched.stdout  # it served the old
    assert f"model id {new_id}" in switched.stdout
    assert "INCONSISTENT" in switched.stdout and "fix: memory-agent rebuild" in switched.stdout
    assert f"built with embedder {old_id}" in switched.stdout

    searched = cli(env, "search", "release process")
    assert searched.returncode == 2
    assert f"built with embedder {old_id}" in searched.stderr and new_id in searched.stderr
    assert "rebuild" in searched.stderr
    added = cli(env, "add", "--title", "Vectors of two models never meet", "--body", "x")
    assert added.returncode == 2 and "rebuild" in added.stderr  # refused before any write
    after = subprocess.run(
        ["git", "-C", str(home / "kb"), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    assert after == head

    rebuilt = cli(env, "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    status = json.loads(cli(env, "status", "--json").stdout)
    assert status["embedder"] == new_id and status["consistent"] and status["entries"] == 79
    store = EmbeddingCache(shared_cache)  # it keeps the two models' vectors apart
    try:
        assert store.count(old_id) >= 79 and store.count(new_id) >= 79
    finally:
        store.close()


def test_an_endpoint_that_goes_away_while_the_daemon_runs(home, shared_cache, minilm_model):
    from benchmarks.embedding_server import EmbeddingServer

    server = EmbeddingServer(minilm_model)
    url = server.start()
    port = server.httpd.server_address[1]
    env = endpoint_env(home, shared_cache)
    assert init(env, url, "all-minilm", "--demo").returncode == 0
    s = ProxySession(home, shared_cache, **OPENAI)
    try:
        s.initialize()
        query = "jieba 词典加载 kctl 启动慢"
        assert "degraded" not in structured(s.call("memory_search", query=query))
        server.stop()
        t = time.monotonic()
        found = structured(s.call("memory_search", query=query))  # it retried, then gave up
        assert found["degraded"].startswith("embedding model not answering")
        assert "not reachable after 4 attempt(s)" in found["degraded"]
        assert found["hits"][0]["id"] == "jieba-dictionary-load-slows-cli"
        assert time.monotonic() - t < 10  # 0.5 + 1 + 2 s of backoff
        t = time.monotonic()
        found = structured(s.call("memory_search", query=query))
        assert "degraded" in found and time.monotonic() - t < 2  # no retries per search now
        assert DaemonClient(home).health()["model"] == "failed"
        again = EmbeddingServer(minilm_model, port=port)
        again.start()
        try:
            deadline = time.monotonic() + 60
            while "degraded" in found and time.monotonic() < deadline:
                time.sleep(0.5)
                found = structured(s.call("memory_search", query=query))
            assert "degraded" not in found and again.requests
        finally:
            again.stop()
    finally:
        s.close()
