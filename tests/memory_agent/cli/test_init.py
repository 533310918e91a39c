"""`memory-agent init`: a home made or adopted (its history untouched, owner-only folders and
config), run twice harmlessly, and what it prints: hooks every agent runs synchronously, the
permission rule that allows exactly the read-only tools. (Regression tests from issues 9, 17 and
18.)"""

import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.recall import reads
from memory_agent.serve import mcp_config
from tests.memory_agent.helpers import git, make_memory
from tests.memory_agent.mcp_helpers import env_for
from tests.memory_agent.pinned_home import cli

ENTRY = (
    "---\nid: existing-note\ntitle: An entry that was here before\ntype: note\n"
    "status: active\ncreated: 2026-01-05T10:00:00Z\n---\nWritten by hand long ago.\n"
)


def test_init_adopts_an_existing_repository_without_touching_its_history(env_home, minilm_model):
    kb = env_home / "kb"
    (kb / "note").mkdir(parents=True)
    (kb / "note" / "existing-note.md").write_text(ENTRY)
    subprocess.run(["git", "init", "-q", str(kb)], check=True)
    git(kb, "add", "note/existing-note.md")
    git(kb, "-c", "user.name=me", "-c", "user.email=me@example.com", "commit", "-qm", "mine")
    head = git(kb, "rev-parse", "HEAD")
    memory = make_memory(env_home, minilm_model)
    reply = memory.init(demo=True, embedder="minilm")
    assert reply["created_repo"] is False
    assert (kb / "note" / "existing-note.md").read_text() == ENTRY
    assert git(kb, "rev-parse", "HEAD~1") == head  # the demo commit sits on top of the user's
    assert (
        reads.search(memory, "entry written by hand", limit=1)["hits"][0]["id"] == "existing-note"
    )


def test_init_twice_is_harmless(env_home, minilm_model):
    memory = make_memory(env_home, minilm_model)
    first = memory.init(demo=True, embedder="minilm")
    second = make_memory(env_home, minilm_model).init(demo=True, embedder="minilm")
    assert first["demo_entries_added"] == 79 and second["demo_entries_added"] == 0
    assert second["created_repo"] is False and second["commit"] == first["commit"]


def test_the_permission_rule_allows_exactly_the_read_only_tools():
    """The rule `init` prints and `connect` writes follows the tools' own readOnlyHint."""
    import json
    from pathlib import Path

    from memory_agent.serve import mcp_config

    tools = json.loads((Path(mcp_config.__file__).parents[1] / "tools.json").read_text())
    read_only = {t["name"] for t in tools if (t.get("annotations") or {}).get("readOnlyHint")}
    assert set(mcp_config.READ_TOOLS) == read_only
    assert set(mcp_config.WRITE_TOOLS) == {t["name"] for t in tools} - read_only
    rule = mcp_config.claude_permissions()["allow"]
    assert rule == [f"mcp__memory__{t}" for t in mcp_config.READ_TOOLS]


def test_the_hook_settings_call_the_hook_command_of_each_client(tmp_path):
    from memory_agent.serve.mcp_config import hook_settings

    for client in ("claude-code", "codex"):
        hooks = hook_settings(tmp_path, client)["hooks"]
        for blocks in hooks.values():
            [handler] = blocks[0]["hooks"]
            assert "hookrun.py" in handler["command"] and f"--client {client}" in handler["command"]
            assert "async" not in handler


# -- what init prints ------------------------------------------------------------------------------
def init_json(tmp_path, cache):
    home = tmp_path / "printed"
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "init", "--no-index", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env_for(home, cache),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_printed_capture_hook_is_synchronous_and_claude_code_gets_a_permission_rule(
    tmp_path, shared_cache
):
    reply = init_json(tmp_path, shared_cache)
    assert set(reply["mcp"]) and set(reply["hooks"])  # the shape: objects keyed by agent name
    [claude_key] = [k for k in reply["hooks"] if k.startswith("Claude Code")]
    [codex_key] = [k for k in reply["hooks"] if k.startswith("Codex")]
    claude_settings = json.loads(reply["hooks"][claude_key])
    codex_settings = json.loads(reply["hooks"][codex_key])
    for settings in (claude_settings, codex_settings):
        handlers = [h for blocks in settings["hooks"].values() for b in blocks for h in b["hooks"]]
        assert handlers and not any(h.get("async") for h in handlers)  # -p kills background hooks
        assert {"Stop", "SessionEnd", "PostToolUse"} <= set(settings["hooks"])
    assert {"PostToolUseFailure", "PermissionDenied"} <= set(claude_settings["hooks"])
    assert "PermissionDenied" not in codex_settings["hooks"]  # not a Codex event
    # the permission rule sits beside the hooks in the Claude Code settings object
    read_only = [f"mcp__memory__{t}" for t in mcp_config.READ_TOOLS]
    assert claude_settings["permissions"]["allow"] == read_only
    from memory_agent.serve.tools import TOOL_NAMES

    assert set(mcp_config.READ_TOOLS) | set(mcp_config.WRITE_TOOLS) == set(TOOL_NAMES)


def test_init_says_how_to_allow_the_writes(tmp_path, shared_cache):
    home = tmp_path / "printed"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_agent",
            "init",
            "--no-index",
            "--print-config",
            "--home",
            str(home),
        ],
        capture_output=True,
        text=True,
        env=env_for(home, shared_cache),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"permissions"' in proc.stdout and "mcp__memory__memory_search" in proc.stdout
    assert '"mcp__memory" (every memory tool)' in proc.stdout
    assert "mcp__memory__memory_add" in proc.stdout and "memory-agent connect" in proc.stdout


def test_init_makes_an_existing_home_owner_only_and_says_so(tmp_path, shared_cache):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "config.toml").write_text('embedder = "minilm"\n', encoding="utf-8")
    (home / "config.toml").chmod(0o644)
    done = cli(home, shared_cache, "init", "--no-index", "--json")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    assert json.loads(done.stdout)["tightened"] == [
        f"{home}: 0755 -> 0700",
        f"{home / 'config.toml'}: 0644 -> 0600",
    ]
    home.chmod(0o750)
    again = cli(home, shared_cache, "init", "--no-index")  # a person reads this one
    assert again.returncode == 0, again.stderr
    assert f"made owner-only (it may hold private notes): {home}: 0750 -> 0700" in again.stdout


def test_a_new_config_toml_is_owner_only(tmp_path, shared_cache):
    home = tmp_path / "home"
    done = cli(home, shared_cache, "init", "--no-index", "--json", "--embedder", "minilm")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    assert json.loads(done.stdout)["tightened"] == []


def test_a_new_home_is_owner_only(env_home, minilm_model, gateway):
    for folder in (env_home, env_home / "kb", env_home / "run", env_home / "index"):
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700", folder
    added = gateway.add("Owner only", "Entry files are written 0600.")
    assert oct(os.stat(added["path"]).st_mode & 0o777) == "0o600"
    assert Path(added["path"]).is_relative_to(env_home)


def _switch_env(home, cache, tmp_path):
    """The CLI as a person runs it: the embedder from config.toml (no MEMORY_AGENT_EMBEDDER),
    no network for the hub (an empty HF cache, offline)."""
    env = env_for(home, cache, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    env.pop("MEMORY_AGENT_EMBEDDER")
    return env


def test_a_switch_to_bge_m3_without_its_extra_changes_nothing_and_names_the_extra(
    tmp_path, shared_cache
):
    """It wrote `embedder = "bge-m3"` and then failed, so status and search failed until
    `init --embedder minilm`; its error spoke of weights, never of the extra."""
    home = tmp_path / "home"
    env = _switch_env(home, shared_cache, tmp_path)
    made = cli(home, shared_cache, "init", "--embedder", "minilm", "--no-index", env=env)
    assert made.returncode == 0, made.stderr
    before = (home / "config.toml").read_bytes()
    no_extra = (
        "import runpy, sys; sys.modules['FlagEmbedding'] = None; "
        "runpy.run_module('memory_agent', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", no_extra, "init", "--embedder", "bge-m3", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert (home / "config.toml").read_bytes() == before
    assert "bge-m3 extra" in proc.stderr and "scripts/setup --extras bge-m3" in proc.stderr
    assert "nothing changed (the embedder stays minilm)" in proc.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("FlagEmbedding") is None, reason="the bge-m3 extra is not installed"
)
def test_a_switch_to_a_model_that_does_not_load_changes_nothing(tmp_path, shared_cache):
    """The extra installed, BGE-M3's weights out of reach: the daemon fails to load the model;
    config.toml goes back byte for byte, that daemon is stopped, and search works as before."""
    home = tmp_path / "home"
    env = _switch_env(home, shared_cache, tmp_path)
    made = cli(home, shared_cache, "init", "--demo", "--embedder", "minilm", env=env)
    assert made.returncode == 0, made.stderr
    before = (home / "config.toml").read_bytes()
    try:
        switched = cli(home, shared_cache, "init", "--embedder", "bge-m3", env=env, timeout=300)
        assert switched.returncode == 2, switched.stderr
        assert "nothing changed (the embedder stays minilm)" in switched.stderr
        assert "init --embedder bge-m3` again" in switched.stderr
        assert (home / "config.toml").read_bytes() == before
        found = cli(home, shared_cache, "search", "database migrations", "--json", env=env)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["hits"]
        status = json.loads(cli(home, shared_cache, "status", "--json", env=env).stdout)
        assert "minilm" in status["embedder"].lower()
    finally:
        cli(home, shared_cache, "stop", env=env)
