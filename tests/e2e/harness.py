"""What the end-to-end tests share: finding the agent CLIs, a memory home made by `init`,
an isolated environment that can reach nothing but 127.0.0.1, and the checks on the home.

Network: every CLI gets its documented "no telemetry / no update / no nonessential traffic"
switches, and HTTP(S)_PROXY pointing at a local trap (`ProxyTrap`) with NO_PROXY covering
only 127.0.0.1 and localhost: anything that still tries to leave the machine lands in the
trap, is refused and recorded, and the test fails on it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Where .ci/run installs the pinned CLIs (npm, project-local, git-ignored).
DEFAULT_CLIS = ROOT / ".ci" / "agents" / "node_modules" / ".bin"

# Pinned: the versions .ci/run installs and the README names.
CLAUDE_CODE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
OPENCODE_VERSION = "1.18.33"

SESSION_TIMEOUT = 180  # seconds for one agent session (a CLI run), start to exit
WAIT_TIMEOUT = 60  # seconds for anything the hooks or the daemon finish after a session

# The secrets the play types: one in a prompt, one in a tool's input (an env var in a
# command), one in a structured field (a "password" key in a file the agent writes).
PROMPT_SECRET = "ghp_E2eSecretTokenTypedInPrompt0123456789"
COMMAND_SECRET = "Xy7PqE2eCommandEnvSecret93kLm"
FIELD_SECRET = "Zr4E2eStructuredFieldSecret8Wq"
SECRETS = (PROMPT_SECRET, COMMAND_SECRET, FIELD_SECRET)

# A command that fails until config.json exists; its secret is a `--password` argument.
COMMAND = f"python3 check.py --password {COMMAND_SECRET}"

ADD_TITLES = [
    "The nightly export job writes parquet files to the cold bucket",
    "Release tags are signed with the team's hardware key",
    "The staging cluster scales to zero at weekends",
]
ADD_BODIES = [
    "The nightly export (cron 02:00 UTC) writes one parquet file per table into the cold "
    "storage bucket; a partial run leaves a _PARTIAL marker file.",
    "Every release tag (vX.Y.Z) is signed with the YubiKey held by the on-call lead; "
    "unsigned tags are rejected by the deploy pipeline.",
    "From Saturday 00:00 to Monday 06:00 the staging cluster has zero worker nodes; the "
    "first request after that waits about four minutes for a node.",
]
ANSWERS = [
    "check.py needed config.json; I wrote it and the check passes now (final answer one).",
    "The check failed without config.json; after writing it the check passes (answer two).",
    "config.json was missing again; written, and check.py passes (final answer three).",
]

CHECK_PY = """\
import json, pathlib, sys
cfg = pathlib.Path("config.json")
if not cfg.exists():
    sys.exit("ConfigError: config.json not found")
print("config ok:", json.loads(cfg.read_text())["service"])
"""


def find_cli(name: str) -> Path | None:
    """The CLI `name`: under $MEMORY_AGENT_AGENT_CLIS, the repo's .ci/agents install, or PATH."""
    dirs = []
    if os.environ.get("MEMORY_AGENT_AGENT_CLIS"):
        dirs.append(Path(os.environ["MEMORY_AGENT_AGENT_CLIS"]))
    dirs.append(DEFAULT_CLIS)
    for d in dirs:
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return d / name
    found = shutil.which(name)
    return Path(found) if found else None


def cli_version(path: Path) -> str:
    out = subprocess.run(
        [str(path), "--version"], capture_output=True, text=True, timeout=60, env=base_env()
    )
    return out.stdout.strip()


def run_session(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run one agent session, bounded by SESSION_TIMEOUT: on timeout the whole process group
    (the CLI, its native binary, its MCP proxy and hooks) is killed, then the test fails."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=SESSION_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        raise AssertionError(
            f"{Path(argv[0]).name} ran past {SESSION_TIMEOUT}s and was killed:\n{err[-3000:]}"
        ) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def base_env(**extra: str) -> dict[str, str]:
    """A minimal environment (no inherited API keys, proxies or agent settings)."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env


class ProxyTrap:
    """An HTTP proxy on 127.0.0.1 that refuses everything and records what was attempted."""

    def __init__(self):
        attempts: list[str] = []
        self.attempts = attempts

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _refuse(self):
                attempts.append(f"{self.command} {self.path}")
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()

            do_CONNECT = do_GET = do_POST = do_HEAD = do_PUT = _refuse  # noqa: N815

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        no = "127.0.0.1,localhost"
        return {
            "HTTP_PROXY": self.url,
            "HTTPS_PROXY": self.url,
            "http_proxy": self.url,
            "https_proxy": self.url,
            "ALL_PROXY": self.url,
            "NO_PROXY": no,
            "no_proxy": no,
        }

    def __enter__(self) -> ProxyTrap:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.http.shutdown()
        self.http.server_close()


def memory_env(home: Path, cache: Path) -> dict[str, str]:
    return {
        "MEMORY_AGENT_HOME": str(home),
        "MEMORY_AGENT_CACHE": str(cache),
        "MEMORY_AGENT_EMBEDDER": "minilm",
        "MEMORY_AGENT_IDLE_EXIT": "300",
        "PYTHONPATH": str(ROOT),
    }


def memory_agent(home: Path, cache: Path, *args: str, timeout: float = 300) -> str:
    """Run `memory-agent ARGS` (this checkout) and return its stdout; fail loudly."""
    env = base_env(HOME=str(home.parent), **memory_env(home, cache))
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(home.parent),
    )
    assert out.returncode == 0, f"memory-agent {args}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def init_home(home: Path, cache: Path) -> dict[str, Any]:
    """`memory-agent init --embedder minilm --demo --json`: the home and what it prints."""
    return json.loads(memory_agent(home, cache, "init", "--embedder", "minilm", "--demo", "--json"))


def printed(init: dict[str, Any], section: str, startswith: str) -> str:
    """The text `init --json` prints under `section` for the agent named `startswith`."""
    for key, value in init[section].items():
        if key.startswith(startswith):
            return value
    raise AssertionError(f"init --json prints no {section} for {startswith!r}: {init[section]}")


def has_connect() -> bool:
    """Whether this memory-agent has `connect` (it merges the settings into the agent's files)."""
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", "connect", "--help"],
        capture_output=True,
        timeout=60,
        env=base_env(PYTHONPATH=str(ROOT)),
    )
    return out.returncode == 0


def connect(agent: str, home: Path, cache: Path, run_env: dict[str, str]) -> bool:
    """`memory-agent connect AGENT --confirm` into the agent's files under run_env's HOME (and
    CODEX_HOME); False (nothing done) when this memory-agent has no `connect`: the caller then
    writes the files from what `init --json` prints."""
    if not has_connect():
        return False
    env = dict(run_env, **memory_env(home, cache))
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", "connect", agent, "--confirm", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, f"memory-agent connect {agent}: {out.stdout}\n{out.stderr}"
    return True


def stop_daemon(home: Path, cache: Path) -> None:
    try:
        memory_agent(home, cache, "stop", timeout=60)
    except (AssertionError, subprocess.TimeoutExpired):
        pass


def wait_for(check: Callable[[], Any], what: str, timeout: float = WAIT_TIMEOUT) -> Any:
    """Poll `check` until it returns something truthy (bounded); fail with `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def journal_records(home: Path) -> list[dict[str, Any]]:
    """Every record of every journal file (plain and gzipped) under <home>/journal."""
    records = []
    for path in sorted((home / "journal").glob("*.jsonl*")):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        for line in data.decode("utf-8", "replace").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def sessions(home: Path) -> dict[str, list[dict[str, Any]]]:
    by: dict[str, list[dict[str, Any]]] = {}
    for rec in journal_records(home):
        by.setdefault(rec.get("session", ""), []).append(rec)
    return by


def files_holding(root: Path, needles: tuple[str, ...]) -> list[str]:
    """`path: needle` for each file under `root` (gzip opened) that holds one of `needles`."""
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if path.suffix == ".gz":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError):
                pass
        for needle in needles:
            if needle.encode() in data:
                found.append(f"{path.relative_to(root)}: {needle}")
    return found


def git_log(kb: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(kb), "log", "--format=%H %s", "--name-only"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout


def lessons_or_proposals(home: Path, cache: Path) -> list[str]:
    """What the gate produced: proposals waiting (`proposals --json`) or `source: auto` lessons."""
    out = []
    try:
        props = json.loads(memory_agent(home, cache, "proposals", "--json", timeout=60))
    except (AssertionError, ValueError):
        props = {}
    for p in props.get("proposals", []) if isinstance(props, dict) else []:
        out.append(f"proposal {p.get('id')}: {p.get('title')}")
    for md in (home / "kb").rglob("*.md"):
        text = md.read_text(errors="replace")
        if "source: auto" in text.split("\n---", 1)[0]:
            out.append(f"lesson {md.relative_to(home / 'kb')}")
    return out


def request_text(body: Any) -> str:
    """A request body as one string (for 'is this text in what the model was sent')."""
    return json.dumps(body, ensure_ascii=False)
