"""Adding and removing a KB beside the personal one (`memory-agent kb add NAME URL`, `kb
remove NAME`): a git clone at `<home>/kbs/<name>/` with its own remote, listed in
`<home>/kbs.json` (`memory_agent.kb.kbs`). docs/adr/0017-team-kb.md.

- `add` clones (no lock held: the network is slow); an empty remote gets a KB's first commit
  here, which the first round of sync pushes. Then the registry names it and the next refresh
  indexes its entries (ids `<name>:<id>`).
- `remove` never loses anything: it refuses while the clone holds a write not yet finished,
  an uncommitted edit or a commit no remote has (naming them, and `memory-agent sync`), and
  then moves the clone aside to `<home>/kbs/.removed/` rather than delete it. Its entries
  leave the index at the next refresh.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from memory_agent.errors import Conflict, GitError, Invalid
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.kbs import KbPlace, Registry, check_name
from memory_agent.sync.transport import FETCH_TIMEOUT_S, REMOTE, network_env, shown

__all__ = ["add_kb", "remove_kb", "unpushed"]

REMOVED = ".removed"


def add_kb(registry: Registry, name: Any, url: Any, writable: bool = True) -> KbPlace:
    """Clone `url` as the KB `name` and list it in the registry; its place."""
    name = check_name(name)
    if not isinstance(url, str) or not url.strip() or "\n" in url:
        raise Invalid(f"kb add: {url!r} is not a URL", "pass a path, an ssh or an https URL")
    url = url.strip()
    if any(p.name == name for p in registry.others()):
        raise Conflict(
            f"kb: {name} is already in this home",
            f"`memory-agent kb list` shows it; `memory-agent kb remove {name}` first to re-add it",
        )
    dest = registry.clones / name
    if dest.exists() or dest.is_symlink():
        raise Conflict(
            f"{dest} is in the way of the clone",
            f"move {dest} elsewhere, then run `memory-agent kb add {name} URL` again",
        )
    registry.clones.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            ["git", "clone", "--quiet", "--origin", REMOTE, url, str(dest)],
            capture_output=True,
            text=True,
            env=network_env(),
            timeout=FETCH_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(dest, ignore_errors=True)  # a partial clone of ours holds nothing
        raise GitError(
            f"cloning {shown(url)} took over {FETCH_TIMEOUT_S:.0f} s",
            "check the network, then run `memory-agent kb add` again",
        ) from exc
    if proc.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        err = proc.stderr.strip().splitlines()
        raise GitError(
            f"cannot clone {shown(url)}: {shown(err[-1]) if err else 'git clone failed'}",
            "check the URL, the network and git's credentials (ssh agent, credential helper)",
        )
    repo = KBRepo(dest)
    if not repo.succeeds("rev-parse", "-q", "--verify", "HEAD^{commit}"):
        branches = repo.git(
            "for-each-ref", "--format=%(refname:lstrip=3)", f"refs/remotes/{REMOTE}/"
        ).split()
        if branches:  # the remote's HEAD names no branch (a bare repository's `master`)
            branch = "main" if "main" in branches else branches[0]
            repo.git("checkout", "-q", "-B", branch, f"{REMOTE}/{branch}")
        else:  # an empty remote: this home makes the KB's first commit; a sync pushes it
            repo.git("symbolic-ref", "HEAD", "refs/heads/main")
            repo.git("commit", "-q", "--allow-empty", "-m", "memory-agent: new knowledge base")
    KBRepo.init(dest)  # records the branch the memory writes to
    registry.add(name, writable)
    return registry.get(name)


def unpushed(place: KbPlace) -> list[str]:
    """The commits of `place` no remote-tracking branch holds (`<short hash> <subject>`)."""
    out = KBRepo(place.dir).git(
        "log", "--format=%h %s", "HEAD", "--not", f"--remotes={REMOTE}", check=False
    )
    return [line for line in out.splitlines() if line.strip()]


def remove_kb(registry: Registry, name: Any, clock: Any = time.time) -> dict[str, Any]:
    """Take the KB `name` out of the home, keeping its clone aside; what was done."""
    place = registry.get(name) if isinstance(name, str) and name else registry.personal()
    if place.personal:
        raise Invalid(
            "kb remove: the personal KB stays (it is the home's own)",
            "name a KB `memory-agent kb list` shows besides personal",
        )
    pending = place.run_dir / "pending" if place.run_dir is not None else None
    if pending is not None and pending.is_dir() and any(pending.glob("*.json")):
        raise Conflict(
            f"kb {name} has a write not finished yet (in {pending})",
            "start the daemon (any memory-agent command) so it finishes the write, then retry",
        )
    if place.dir.is_dir():
        repo = KBRepo(place.dir)
        dirty = repo.git("status", "--porcelain", check=False).splitlines()
        if dirty:
            raise Conflict(
                f"kb {name} holds uncommitted changes: {', '.join(d[3:] for d in dirty[:5])}; "
                "nothing was removed",
                f"commit or revert them in {place.dir}, then `memory-agent kb remove {name}`",
            )
        commits = unpushed(place)
        if commits and not place.writable:  # its rounds never push: sync is no way out
            branch = repo.branch() or "main"
            raise Conflict(
                f"kb {name} holds {len(commits)} commit(s) made by hand that no remote has: "
                f"{'; '.join(commits[:5])}; it was added read-only, so no round pushes them; "
                "nothing was removed",
                f"keep them on a branch and step back to the remote's ("
                f"`git -C {place.dir} branch kept-by-hand`, then "
                f"`git -C {place.dir} reset --keep origin/{branch}`), then "
                f"`memory-agent kb remove {name}`: the clone, branch included, is moved aside",
            )
        if commits:
            raise Conflict(
                f"kb {name} holds {len(commits)} commit(s) no remote has: "
                f"{'; '.join(commits[:5])}; nothing was removed",
                f"run `memory-agent sync --kb {name}` to push them, then "
                f"`memory-agent kb remove {name}`",
            )
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(clock()))
    aside = registry.clones / REMOVED / f"{name}-{stamp}"
    aside.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    moved = None
    if place.dir.exists():
        place.dir.rename(aside)
        moved = str(aside)
    if place.run_dir is not None and place.run_dir.is_dir():
        place.run_dir.rename(Path(f"{aside}.run"))  # its records go with it
    registry.remove(name)
    return {"kb": name, "removed": True, "moved_to": moved}
