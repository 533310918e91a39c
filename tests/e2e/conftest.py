"""The sessions the end-to-end tests share: each agent CLI played once (three sessions against
the scripted model, the memory's hooks and MCP server connected), then asserted on by
`test_agents.py` (what the live hooks and tools did) and `test_session_import.py` (the same
sessions imported from the agent's own transcripts). The project is a git repository with an
`origin` remote, so records carry its identity; the agent's session store is copied after the
second session, so an import can meet a source that grows.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e import claude_code, codex, harness, opencode
from tests.e2e.scripted_model import Request, Step

AGENTS = {
    "claude-code": (claude_code, "claude", harness.CLAUDE_CODE_VERSION),
    "codex": (codex, "codex", harness.CODEX_VERSION),
    "opencode": (opencode, "opencode", harness.OPENCODE_VERSION),
}
SESSIONS = 3
ORIGIN = "git@example.com:e2e/kestrel.git"
IDENTITY = "example.com/e2e/kestrel"  # the project's identity (intake.projects)


def copy_store(store: Path, dest: Path) -> None:
    """A copy of an agent's session store as it is now (opencode's SQLite file through the
    backup API: its WAL is part of what it holds)."""
    if store.is_dir():
        shutil.copytree(store, dest)
        return
    dest.mkdir(parents=True)
    src, dst = sqlite3.connect(store), sqlite3.connect(dest / store.name)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


@dataclass
class Played:
    agent: str
    home: Path  # the memory home
    cache: Path
    project: Path
    runs: list = field(default_factory=list)  # subprocess.CompletedProcess per session
    session_ids: list[str] = field(default_factory=list)
    requests: list[list[Request]] = field(default_factory=list)  # per session
    server_errors: list[str] = field(default_factory=list)
    outside_attempts: list[str] = field(default_factory=list)
    driver: object = None
    early_store: Path | None = None  # the agent's session store after the second session

    def journal(self, n: int) -> list[dict]:
        return harness.sessions(self.home).get(self.session_ids[n], [])


def prompt(n: int) -> str:
    return (
        f"Session {n + 1}: check.py fails - make it pass (which port does kestrel-api use?). "
        f"The deploy token is {harness.PROMPT_SECRET}"
    )


@pytest.fixture(scope="session", params=sorted(AGENTS))
def played(request, tmp_path_factory, shared_cache) -> Played:
    module, binary, version = AGENTS[request.param]
    cli = harness.find_cli(binary)
    if cli is None:
        pytest.skip(
            f"{binary} CLI not found (PATH, $MEMORY_AGENT_AGENT_CLIS, {harness.DEFAULT_CLIS}): "
            f".ci/run installs {version} there with npm"
        )
    base = tmp_path_factory.mktemp(request.param)
    home, user_home, project = base / "memory", base / "home", base / "project"
    user_home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "remote", "add", "origin", ORIGIN], check=True)
    (project / "check.py").write_text(harness.CHECK_PY)
    init = harness.init_home(home, shared_cache)
    mem = harness.memory_env(home, shared_cache)
    if module is codex:
        driver = codex.Agent(cli, user_home, user_home / ".codex", project)
    else:
        driver = module.Agent(cli, user_home, project)
    if module is opencode:
        driver.bin = opencode.memory_agent_bin(init)
    result = Played(request.param, home, shared_cache, project, driver=driver)

    def script(req: Request, calls: int) -> Step:
        # One server for the three sessions: a session is named in its prompt ("Session N:");
        # injected episodes of earlier sessions name lower numbers.
        named = re.findall(r"Session (\d+): check\.py fails", harness.request_text(req.body))
        steps = module.play(project, max(map(int, named), default=1) - 1)
        return steps[calls] if calls < len(steps) else Step.say("done")

    try:
        with harness.ProxyTrap() as trap, driver.Server(script) as server:
            run_env = driver.env(server, trap, mem)
            driver.connect(init, server.url, run_env, home, shared_cache)
            for n in range(SESSIONS):
                (project / "config.json").unlink(missing_ok=True)
                before = len(server.requests)
                run = driver.session(prompt(n), run_env)
                result.runs.append(run)
                assert run.returncode == 0, f"{request.param} session {n}: {run.stderr[-3000:]}"
                result.session_ids.append(driver.session_id(run.stdout))
                # The turn's end reaches the journal from the Stop hook; the next session
                # starts after it (bounded: a lost Stop fails test_journal, not this fixture).
                try:
                    harness.wait_for(
                        lambda n=n: any(r["event"] == "stop" for r in result.journal(n)),
                        f"the stop record of session {n}",
                        timeout=20,
                    )
                except AssertionError:
                    pass
                result.requests.append(server.requests[before:])
                if n == 1:
                    result.early_store = base / "store-after-two"
                    copy_store(driver.sessions_store(), result.early_store)
            result.server_errors = server.errors
            result.outside_attempts = list(trap.attempts)
        yield result
    finally:
        harness.stop_daemon(home, shared_cache)
