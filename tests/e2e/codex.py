"""Driving the real Codex CLI (`codex exec`) against the scripted Responses API server."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e import harness
from tests.e2e.scripted_model import ResponsesServer, Step

# What keeps Codex from reaching out at start and from asking anyone anything.
OFFLINE_CONFIG = """\
model = "gpt-5.5"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"
include_apply_patch_tool = true

[model_providers.scripted]
name = "scripted model on 127.0.0.1"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
apps = false
remote_plugin = false
plugin_sharing = false
in_app_updates = false
# the file-writing tool (a model without metadata gets no apply_patch otherwise)
apply_patch_freeform = true

[analytics]
enabled = false

[feedback]
enabled = false

"""


def env(home: Path, codex_home: Path, trap: harness.ProxyTrap, mem: dict) -> dict:
    return harness.base_env(
        HOME=str(home),
        CODEX_HOME=str(codex_home),
        SCRIPTED_API_KEY="sk-e2e-scripted-not-a-key",
        RUST_LOG="warn",
        **trap.env(),
        **mem,
    )


@dataclass
class Agent:
    cli: Path
    home: Path  # the isolated HOME
    codex_home: Path  # CODEX_HOME: config.toml, hooks.json
    project: Path

    name = "codex"
    Server = ResponsesServer

    def env(self, server: ResponsesServer, trap: harness.ProxyTrap, mem: dict) -> dict:
        return env(self.home, self.codex_home, trap, mem)

    @staticmethod
    def session_id(stdout: str) -> str:
        for line in stdout.splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("type") == "thread.started":
                    return event["thread_id"]
        raise AssertionError(f"no thread.started in codex exec --json output:\n{stdout}")

    @staticmethod
    def tool_results(body: dict) -> list[str]:
        """The tool results the CLI sent back to the model, in order."""
        out = []
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") in (
                "function_call_output",
                "custom_tool_call_output",
            ):
                o = item.get("output")
                out.append(o if isinstance(o, str) else json.dumps(o, ensure_ascii=False))
        return out

    def connect(self, init: dict[str, Any], url: str, run_env: dict[str, str], mem_home, cache):
        """config.toml: the offline settings, then `memory-agent connect codex --confirm` where
        it exists; else the `[mcp_servers.memory]` block and hooks.json exactly as `init`
        prints them."""
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(OFFLINE_CONFIG.format(url=url))
        if harness.connect("codex", mem_home, cache, run_env):
            return
        mcp = harness.printed(init, "mcp", "Codex")
        with (self.codex_home / "config.toml").open("a") as f:
            f.write(mcp + "\n")
        hooks = harness.printed(init, "hooks", "Codex")
        (self.codex_home / "hooks.json").write_text(hooks)

    def sessions_store(self) -> Path:
        """Where Codex keeps its rollouts (by date)."""
        return self.codex_home / "sessions"

    def session(self, prompt: str, run_env: dict[str, str]) -> subprocess.CompletedProcess:
        """One headless session: `codex exec PROMPT`, bounded by SESSION_TIMEOUT."""
        return harness.run_session(
            [
                str(self.cli),
                "exec",
                "--skip-git-repo-check",
                "--json",
                # The hooks are trusted once by a person in /hooks; a headless run in a fresh
                # CODEX_HOME has no one to ask (this flag is Codex's documented way for that).
                "--dangerously-bypass-hook-trust",
                prompt,
            ],
            run_env,
            self.project,
        )


def play(project: Path, n: int, shell_tool: str = "exec_command") -> list[Step]:
    """Session `n`: search, add, a failing command, a file write, the command passing, an answer."""
    config = json.dumps({"service": "kestrel-api", "port": 8000, "password": harness.FIELD_SECRET})
    patch = f"*** Begin Patch\n*** Add File: config.json\n+{config}\n*** End Patch\n"
    return [
        Step.call(
            "memory_search", namespace="mcp__memory", query="which port does the API listen on"
        ),
        Step.call(
            "memory_add",
            namespace="mcp__memory",
            title=harness.ADD_TITLES[n],
            body=harness.ADD_BODIES[n],
            type="fact",
        ),
        Step.call(shell_tool, cmd=harness.COMMAND),
        Step.call("apply_patch", custom=True, input=patch),
        Step.call(shell_tool, cmd=harness.COMMAND),
        Step.say(harness.ANSWERS[n]),
    ]
