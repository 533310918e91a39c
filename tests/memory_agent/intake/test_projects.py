"""Which project a folder is in: every form of a remote's URL is one identity, a path remote is
local and keeps its case, clones and worktrees share a project and a repository without a remote is
its root. (Issue 20.)"""

import pytest

from memory_agent.intake.projects import identify, normalize_remote, short_name
from tests.memory_agent.helpers import git
from tests.memory_agent.project_repos import _repo


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Acme/Alpha.git",
        "ssh://git@github.com/acme/alpha",
        "ssh://git@github.com:22/acme/alpha.git",
        "https://github.com/acme/alpha",
        "https://someone:token@GitHub.com:443/Acme/Alpha.git/",
        "git://github.com/acme/alpha.git",
    ],
)
def test_every_form_of_a_remote_url_is_one_identity(url):
    assert normalize_remote(url) == ("github.com/acme/alpha", False)


def test_a_path_remote_is_local_and_keeps_its_case(tmp_path):
    assert normalize_remote("/srv/Git/alpha.git") == ("/srv/Git/alpha", True)
    assert normalize_remote("file:///srv/Git/alpha") == ("/srv/Git/alpha", True)
    assert normalize_remote("../up/alpha.git", tmp_path / "repo") == (
        str(tmp_path / "up" / "alpha"),
        True,
    )
    assert short_name("github.com/acme/alpha") == "alpha"
    assert short_name("/home/me/My Notes") == "my-notes"


def test_clones_and_worktrees_share_a_project_and_a_repo_without_remote_is_its_root(tmp_path):
    alpha = _repo(tmp_path / "alpha", "git@github.com:Acme/Alpha.git")
    (alpha / "src" / "deep").mkdir(parents=True)
    clone = _repo(tmp_path / "elsewhere" / "alpha-clone", "https://github.com/acme/alpha")
    git(alpha, "worktree", "add", "-q", str(tmp_path / "alpha-wt"))
    for folder in (alpha, alpha / "src" / "deep", clone, tmp_path / "alpha-wt"):
        found = identify(folder)
        assert found is not None and found.identity == "github.com/acme/alpha", folder
        assert not found.local
    git(alpha, "remote", "add", "backup", "git@example.com:x/other.git")
    assert identify(alpha).identity == "github.com/acme/alpha"  # origin wins
    bare = _repo(tmp_path / "notes")
    git(bare, "worktree", "add", "-q", str(tmp_path / "notes-wt"))
    for folder in (bare, tmp_path / "notes-wt"):
        found = identify(folder)
        assert found.identity == str(bare) and found.local and found.remote is None
        assert "local to this machine" in found.describe()
    outside = tmp_path / "plain"
    outside.mkdir()
    assert identify(outside) is None
    assert identify(tmp_path / "gone") is None


# -- url.<base>.insteadOf (issue 33, item 4) -----------------------------------------------------
# Before: a clone made as `gh:acme/alpha` was the project `gh/acme/alpha`, another than the one of
# a clone of `git@github.com:acme/alpha`, so neither saw the other's entries.
def test_a_remote_written_with_an_insteadof_alias_is_the_project_it_stands_for(
    tmp_path, person_git
):
    full = _repo(tmp_path / "alpha", "git@github.com:acme/alpha.git")
    short = _repo(tmp_path / "alpha-by-alias", "gh:acme/alpha")  # the person's global alias
    local = _repo(tmp_path / "alpha-local-alias", "work:acme/alpha")
    git(local, "config", "url.https://github.com/.insteadOf", "work:")  # the repository's own
    for folder in (full, short, local):
        found = identify(folder)
        assert found.identity == "github.com/acme/alpha" and not found.local, folder
    assert identify(short).remote == "git@github.com:acme/alpha"  # (as git resolves it)
    # the longest alias wins, as in git
    git(local, "config", "url.ssh://git@gitlab.example.com/.insteadOf", "work:acme/")
    assert identify(local).identity == "gitlab.example.com/alpha"


def test_without_an_alias_identify_runs_two_git_processes(tmp_path, monkeypatch):
    """The hook identifies the project at every prompt: no alias configured, no third git."""
    import os

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = _repo(tmp_path / "alpha", "git@github.com:acme/alpha.git")
    calls = tmp_path / "calls"
    shim = tmp_path / "bin"
    shim.mkdir()
    real = __import__("shutil").which("git")
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    assert identify(repo).identity == "github.com/acme/alpha"
    assert len(calls.read_text().splitlines()) == 2
