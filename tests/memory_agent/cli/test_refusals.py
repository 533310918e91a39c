"""A refusal as a person meets it on the command line: the preview runs the checks the confirm
will (a supersede's preview never promises what the confirm then refuses as a duplicate), and a
refusal exits 2, naming the entry it collides with and `--force` where that helps. Before, the
preview said "run again with --confirm", and the confirm was refused with exit 0. (Issue 34.)"""

import json
import os
import subprocess
import sys

import pytest

from memory_agent.client import DaemonClient

RELEASE = "Weekly release of kestrel-api, worker and kctl via release-please"


def run(home, cache, *args, json_out=True):
    env = dict(os.environ, MEMORY_AGENT_CACHE=str(cache), MEMORY_AGENT_IDLE_EXIT="120")
    env.pop("MEMORY_AGENT_HOME", None)
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)]
        + (["--json"] if json_out else []),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout) if json_out else proc.stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_cache):
    home = tmp_path_factory.mktemp("refusals") / "home"
    rc, _ = run(home, shared_cache, "init", "--embedder", "minilm", "--demo")
    assert rc == 0
    yield home
    DaemonClient(home).stop(wait=True)


def head(home):
    out = subprocess.run(["git", "-C", str(home / "kb"), "rev-parse", "HEAD"], capture_output=True)
    return out.stdout


def test_a_supersede_that_would_duplicate_another_entry_is_refused_at_its_preview(
    home, shared_cache
):
    rc, release = run(home, shared_cache, "get", "release-process")
    assert rc == 0
    near = release["body"].replace("Weekly, on Tuesdays", "Weekly, on Wednesdays")
    args = ["supersede", "cron-schedule-is-utc", "--title", RELEASE, "--body", near]
    before = head(home)

    rc, preview = run(home, shared_cache, *args)
    assert rc == 2 and preview["status"] == "duplicate"  # was: "preview", rc 0
    assert preview["duplicate_of"] == "release-process" and preview["match"] == "near"
    rc, said = run(home, shared_cache, *args, json_out=False)
    assert rc == 2
    assert "refused: duplicate of release-process" in said and "--force" in said
    rc, confirmed = run(home, shared_cache, *args, "--confirm")
    assert rc == 2 and confirmed["status"] == "duplicate"  # was: rc 0
    assert head(home) == before  # nothing written

    rc, forced = run(home, shared_cache, *args, "--force")
    assert rc == 0 and forced["status"] == "preview"
    assert forced["forced_past"] == "release-process"
    rc, done = run(home, shared_cache, *args, "--force", "--confirm")
    assert rc == 0 and done["status"] == "superseded" and head(home) != before


def test_an_exact_duplicate_added_exits_2_naming_the_entry(home, shared_cache):
    rc, release = run(home, shared_cache, "get", "release-process")
    args = ["add", "--title", RELEASE, "--body", release["body"], "--type", "process"]
    before = head(home)
    rc, reply = run(home, shared_cache, *args)
    assert rc == 2 and reply["duplicate_of"] == "release-process" and reply["match"] == "exact"
    rc, said = run(home, shared_cache, *args, "--force", json_out=False)
    assert rc == 2 and "refused: duplicate of release-process" in said  # --force passes near only
    assert head(home) == before
