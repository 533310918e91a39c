"""Driving the real opencode CLI (`opencode run`) against the scripted chat-completions server.

opencode runs offline against an OpenAI-compatible endpoint: a custom provider with the
bundled `@ai-sdk/openai-compatible` package and a `baseURL` on 127.0.0.1. memory-agent
reaches it through the MCP block `init` prints (opencode.json) and the plugin `init` tells
the user to copy into ~/.config/opencode/plugins/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e import harness
from tests.e2e.scripted_model import ChatServer, Step

PLUGIN = harness.ROOT / "memory_agent" / "integrations" / "opencode" / "memory-agent.ts"


def env(home: Path, trap: harness.ProxyTrap, mem: dict) -> dict:
    return harness.base_env(
        HOME=str(home),
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
        OPENCODE_DISABLE_CLAUDE_CODE="1",
        OPENCODE_DISABLE_EMBEDDED_WEB_UI="1",
        OPENCODE_DISABLE_EXTERNAL_SKILLS="1",
        **trap.env(),
        **mem,
    )


def memory_agent_bin(init: dict[str, Any]) -> str:
    """The MEMORY_AGENT_BIN `init` says the plugin runs with."""
    note = harness.printed(init, "hooks", "opencode")
    return note.split("MEMORY_AGENT_BIN=", 1)[1].split()[0]


@dataclass
class Agent:
    cli: Path
    home: Path
    project: Path
    bin: str = "memory-agent"  # MEMORY_AGENT_BIN, as `init` prints it

    name = "opencode"
    Server = ChatServer

    def env(self, server: ChatServer, trap: harness.ProxyTrap, mem: dict) -> dict:
        return env(self.home, trap, mem)

    def connect(self, init: dict[str, Any], url: str, run_env: dict[str, str], mem_home, cache):
        """`memory-agent connect opencode --confirm` where it exists (the plugin runs the hook
        command it fills in), else the MCP block `init` prints in opencode.json and the plugin
        copied where `init` says, run with the MEMORY_AGENT_BIN `init` names; then a provider
        on the scripted server."""
        conf = self.home / ".config" / "opencode"
        if not harness.connect("opencode", mem_home, cache, run_env):
            run_env["MEMORY_AGENT_BIN"] = self.bin
            (conf / "plugins").mkdir(parents=True, exist_ok=True)
            config = json.loads(harness.printed(init, "mcp", "opencode"))
            (conf / "opencode.json").write_text(json.dumps(config, indent=2))
            shutil.copy(PLUGIN, conf / "plugins" / PLUGIN.name)
        config = json.loads((conf / "opencode.json").read_text())
        config.update(
            {
                "model": "scripted/scripted",
                "autoupdate": False,
                "share": "disabled",
                "permission": {"*": "allow"},  # the user's choice for a headless run
                "provider": {
                    "scripted": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "scripted model on 127.0.0.1",
                        "options": {"baseURL": url + "/v1", "apiKey": "sk-e2e-not-a-key"},
                        "models": {"scripted": {"name": "scripted", "tool_call": True}},
                    }
                },
            }
        )
        (conf / "opencode.json").write_text(json.dumps(config, indent=2))

    def sessions_store(self) -> Path:
        """opencode's database of sessions."""
        return self.home / ".local" / "share" / "opencode" / "opencode.db"

    def session(self, prompt: str, run_env: dict[str, str]) -> subprocess.CompletedProcess:
        return harness.run_session(
            [str(self.cli), "run", "--format", "json", "--model", "scripted/scripted", prompt],
            run_env,
            self.project,
        )

    @staticmethod
    def session_id(stdout: str) -> str:
        for line in stdout.splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                sid = event.get("sessionID") or (event.get("part") or {}).get("sessionID")
                if sid:
                    return sid
        raise AssertionError(f"no sessionID in opencode run --format json output:\n{stdout}")

    @staticmethod
    def tool_results(body: dict) -> list[str]:
        out = []
        for m in body.get("messages", []):
            if m.get("role") == "tool":
                c = m.get("content")
                out.append(c if isinstance(c, str) else json.dumps(c, ensure_ascii=False))
        return out


def play(project: Path, n: int) -> list[Step]:
    config = json.dumps({"service": "kestrel-api", "port": 8000, "password": harness.FIELD_SECRET})
    return [
        Step.call("memory_memory_search", query="which port does the API listen on"),
        Step.call(
            "memory_memory_add",
            title=harness.ADD_TITLES[n],
            body=harness.ADD_BODIES[n],
            type="fact",
        ),
        Step.call("bash", command=harness.COMMAND, description="run the config check"),
        Step.call("write", filePath=str(project / "config.json"), content=config + "\n"),
        Step.call("bash", command=harness.COMMAND, description="run the config check again"),
        Step.say(harness.ANSWERS[n]),
    ]
