"""Which project a directory belongs to: its identity, the same in every clone and worktree.

The identity is the normalised URL of the repository's `origin` remote (else its first
remote): scp-style, `ssh://` and `https://` forms are one - no user, no port, no `.git`, lower
case:

    git@github.com:Acme/Alpha.git       -> github.com/acme/alpha
    ssh://git@github.com:22/acme/alpha  -> github.com/acme/alpha
    https://github.com/acme/alpha/      -> github.com/acme/alpha

A remote that is a path on this machine (`/srv/git/alpha.git`, `file:///srv/git/alpha`) is
that absolute path without `.git`. A repository without a remote is identified by its root's
path (the main worktree's, so its worktrees share it): such an identity is local to this
machine (`Project.local`). Outside a repository there is no project (None: global).

The URL is the one git fetches from: `url.<base>.insteadOf` aliases applied (`gh:acme/alpha`
with `[url "git@github.com:"] insteadOf = gh:` is github.com/acme/alpha, the same project as
a clone made from the full URL), by `git ls-remote --get-url` when git's configuration has an
alias at all (one more process then; none otherwise - experiments/project-identity).

Asked of git (`rev-parse`, `config`), so worktrees, `GIT_DIR` files and `includeIf` configs
are read as git reads them. Standard library only: the hook calls it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

__all__ = ["GLOBAL", "Project", "ProjectCache", "identify", "normalize_remote", "short_name"]

GLOBAL = "global"  # the scope of what belongs to no project
_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>.+)$")  # user@host:path
_SCHEME = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<rest>.*)$", re.IGNORECASE)


class Project:
    """A project: `identity` ("github.com/acme/alpha", or an absolute path local to this
    machine), `root` (the repository's, the main worktree's when it has worktrees), `remote`
    (the URL the identity came from, aliases resolved; None without one), `local` (identified by
    a path: the same project elsewhere has another identity). A plain class: the hook imports
    this module, and `dataclasses` costs it milliseconds."""

    __slots__ = ("identity", "local", "remote", "root")

    def __init__(self, identity: str, root: str, remote: str | None, local: bool):
        self.identity, self.root, self.remote, self.local = identity, root, remote, local

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Project) and (
            self.identity,
            self.root,
            self.remote,
            self.local,
        ) == (other.identity, other.root, other.remote, other.local)

    def __hash__(self) -> int:
        return hash((self.identity, self.root))

    def __repr__(self) -> str:
        return f"Project({self.identity!r}, root={self.root!r}, local={self.local})"

    def describe(self) -> str:
        if self.local:
            why = "no remote" if self.remote is None else f"its remote is a path: {self.remote}"
            return f"{self.identity}  (local to this machine: {why})"
        return f"{self.identity}  (from {self.remote})"


def _strip(path: str) -> str:
    path = path.strip().rstrip("/")
    return path[:-4] if path.lower().endswith(".git") else path


def normalize_remote(url: str, base: str | Path | None = None) -> tuple[str, bool]:
    """(identity, local) of a remote URL. `base`: the directory a relative path remote is
    relative to (the repository's root)."""
    url = url.strip()
    found = _SCHEME.match(url)
    if found and found["scheme"].lower() == "file":
        return _strip(os.path.normpath(found["rest"] or "/")), True
    if found:  # ssh://user@host:port/path, https://user:pw@host/path, git://host/path
        rest = found["rest"]
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]
        if host.startswith("["):  # [::1]:22
            host = host[: host.find("]") + 1]
        else:
            host = host.split(":", 1)[0]
        return f"{host}/{_strip(path).lstrip('~').strip('/')}".lower(), False
    scp = _SCP.match(url)
    if scp and not url.startswith(("/", ".")) and "/" not in scp["host"]:
        return f"{scp['host']}/{_strip(scp['path']).lstrip('~').strip('/')}".lower(), False
    path = Path(os.path.expanduser(url))
    if not path.is_absolute():
        path = Path(base or os.getcwd()) / path
    return _strip(os.path.normpath(str(path))), True


def _git(directory: str, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", directory, *args],
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def identify(directory: str | Path) -> Project | None:
    """The project `directory` is in, or None outside a repository (or when it is gone)."""
    directory = os.path.abspath(os.path.expanduser(str(directory)))
    if not os.path.isdir(directory):
        return None
    where = _git(
        directory, "rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel"
    )
    if not where:
        return None
    lines = where.splitlines()
    common = lines[0] if lines else ""
    top = lines[1] if len(lines) > 1 else ""
    # The main worktree's root: the folder holding the common .git (a bare repository: itself)
    root = str(Path(common).parent) if Path(common).name == ".git" else (top or common)
    # The remotes' URLs and any `url.<base>.insteadOf` alias, in one process: a URL is
    # resolved as git resolves it (`gh:acme/alpha` -> git@github.com:acme/alpha) only when an
    # alias is configured - one more process then, none otherwise (the hook asks every prompt).
    found = _git(directory, "config", "--get-regexp", r"^(remote\..*\.url|url\..*\.insteadof)$")
    urls: dict[str, str] = {}
    aliased = False
    for line in (found or "").splitlines():
        key, _, url = line.partition(" ")
        if key.startswith("url.") and key.endswith(".insteadof"):
            aliased = True
            continue
        name = key[len("remote.") : -len(".url")]
        if url and name not in urls:
            urls[name] = url
    name = "origin" if urls.get("origin") else next(iter(urls), None)
    if name is None:
        return Project(root, root, None, True)
    remote = urls[name]
    if aliased:
        resolved = (_git(directory, "ls-remote", "--get-url", name) or "").strip()
        remote = resolved or remote
    identity, local = normalize_remote(remote, root)
    return Project(identity, root, remote, local)


def short_name(identity: str) -> str:
    """A readable name for a project: the last part of its identity, as a slug
    (`github.com/acme/alpha` -> `alpha`)."""
    parts = [p for p in re.split(r"[/\\]+", identity) if p]
    slug = re.sub(r"[^a-z0-9]+", "-", (parts[-1] if parts else "project").lower()).strip("-")
    if slug == GLOBAL:
        slug = "global-project"
    return (slug or "project")[:60].strip("-") or "project"


class ProjectCache:
    """`identify`, remembered per directory for `ttl` seconds (the daemon asks per call)."""

    def __init__(self, ttl: float = 30.0):
        import threading

        self.ttl = ttl
        self._known: dict[str, tuple[float, Project | None]] = {}
        self._lock = threading.Lock()

    def of(self, directory: str | None) -> Project | None:
        if not directory:
            return None
        import time

        now = time.monotonic()
        with self._lock:
            seen = self._known.get(directory)
        if seen is not None and now - seen[0] < self.ttl:
            return seen[1]
        project = identify(directory)
        with self._lock:
            if len(self._known) > 1000:
                self._known.clear()
            self._known[directory] = (now, project)
        return project
