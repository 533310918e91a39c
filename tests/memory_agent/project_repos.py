"""A git repository of a project, with its own remote (`_repo`)."""

from tests.memory_agent.helpers import git


def _repo(path, remote=None):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(
        path,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "start",
    )
    if remote:
        git(path, "remote", "add", "origin", remote)
    return path
