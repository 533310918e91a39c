"""Running one git command: `git -C <repo> ...` as a short process under one lock rule, its
failure turned into a `GitError` that says what to do.

Plain `git` subprocesses (no library): every call is one short-lived process with its stderr
captured, so a long-running daemon holds no git handles between writes. Commits work on a
machine with no git identity configured (memory-agent's own), and nothing asks for input.
Every command runs under one lock rule (`process`): a command that found git's lock taken is
retried for up to LOCK_WAIT_S, then fails naming the git process that holds the lock, or the
stale lock and the `rm` that removes it (or, where the process table cannot be read - no
/proc, another user's git - says it cannot tell, and never calls the lock stale).

memory-agent never signs (docs/adr/0021-memory-agent-never-signs.md): every command runs with
`commit.gpgSign=false` and `log.showSignature=false` (`OWN_CONFIG`), whatever the person's
git configuration says - a daemon cannot answer gpg's passphrase prompt or a key's touch, and
a `git log` that shows signatures mixes gpg's lines into the output memory-agent reads. Every
command has a time limit (GIT_TIMEOUT_S): a git that waits for something (a program its
configuration runs) fails naming the command, it does not wedge the write path or a round.

Which commands the knowledge base's repository runs, and why: `memory_agent.kb.gitrepo`.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from memory_agent.errors import GitError

__all__ = [
    "GIT_TIMEOUT_S",
    "LOCK_WAIT_S",
    "OWN_CONFIG",
    "PROC_ROOT",
    "STALE_AFTER_S",
    "fix_for",
    "git_processes",
    "process",
    "run",
]

# What memory-agent's git commands run with, whatever the person's configuration says: no
# signature asked of gpg (a commit made by plumbing, `commit-tree`, is unsigned anyway; `git
# commit`, `git init`'s first commit and a replay's commit would be signed), and none shown in a
# log memory-agent reads (`log.showSignature` puts gpg's lines before `--format`'s output).
OWN_CONFIG = ("-c", "commit.gpgSign=false", "-c", "log.showSignature=false")
GIT_TIMEOUT_S = 300.0  # one local git command (a checkout of a large KB takes seconds)
AUTHOR_NAME = "memory-agent"
AUTHOR_EMAIL = "memory-agent@localhost"


def fix_for(stderr: str, repo: Path) -> str:
    """What a person can do about a failed git command, from what git said. (A busy lock never
    gets here: `process` waits for it and says who holds it.)"""
    if _disk_full(stderr):
        return f"the disk holding {repo} is full: free some space on it, then retry"
    if "Permission denied" in stderr or "Read-only file system" in stderr:
        return f"make {repo} (and its .git folder) writable by this user"
    if re.search(r"\bdate\b", stderr.lower()):  # (not "update_ref")
        return "check the GIT_AUTHOR_DATE / GIT_COMMITTER_DATE variables and the system clock"
    return f"run the command by hand in {repo} to see the whole error"


def _disk_full(stderr: str) -> bool:
    return "No space left on device" in stderr or "Disk quota exceeded" in stderr


# -- one rule for git's lock files, for every git command memory-agent runs -------------------
# git takes `.git/index.lock` (and `<ref>.lock`) for a moment; an editor's `git status` loop
# holds it again and again. A command that found the lock taken did nothing, so it is run
# again, waiting up to LOCK_WAIT_S. Past that bound the error says who holds the lock: a live
# git process in the KB (wait for it; never remove the lock under it), or nobody (a lock older
# than STALE_AFTER_S that no git process holds was left by one that died: remove it). Where
# the process table cannot be read (no /proc, as on macOS; a git process of another user,
# whose cwd is hidden), nobody is not known: `git commit` holds index.lock for as long as its
# user types the message, so such a lock is waited for and never called stale.
LOCK_WAIT_S = 10.0
STALE_AFTER_S = 10.0
_LOCKED = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def _locked_path(stderr: str) -> Path | None:
    m = _LOCKED.search(stderr)
    return Path(m.group(1)) if m else None


PROC_ROOT = "/proc"  # the process table (read when used); KBRepo(proc_root=...) reads another


def git_processes(repo: Path, proc_root: str | Path | None = None) -> list[tuple[int, str]] | None:
    """(pid, command line) of the git processes working in `repo` (their cwd is in it), from
    the process table at `proc_root`. None when it cannot tell: no process table there (no
    /proc, or one that does not list this very process), or none found but a git process
    whose cwd could not be read (another user's)."""
    root = str(Path(repo).resolve())
    table = Path(PROC_ROOT if proc_root is None else proc_root)
    found = []
    me = os.getpid()
    try:
        pids = [int(n) for n in os.listdir(table) if n.isdigit()]
    except OSError:
        pids = []
    if me not in pids:  # not this machine's process table (no /proc: macOS, BSD)
        return _git_processes_ps(root) if proc_root is None else None
    unknown = False
    for pid in pids:
        if pid == me:
            continue
        try:
            comm = (table / str(pid) / "comm").read_text().strip()
        except OSError:
            continue  # gone meanwhile
        if comm != "git" and not comm.startswith("git-"):
            continue
        try:
            cwd = os.readlink(table / str(pid) / "cwd")
        except FileNotFoundError:
            if (table / str(pid)).exists() and not _exited(table / str(pid)):
                unknown = True  # no cwd to read (another user's process, a restricted /proc)
            continue
        except OSError:
            unknown = True  # another user's process: it may be working in `repo`
            continue
        if cwd != root and not cwd.startswith(root + os.sep):
            continue
        try:
            argv = (table / str(pid) / "cmdline").read_bytes().split(b"\0")
            cmd = " ".join(a.decode(errors="replace") for a in argv if a)
        except OSError:
            cmd = ""
        found.append((pid, cmd[:200] or comm))
    if not found and unknown:
        return None
    return sorted(found)


def _git_processes_ps(root: str) -> list[tuple[int, str]] | None:
    """`git_processes` where there is no /proc (macOS, the BSDs): `ps` lists the git
    processes, `lsof` names each one's working folder. None when either cannot tell (no such
    command - Windows -, or a git process whose folder `lsof` does not show)."""
    try:
        listed = subprocess.run(
            ["ps", "-axo", "pid=,comm=,args="], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return None
    found, unknown = [], False
    for line in listed.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) == os.getpid():
            continue
        comm = os.path.basename(parts[1])
        if comm != "git" and not comm.startswith("git-"):
            continue
        pid = int(parts[0])
        try:
            cwd_out = subprocess.run(
                ["lsof", "-a", "-d", "cwd", "-p", str(pid), "-Fn"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        cwd = next((x[1:] for x in cwd_out.splitlines() if x.startswith("n")), None)
        if cwd is None:
            unknown = True  # gone meanwhile, or another user's
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            found.append((pid, (parts[2] if len(parts) > 2 else comm)[:200]))
    if not found and unknown:
        return None
    return sorted(found)


def _exited(proc_dir: Path) -> bool:
    """Whether the process has exited (a zombie not reaped yet, or gone): it holds no lock."""
    try:
        return proc_dir.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (OSError, IndexError):
        return not proc_dir.exists()


def _lock_age(lock: Path) -> float | None:
    try:
        return max(0.0, time.time() - lock.stat().st_mtime)
    except OSError:
        return None  # gone meanwhile: worth another try


def _lock_error(
    args: Sequence[str], repo: Path, lock: Path, waited: float, proc_root: str | Path | None = None
) -> GitError:
    holders = git_processes(repo, proc_root)
    what = f"`git {_command(args)}` in {repo} found {lock} taken"
    if holders is None:
        return GitError(
            f"{what} for {waited:.0f} s; cannot tell whether a git process holds it (the "
            f"process table {proc_root or PROC_ROOT} cannot be read here, or not wholly)",
            f"wait for any git command in {repo} to finish (a `git commit` holds the lock "
            "while its message is typed; an editor runs git too), then retry; only if none is "
            f"running, remove it: rm {lock}",
        )
    if holders:
        names = "; ".join(f"pid {pid}: {cmd}" for pid, cmd in holders[:3])
        return GitError(
            f"{what} for {waited:.0f} s: git is running there ({names})",
            f"wait for that git command to finish (do not remove {lock.name} while it runs), "
            "then retry",
        )
    age = _lock_age(lock)
    if age is not None and age >= STALE_AFTER_S:
        return GitError(
            f"{what}: a stale lock - no git process is running in {repo} and the lock is "
            f"{age:.0f} s old (a git command that died left it)",
            f"remove it: rm {lock}   then retry",
        )
    return GitError(
        f"{what} for {waited:.0f} s; no git process is running there now",
        f"retry; if it persists and no git command is running in {repo}, remove it: rm {lock}",
    )


_IDENTITY: dict[str, tuple[str, str]] = {}  # repo -> (name, email) its commits carry


def identity(repo: Path) -> tuple[str, str]:
    """Who a commit in `repo` is by: the person's git identity (user.name and user.email as
    git reads them for this repository), else memory-agent's own - commits work on a
    machine with no identity configured. Asked once per repository and process."""
    key = str(repo)
    if key not in _IDENTITY:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))
        }
        found = []
        for name in ("user.name", "user.email"):
            try:
                out = subprocess.run(
                    ["git", "-C", key, "config", "--get", name],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=10,
                )
                found.append(out.stdout.strip() if out.returncode == 0 else "")
            except (OSError, subprocess.SubprocessError):
                found.append("")
        _IDENTITY[key] = (found[0], found[1]) if all(found) else (AUTHOR_NAME, AUTHOR_EMAIL)
    return _IDENTITY[key]


def machine_name() -> str:
    """This machine's name, for the `Memory-Agent-Machine` trailer of a commit (setting it
    through MEMORY_AGENT_MACHINE names it otherwise)."""
    import socket

    return os.environ.get("MEMORY_AGENT_MACHINE") or socket.gethostname() or "unknown"


def _env(repo: Path | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    # Commits carry the person's identity (or memory-agent's); nothing asks for input. An
    # author set in the environment or in `extra` (a replayed commit's) is kept.
    name, email = identity(repo) if repo is not None else (AUTHOR_NAME, AUTHOR_EMAIL)
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C", **(extra or {}))
    env.setdefault("GIT_AUTHOR_NAME", name)
    env.setdefault("GIT_AUTHOR_EMAIL", email)
    env.setdefault("GIT_COMMITTER_NAME", name)
    env.setdefault("GIT_COMMITTER_EMAIL", email)
    return env


def _command(args: Sequence[str]) -> str:
    """The git command `args` run, past any `-c name=value` before it (for messages)."""
    i = 0
    while i < len(args) - 1 and args[i] == "-c":
        i += 2
    return args[i] if i < len(args) else "?"


def process(
    repo: Path,
    *args: str,
    text: bool = True,
    lock_wait: float | None = None,
    proc_root: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    """Run `git args` in `repo` under the lock rule: a command that found a lock taken is run
    again until LOCK_WAIT_S has passed; past it, or at once when the lock is stale, the lock
    error (`GitError`, naming the holder or the command that removes a stale lock). `env`:
    variables set for this command (a replayed commit's author); `timeout`: its time limit
    (GIT_TIMEOUT_S when None), past which it is killed and `GitError` names it; `input`: its
    standard input (else none)."""
    bound = LOCK_WAIT_S if lock_wait is None else lock_wait
    limit = GIT_TIMEOUT_S if timeout is None else timeout
    started = time.monotonic()
    delay = 0.01
    while True:
        try:
            proc = subprocess.run(
                ["git", "-C", str(repo), *OWN_CONFIG, *args],
                capture_output=True,
                text=text,
                env=_env(repo, env),
                **({"stdin": subprocess.DEVNULL} if input is None else {"input": input}),
                timeout=limit,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(
                f"`git {_command(args)}` in {repo} did not finish in {limit:.0f} s and was stopped",
                f"something git runs may be waiting (a hook, a filter or a helper its "
                f"configuration names); run `git -C {repo} {' '.join(args[:3])}` by hand to "
                "see what it waits for, then retry",
            ) from exc
        except OSError as exc:
            raise GitError(f"could not run git ({exc.strerror})", "install git") from exc
        if proc.returncode == 0:
            return proc
        err = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
        lock = _locked_path(err)
        if lock is None:
            return proc
        waited = time.monotonic() - started
        if waited >= bound:
            raise _lock_error(args, repo, lock, waited, proc_root)
        age = _lock_age(lock)
        if age is not None and age >= STALE_AFTER_S and git_processes(repo, proc_root) == []:
            raise _lock_error(args, repo, lock, waited, proc_root)  # stale: no wait
        time.sleep(min(delay, max(0.0, bound - waited)))
        delay = min(delay * 2, 0.2)


def run(
    repo: Path,
    *args: str,
    check: bool = True,
    lock_wait: float | None = None,
    proc_root: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    input: str | None = None,
) -> str:
    """The stdout of `git args` in `repo`; a failure raises `GitError` unless check=False (a
    lock that stays taken raises in any case)."""
    proc = process(
        repo, *args, lock_wait=lock_wait, proc_root=proc_root, env=env, timeout=timeout, input=input
    )
    if proc.returncode != 0 and check:
        stderr = " ".join(proc.stderr.split())[:500]
        if _disk_full(stderr):
            raise GitError(
                f"the disk is full: `git {_command(args)}` could not write in {repo} ({stderr})",
                fix_for(stderr, repo),
            )
        raise GitError(f"`git {_command(args)}` failed in {repo}: {stderr}", fix_for(stderr, repo))
    return proc.stdout
