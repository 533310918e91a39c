"""`memory-agent connect AGENT` merges the MCP server, the hooks and the permission rule into the
agent's own settings files - a preview by default, --confirm writes with a backup, a second run
changes nothing, --remove takes out exactly what it put in, and a malformed file is refused with
nothing changed; for opencode it writes a plugin that runs the fast hook command. The real CLI as a
subprocess, HOME in tmp. (Issue 17; the plugin's behaviour with the real opencode is tested end to
end in tests/e2e/test_agents.py.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import memory_agent
from tests.memory_agent.mcp_helpers import env_for

USER_SETTINGS = {
    "model": "opus",
    "env": {"FOO": "1"},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'done'"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "/opt/guard.sh"}]}
        ],
    },
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)"]},
}
USER_CLAUDE_JSON = {
    "numStartups": 12,
    "projects": {"/home/u/src/app": {"allowedTools": [], "history": []}},
    "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}},
}
USER_CODEX_TOML = """# my Codex settings
model = "gpt-5"
approval_policy = "on-request"

[mcp_servers.github]
command = "gh-mcp"
args = []

[projects."/home/u/src/app"]
trust_level = "trusted"
"""


def connect(user_home, mem_home, cache, *args, **env):
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "--home", str(mem_home), "connect", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_for(mem_home, cache, HOME=str(user_home), **env),
    )
    return proc


def ok(proc):
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture
def homes(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    env = {k: "" for k in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME")}
    return user, tmp_path / "memory-home", env


def test_claude_code_preview_confirm_idempotent_remove(homes, shared_cache):
    user, mem, env = homes
    (user / ".claude").mkdir()
    settings, claude_json = user / ".claude" / "settings.json", user / ".claude.json"
    settings.write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    claude_json.write_text(json.dumps(USER_CLAUDE_JSON, indent=2))  # Claude Code: no final \n
    before = tree(user)
    preview = ok(connect(user, mem, shared_cache, "claude-code", **env))
    assert tree(user) == before  # a preview writes nothing
    assert f"update    {settings}" in preview and "+++ " + str(settings) in preview
    assert "mcp__memory__memory_search" in preview and "--confirm" in preview

    ok(connect(user, mem, shared_cache, "claude-code", "--confirm", **env))
    merged = json.loads(settings.read_text())
    assert merged["model"] == "opus" and merged["env"] == {"FOO": "1"}
    assert merged["permissions"]["deny"] == ["Read(./.env)"]
    assert merged["permissions"]["allow"][0] == "Bash(npm run test:*)"
    assert "mcp__memory__memory_get" in merged["permissions"]["allow"]
    stop = merged["hooks"]["Stop"]
    assert stop[0]["hooks"][0]["command"] == "notify-send 'done'" and len(stop) == 2
    assert "hookrun.py stop" in stop[1]["hooks"][0]["command"]
    assert not any(h.get("async") for b in merged["hooks"].values() for x in b for h in x["hooks"])
    assert {"PermissionDenied", "SessionEnd", "PostToolUseFailure"} <= set(merged["hooks"])
    state = json.loads(claude_json.read_text())
    assert state["numStartups"] == 12 and set(state["mcpServers"]) == {"github", "memory"}
    assert state["mcpServers"]["memory"]["args"][-3:] == ["proxy", "--home", str(mem)]
    # a backup of each changed file, holding the old bytes
    [backup] = (user / ".claude").glob("settings.json.memory-agent-*.bak")
    assert backup.read_bytes() == before[".claude/settings.json"]
    [backup] = user.glob(".claude.json.memory-agent-*.bak")
    assert backup.read_bytes() == before[".claude.json"]

    connected = tree(user)
    again = ok(connect(user, mem, shared_cache, "claude-code", "--confirm", **env))
    assert "nothing to change" in again and tree(user) == connected  # idempotent

    ok(connect(user, mem, shared_cache, "claude-code", "--remove", "--confirm", **env))
    assert settings.read_bytes() == before[".claude/settings.json"]  # byte for byte
    assert claude_json.read_bytes() == before[".claude.json"]


def test_the_connected_hook_command_captures(homes, shared_cache):
    user, mem, env = homes
    subprocess.run(
        [sys.executable, "-m", "memory_agent", "init", "--no-index", "--home", str(mem)],
        capture_output=True,
        env=env_for(mem, shared_cache),
        check=True,
        timeout=120,
    )
    ok(connect(user, mem, shared_cache, "claude-code", "--confirm", **env))
    settings = json.loads((user / ".claude" / "settings.json").read_text())
    [block] = settings["hooks"]["PostToolUse"]
    command = shlex.split(block["hooks"][0]["command"])
    payload = {
        "session_id": "conn-1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_response": {"stdout": "x"},
    }
    (mem / "run").mkdir(exist_ok=True)
    (mem / "run" / "daemon.sock").mkdir()  # no daemon needed, none started
    subprocess.run(
        command,
        input=json.dumps(payload),
        text=True,
        check=True,
        timeout=60,
        env=env_for(mem, shared_cache),
    )
    assert '"tool": "Bash"' in (mem / "journal" / "conn-1.jsonl").read_text()


def test_an_old_async_hook_of_ours_is_replaced_not_duplicated(homes, shared_cache):
    user, mem, env = homes
    (user / ".claude").mkdir()
    old = (
        "/usr/bin/python3 -S /old/site/memory_agent/hookrun.py stop --home /x --client claude-code"
    )
    settings = user / ".claude" / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {"type": "command", "command": old, "timeout": 5, "async": True}
                            ]
                        },
                        {"hooks": [{"type": "command", "command": "say done"}]},
                    ]
                }
            },
            indent=2,
        )
    )
    ok(connect(user, mem, shared_cache, "claude-code", "--confirm", **env))
    stop = json.loads(settings.read_text())["hooks"]["Stop"]
    assert len(stop) == 2 and stop[1]["hooks"][0]["command"] == "say done"
    assert "async" not in stop[0]["hooks"][0] and "/old/site" not in json.dumps(stop)


def test_codex_config_toml_and_hooks_json(homes, shared_cache):
    user, mem, env = homes
    codex = user / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text(USER_CODEX_TOML)
    before = tree(user)
    out = ok(connect(user, mem, shared_cache, "codex", "--confirm", **env))
    assert "/hooks" in out and "trust" in out  # its hooks stay untrusted until trusted
    text = (codex / "config.toml").read_text()
    assert text.startswith(USER_CODEX_TOML)  # the user's lines untouched
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["github"]["command"] == "gh-mcp"
    assert parsed["mcp_servers"]["memory"]["args"][-3:] == ["proxy", "--home", str(mem)]
    assert parsed["projects"]["/home/u/src/app"]["trust_level"] == "trusted"
    hooks = json.loads((codex / "hooks.json").read_text())["hooks"]
    assert {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"} == set(hooks)
    assert all("--client codex" in b["hooks"][0]["command"] for b in (x[0] for x in hooks.values()))
    connected = tree(user)
    ok(connect(user, mem, shared_cache, "codex", "--confirm", **env))
    assert tree(user) == connected
    ok(connect(user, mem, shared_cache, "codex", "--remove", "--confirm", **env))
    assert (codex / "config.toml").read_bytes() == before[".codex/config.toml"]
    assert not (codex / "hooks.json").exists()  # connect made it: no `{}` left (issue 31)


def test_remove_leaves_no_empty_file_connect_created(homes, shared_cache):
    """`connect codex --remove` left a `hooks.json` of `{}` (and an empty config.toml) that
    connect had created; the files it made are gone again, each backed up first. (Issue 31.)"""
    user, mem, env = homes
    ok(connect(user, mem, shared_cache, "codex", "--confirm", **env))
    codex = user / ".codex"
    assert (codex / "hooks.json").is_file() and (codex / "config.toml").is_file()
    out = ok(connect(user, mem, shared_cache, "codex", "--remove", "--confirm", **env))
    assert "delete" in out
    left = sorted(p.name for p in codex.iterdir())
    assert "hooks.json" not in left and "config.toml" not in left, left
    assert any(n.startswith("hooks.json.memory-agent-") for n in left)  # the backup


def test_connecting_to_a_home_that_does_not_exist_says_so(homes, shared_cache):
    """A typo in --home (or no `init` yet) connected the agent to nothing, silently."""
    user, mem, env = homes
    out = ok(connect(user, mem, shared_cache, "cursor", **env))
    assert f"there is no memory at {mem} yet" in out and "memory-agent init" in out
    reply = json.loads(ok(connect(user, mem, shared_cache, "cursor", "--json", **env)))
    assert reply["home_exists"] is False


def test_codex_home_is_honoured(homes, shared_cache, tmp_path):
    user, mem, env = homes
    env["CODEX_HOME"] = str(tmp_path / "elsewhere")
    ok(connect(user, mem, shared_cache, "codex", "--confirm", **env))
    assert (tmp_path / "elsewhere" / "config.toml").is_file() and not (user / ".codex").exists()


def test_opencode_and_cursor(homes, shared_cache):
    user, mem, env = homes
    ok(connect(user, mem, shared_cache, "opencode", "--confirm", **env))
    config = json.loads((user / ".config" / "opencode" / "opencode.json").read_text())
    assert config["mcp"]["memory"]["command"][-3:] == ["proxy", "--home", str(mem)]
    plugin = (user / ".config" / "opencode" / "plugins" / "memory-agent.ts").read_text()
    assert json.dumps(str(mem)) in plugin and 'await hook("tool"' in plugin
    ok(connect(user, mem, shared_cache, "cursor", "--confirm", **env))
    cursor = json.loads((user / ".cursor" / "mcp.json").read_text())
    assert cursor["mcpServers"]["memory"]["args"][-3:] == ["proxy", "--home", str(mem)]
    connected = tree(user)
    for agent in ("opencode", "cursor"):
        ok(connect(user, mem, shared_cache, agent, "--confirm", **env))
    assert tree(user) == connected
    ok(connect(user, mem, shared_cache, "opencode", "--remove", "--confirm", **env))
    assert not (user / ".config" / "opencode" / "plugins" / "memory-agent.ts").exists()
    assert json.loads((user / ".config" / "opencode" / "opencode.json").read_text()) == {}


@pytest.mark.parametrize(
    ("agent", "name", "text", "fix"),
    [
        ("claude-code", ".claude/settings.json", '{"hooks": {,}', "fix or move"),
        ("claude-code", ".claude/settings.json", '{"hooks": []}', 'make "hooks" an object'),
        ("claude-code", ".claude.json", '{"numStartups": 3,', "fix or move"),  # settings.json
        ("opencode", ".config/opencode/opencode.json", "{\n  // a comment\n}", "fix or move"),
        ("codex", ".codex/config.toml", "model = \n[x", "fix or move"),
        ("cursor", ".cursor/mcp.json", "[1, 2]", "fix or move"),
    ],
)
def test_a_malformed_file_is_refused_and_nothing_changes(
    homes, shared_cache, agent, name, text, fix
):
    user, mem, env = homes
    path = user / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    before = tree(user)
    proc = connect(user, mem, shared_cache, agent, "--confirm", **env)
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "memory-agent connect: config:" in proc.stderr
    assert "fix: " in proc.stderr and fix in proc.stderr
    assert tree(user) == before  # no change, no backup


def test_someone_elses_memory_server_is_not_overwritten(homes, shared_cache):
    user, mem, env = homes
    (user / ".claude.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory": {"command": "npx", "args": ["@modelcontextprotocol/server-memory"]}
                }
            }
        )
    )
    before = tree(user)
    proc = connect(user, mem, shared_cache, "claude-code", "--confirm", **env)
    assert proc.returncode == 2 and "conflict" in proc.stderr and "rename or remove" in proc.stderr
    assert tree(user) == before
    codex = user / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text('[mcp_servers.memory]\ncommand = "npx"\n')
    before = tree(user)
    proc = connect(user, mem, shared_cache, "codex", "--confirm", **env)
    assert proc.returncode == 2 and "[mcp_servers.memory]" in proc.stderr
    assert tree(user) == before


def test_json_output(homes, shared_cache):
    user, mem, env = homes
    reply = json.loads(ok(connect(user, mem, shared_cache, "cursor", "--json", **env)))
    assert reply["written"] is False and reply["files"][0]["action"] == "create"
    assert reply["files"][0]["diff"].startswith("--- /dev/null")
    assert not os.path.exists(user / ".cursor")


def test_a_symlinked_settings_file_stays_a_link_and_its_target_is_merged(homes, shared_cache):
    user, mem, env = homes
    dotfiles = user / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    (user / ".claude").mkdir()
    link = user / ".claude" / "settings.json"
    link.symlink_to(dotfiles / "settings.json")
    ok(connect(user, mem, shared_cache, "claude-code", "--confirm", **env))
    assert link.is_symlink() and link.resolve() == (dotfiles / "settings.json").resolve()
    merged = json.loads((dotfiles / "settings.json").read_text())
    assert merged["model"] == "opus" and "mcp__memory__memory_get" in merged["permissions"]["allow"]


HOOKRUN = Path(memory_agent.__file__).with_name("hookrun.py")


def test_connect_fills_in_the_fast_hook_command(homes, shared_cache):
    user, mem, env = homes
    ok(connect(user, mem, shared_cache, "opencode", "--confirm", **env))
    plugin = (user / ".config" / "opencode" / "plugins" / "memory-agent.ts").read_text()
    hook = re.search(r"^const HOOK: string\[\] = (.*)$", plugin, re.M)
    assert hook, plugin[:2000]
    # what `init` prints for the other agents (mcp_config.hook_command), not `memory-agent hook`
    assert json.loads(hook.group(1)) == [sys.executable, "-S", str(HOOKRUN)]
    assert "MEMORY_AGENT_BIN" not in hook.group(0)
    assert f"process.env.MEMORY_AGENT_HOME ?? {json.dumps(str(mem))}" in plugin
    # connect recognises its own plugin again: idempotent, and --remove takes it out
    ok(connect(user, mem, shared_cache, "opencode", "--confirm", **env))
    ok(connect(user, mem, shared_cache, "opencode", "--remove", "--confirm", **env))
    assert not (user / ".config" / "opencode" / "plugins" / "memory-agent.ts").exists()


# -- a file it cannot replace, runs at the same time (issue 32, item 5 and a low item) ----------
def _unreplaceable(folder: Path, name: str):
    """Make `folder/name` impossible to replace: immutable (`chattr +i`, which needs root's
    capabilities) or, for a user without them, a read-only folder; the undo, or skip."""
    path = folder / name
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("no chattr here, and a read-only folder does not stop root")
    folder.chmod(0o555)
    return lambda: folder.chmod(0o755)


# Before: `internal ... PermissionError ... a bug`, and a `.tmp` and a `.bak` left beside the file
# at each try.
def test_a_settings_file_that_cannot_be_replaced_is_a_clean_error_leaving_nothing(
    homes, shared_cache
):
    user, mem, env = homes
    folder = user / ".cursor"
    folder.mkdir()
    path = folder / "mcp.json"
    path.write_text('{"mcpServers": {}}\n')
    before = tree(user)
    undo = _unreplaceable(folder, "mcp.json")
    try:
        for _ in range(2):
            proc = connect(user, mem, shared_cache, "cursor", "--confirm", **env)
            assert proc.returncode == 2, proc.stderr
            assert "internal" not in proc.stderr and "bug" not in proc.stderr
            assert f"memory-agent connect: config: cannot replace {path}" in proc.stderr
            assert "chattr -i" in proc.stderr and "read-only mount" in proc.stderr
            assert sorted(p.name for p in folder.iterdir()) == ["mcp.json"]  # no .tmp, no .bak
    finally:
        undo()
    assert tree(user) == before
    ok(connect(user, mem, shared_cache, "cursor", "--confirm", **env))  # writable again: works


# Before: a run that found the file changed by another run had already backed it up, then merged
# again and found nothing to change - a backup per run that changed nothing.
def test_a_run_that_finds_the_file_changed_meanwhile_makes_no_backup(tmp_path):
    from memory_agent.serve.agent_settings import Change, Moved, write_change

    path = tmp_path / "settings.json"
    path.write_text('{"theirs": 2}\n')  # another run wrote it since this one read '{"a": 1}'
    with pytest.raises(Moved):
        write_change(Change(path, '{"a": 1}\n', '{"a": 1, "ours": true}\n'), "T", recheck=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]
    assert path.read_text() == '{"theirs": 2}\n'


# Before: a run picked its backup's name by looking whether it existed, then copied to it. Another
# run in that window took the same name; when the first run's rename was then refused (the file
# had moved), it removed "its" backup - the other run's. CI saw four runs leave no backup at all.
def test_a_run_never_removes_the_backup_another_run_made_in_the_same_second(tmp_path, monkeypatch):
    from memory_agent.serve import agent_settings
    from memory_agent.serve.agent_settings import Change, Moved, write_change

    path = tmp_path / "mcp.json"
    original = '{"a": 1}\n'
    path.write_text(original)
    real_copy, theirs = shutil.copy2, []

    def other_run_first(src, dst):  # the other run, whole, just before this run's copy
        monkeypatch.setattr(agent_settings.shutil, "copy2", real_copy)
        theirs.append(write_change(Change(path, original, '{"a": 1, "b": 2}\n'), "T", True))
        return real_copy(src, dst)

    monkeypatch.setattr(agent_settings.shutil, "copy2", other_run_first)
    with pytest.raises(Moved):
        write_change(Change(path, original, '{"a": 1, "c": 3}\n'), "T", recheck=True)
    assert theirs and Path(theirs[0]).read_text() == original  # its backup is still there
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json", Path(theirs[0]).name]
    assert path.read_text() == '{"a": 1, "b": 2}\n'


def test_concurrent_runs_back_up_only_the_file_they_replaced(homes, shared_cache):
    """Runs at once: each backup left holds the file as it was before any run (one made from
    another run's result, whose own rename was then refused, is removed), and one merge."""
    import concurrent.futures

    user, mem, env = homes
    folder = user / ".cursor"
    folder.mkdir()
    original = '{"mcpServers": {"github": {"command": "gh-mcp"}}}\n'
    (folder / "mcp.json").write_text(original)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(
            pool.map(
                lambda _: connect(user, mem, shared_cache, "cursor", "--confirm", **env), range(4)
            )
        )
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    backups = list(folder.glob("mcp.json.memory-agent-*.bak"))
    assert backups and all(b.read_text() == original for b in backups)
    assert not list(folder.glob(".*.tmp"))
    assert set(json.loads((folder / "mcp.json").read_text())["mcpServers"]) == {"github", "memory"}
