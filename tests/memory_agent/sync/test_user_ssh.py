"""Sync uses the person's own ssh (issue 28, item 6): `core.sshCommand` in git's config, or
`GIT_SSH` in the environment - an identity key, a wrapper, a proxy command - is what git runs
for every fetch, push and clone memory-agent starts. Before the fix every one of them set
`GIT_SSH_COMMAND`, which overrides both: the person's ssh never ran, and a remote that needs it
failed to authenticate.

The remote here is reached through `ssh://fake-host/...`: only a wrapper that runs git's
command locally can serve it, and it leaves a mark each time it is run. A real ssh would fail
to resolve the host."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.kbs import Registry
from memory_agent.sync.clones import add_kb
from memory_agent.sync.remote import Syncer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the wrapper is a sh script")


def _wrapper(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for ssh: records its arguments, then runs git's command (its last argument)
    here instead of on the host."""
    marks = tmp_path / "ssh-calls.log"
    script = tmp_path / "my-ssh"
    script.write_text(
        f'#!/bin/sh\necho "$*" >> "{marks}"\nfor last; do :; done\nexec sh -c "$last"\n'
    )
    script.chmod(0o755)
    return script, marks


def _remote(tmp_path: Path) -> tuple[Path, str]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    return remote, f"ssh://fake-host{remote}"


def _syncer(kb: Path, tmp_path: Path) -> Syncer:
    KBRepo.init(kb)
    return Syncer(kb, tmp_path / "run", threading.RLock(), refresh=lambda paths: None)


def test_core_ssh_command_of_the_kb_is_what_fetch_and_push_run(tmp_path, monkeypatch):
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    monkeypatch.delenv("GIT_SSH", raising=False)
    script, marks = _wrapper(tmp_path)
    remote, url = _remote(tmp_path)
    kb = tmp_path / "kb"
    syncer = _syncer(kb, tmp_path)
    subprocess.run(["git", "-C", str(kb), "config", "core.sshCommand", str(script)], check=True)
    syncer.set_url(url)
    report = syncer.run()
    calls = marks.read_text()
    assert "fake-host" in calls and "git-receive-pack" in calls, calls  # fetched and pushed
    assert (
        report["branch"]
        and subprocess.run(
            ["git", "-C", str(remote), "rev-parse", "--verify", report["branch"]],
            capture_output=True,
        ).returncode
        == 0
    )


def test_git_ssh_in_the_environment_is_used_for_the_round(tmp_path, monkeypatch):
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)  # (git prefers a core.sshCommand)
    script, marks = _wrapper(tmp_path)
    monkeypatch.setenv("GIT_SSH", str(script))
    remote, url = _remote(tmp_path)
    syncer = _syncer(tmp_path / "kb", tmp_path)
    syncer.set_url(url)
    syncer.run()
    assert "git-upload-pack" in marks.read_text()


def test_a_global_ssh_command_serves_kb_add(tmp_path, monkeypatch):
    """`kb add` clones before any KB config exists: the person's global config is read."""
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    monkeypatch.delenv("GIT_SSH", raising=False)
    script, marks = _wrapper(tmp_path)
    config = tmp_path / "gitconfig"
    config.write_text(f"[core]\n\tsshCommand = {script}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    remote, url = _remote(tmp_path)
    seed = tmp_path / "seed"  # the team's remote holds one commit
    KBRepo.init(seed)
    subprocess.run(["git", "-C", str(seed), "push", "-q", str(remote), "HEAD:main"], check=True)
    home = tmp_path / "home"
    (home / "kbs").mkdir(parents=True)
    place = add_kb(Registry(home), "team", url)
    assert (place.dir / ".git").exists()
    assert "git-upload-pack" in marks.read_text()


def test_with_no_ssh_of_the_persons_own_ssh_runs_in_batch_mode(tmp_path, monkeypatch):
    from memory_agent.sync.transport import BATCH_SSH, network_env

    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    monkeypatch.delenv("GIT_SSH", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    kb = tmp_path / "kb"
    KBRepo.init(kb)
    assert network_env(kb)["GIT_SSH_COMMAND"] == BATCH_SSH
    subprocess.run(
        ["git", "-C", str(kb), "config", "core.sshCommand", "ssh -i ~/.ssh/x"], check=True
    )
    assert "GIT_SSH_COMMAND" not in network_env(kb)
