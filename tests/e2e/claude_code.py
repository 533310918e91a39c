"""Driving the real Claude Code CLI (`claude -p`) against the scripted Anthropic server."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e import harness
from tests.e2e.scripted_model import AnthropicServer, Step


def env(home: Path, server: AnthropicServer, trap: harness.ProxyTrap, mem: dict) -> dict:
    return harness.base_env(
        HOME=str(home),
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY="sk-ant-e2e-scripted-not-a-key",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_BUG_COMMAND="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
        CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1",
        CLAUDE_CODE_USE_BEDROCK="0",
        **trap.env(),
        **mem,
    )


@dataclass
class Agent:
    cli: Path
    home: Path  # the isolated HOME (~/.claude/settings.json, ~/.claude.json)
    project: Path  # the working directory of each session

    name = "claude-code"
    Server = AnthropicServer

    def env(self, server: AnthropicServer, trap: harness.ProxyTrap, mem: dict) -> dict:
        return env(self.home, server, trap, mem)

    @staticmethod
    def session_id(stdout: str) -> str:
        return json.loads(stdout)["session_id"]

    @staticmethod
    def tool_results(body: dict) -> list[str]:
        """The tool results the CLI sent back to the model, in order."""
        out = []
        for m in body.get("messages", []):
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if b.get("type") == "tool_result":
                    c = b.get("content")
                    out.append(c if isinstance(c, str) else json.dumps(c, ensure_ascii=False))
        return out

    def connect(self, init: dict[str, Any], url: str, run_env: dict[str, str], mem_home, cache):
        """`memory-agent connect claude-code --confirm` where it exists; else the settings
        exactly as `memory-agent init --json` prints them."""
        if harness.connect("claude-code", mem_home, cache, run_env):
            return
        settings = json.loads(harness.printed(init, "hooks", "Claude Code"))
        (self.home / ".claude").mkdir(parents=True, exist_ok=True)
        (self.home / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
        # The MCP server: the printed `claude mcp add ...` command, run with this CLI.
        argv = shlex.split(harness.printed(init, "mcp", "Claude Code"))
        assert argv[0] == "claude", argv
        out = subprocess.run(
            [str(self.cli), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            env=run_env,
            cwd=self.project,
        )
        assert out.returncode == 0, f"claude mcp add: {out.stdout}\n{out.stderr}"

    def sessions_store(self) -> Path:
        """Where Claude Code keeps its transcripts (one folder per project)."""
        return self.home / ".claude" / "projects"

    def session(self, prompt: str, run_env: dict[str, str]) -> subprocess.CompletedProcess:
        """One headless session: `claude -p PROMPT`, bounded by SESSION_TIMEOUT."""
        return harness.run_session(
            [
                str(self.cli),
                "-p",
                prompt,
                "--output-format",
                "json",
                "--model",
                "claude-sonnet-4-5",
                # the user's own choice for the shell and file tools and for the one memory
                # tool that writes; the read-only memory tools are allowed by the rule `init`
                # prints
                "--allowedTools",
                "Bash,Write,Edit,Read,mcp__memory__memory_add",
            ],
            run_env,
            self.project,
        )


def play(project: Path, n: int) -> list[Step]:
    """Session `n`: search, add, a failing command, a file write, the command passing, an answer."""
    config = json.dumps({"service": "kestrel-api", "port": 8000, "password": harness.FIELD_SECRET})
    return [
        Step.call("mcp__memory__memory_search", query="which port does the API listen on"),
        Step.call(
            "mcp__memory__memory_add",
            title=harness.ADD_TITLES[n],
            body=harness.ADD_BODIES[n],
            type="fact",
        ),
        Step.call("Bash", command=harness.COMMAND, description="run the config check"),
        Step.call("Write", file_path=str(project / "config.json"), content=config + "\n"),
        Step.call("Bash", command=harness.COMMAND, description="run the config check again"),
        Step.say(harness.ANSWERS[n]),
    ]
