"""Knowledge bases and bare remotes on disk: a KB joined to a remote by a first round of a real
`Syncer` (`kb_with_remote`), two machines' KBs on one remote (`two_kbs_on_branches`), an entry
written and staged by hand (`note`), every git process logged (`log_git_calls`), a token the secret
scan must catch (`TOKEN`); two homes in step (`same_and_clean`, `join_both`)."""

import os
import re
import shutil
import subprocess
import threading

from memory_agent.kb.gitrepo import KBRepo
from memory_agent.sync.remote import Syncer
from tests.memory_agent.helpers import commit, git


def same_and_clean(a, b):
    """Both homes hold the same files, git is sound, and no conflict marker is anywhere."""
    assert a.files() == b.files()
    for home in (a, b):
        git(home.kb, "fsck", "--no-progress")
        for text in home.files().values():
            assert not re.search(r"^(<<<<<<<|>>>>>>>|=======)( |$)", text, re.M)


def join_both(a, b, remote):
    """Both homes on the remote, each synced once (a first, then b takes its history)."""
    for home in (a, b):
        home.cli("remote", "set", str(remote))
    a.sync()
    b.sync()


def kb_with_remote(tmp_path):
    """A KB and a bare remote on disk, joined by a first round of a real `Syncer`."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    kb = tmp_path / "kb"
    KBRepo.init(kb)
    syncer = Syncer(kb, tmp_path / "run", threading.RLock(), refresh=lambda paths: None)
    syncer.set_url(str(remote))
    syncer.run()
    return kb, remote, syncer


def log_git_calls(tmp_path, monkeypatch):
    """Every git process started from here on is logged (a shim in front of the real git)."""
    calls = tmp_path / "calls.log"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("git")} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    calls.touch()
    return calls


TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def note(kb, entry_id, body, folder="note"):
    (kb / folder).mkdir(exist_ok=True)
    (kb / folder / f"{entry_id}.md").write_text(
        f"---\nid: {entry_id}\ntitle: {entry_id}\ntype: {folder}\nstatus: active\n"
        f"created: 2026-11-01T00:00:00Z\n---\n{body}\n"
    )
    git(kb, "add", f"{folder}/{entry_id}.md")


def two_kbs_on_branches(tmp_path, first: str, second: str):
    """Two machines' KBs made by `git init` under different `init.defaultBranch` settings
    (`main` on one, git's own `master` on the other), both with an entry of their own."""
    import threading

    from memory_agent.kb.gitrepo import KBRepo
    from memory_agent.sync.remote import Syncer

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    out = []
    for name, branch in (("a", first), ("b", second)):
        kb = tmp_path / name / "kb"
        kb.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", branch, str(kb)], check=True)
        KBRepo.init(kb)
        note(kb, f"from-{name}", f"Written on machine {name}.")
        commit(kb, f"from {name}")
        syncer = Syncer(kb, tmp_path / name / "run", threading.RLock(), refresh=lambda p: None)
        syncer.set_url(str(remote))
        out.append((kb, syncer))
    return remote, out
