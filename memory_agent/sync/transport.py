"""Talking to the KB's remote: `git fetch` and `git push` of one branch (never forced), with no
prompt and a time limit, and the remote's URL as status and errors show it (credentials
masked). A round of sync (`memory_agent.sync.remote`) calls these; a team KB's clone
(`memory_agent.sync.clones`) uses the same masking and limit.

Credentials are git's business: nothing here reads or stores them. A remote that does not
answer is `RemoteUnreachable` (writes go on; the next round catches up), a push the remote
refuses by its own rule is `PushRefused`, and a push that lost the race to another machine is
`False` (the round fetches and goes again).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from memory_agent.errors import MemoryAgentError
from memory_agent.intake.redact import redact
from memory_agent.kb.gitrepo import KBRepo

__all__ = [
    "FETCH_TIMEOUT_S",
    "REMOTE",
    "PushRefused",
    "RemoteUnreachable",
    "fetch",
    "network_env",
    "push",
    "shown",
]

REMOTE = "origin"
FETCH_TIMEOUT_S = 120.0
_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://)([^/\s]*)@")  # to the last @ before /


def shown(text: str | None) -> str:
    """A remote URL (or git's message naming one) as status and errors show it, its
    credentials masked (git keeps the URL in the KB's config; nothing of ours stores it): a
    password, a user name that looks like a token, and over http(s) a user name alone (the
    token-only form `https://<token>@github.com/...`)."""
    return _USERINFO.sub(_masked, text or "")


def _masked(found: re.Match) -> str:
    scheme, userinfo = found.group(1), found.group(2)
    user, colon, _ = userinfo.partition(":")
    if redact(user) != user or (not colon and scheme.lower().startswith(("http", "ftp"))):
        user = "***"
    return f"{scheme}{user}{':***' if colon else ''}@"


class RemoteUnreachable(MemoryAgentError):
    code = "unavailable"


class PushRefused(RemoteUnreachable):
    """The remote's own rule refused the push (a hook, a protected branch)."""


BATCH_SSH = "ssh -o BatchMode=yes -o ConnectTimeout=15"


def network_env(repo: Path | None = None) -> dict[str, str]:
    """git's environment for a command that reaches a remote: never a prompt (a daemon has no
    terminal). Where the person set no ssh of their own - no `GIT_SSH_COMMAND` or `GIT_SSH`
    in the environment, no `core.sshCommand` in git's config as `repo` reads it (its own,
    global, system, includes) - ssh runs in batch mode with a connect timeout; otherwise
    theirs is used as it is (an identity key, a wrapper, a proxy command)."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    if "GIT_SSH_COMMAND" in env or "GIT_SSH" in env:
        return env
    where = ["-C", str(repo)] if repo is not None and Path(repo).is_dir() else []
    try:
        configured = subprocess.run(
            ["git", *where, "config", "--get", "core.sshCommand"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        configured = ""
    if not configured:
        env["GIT_SSH_COMMAND"] = BATCH_SSH
    return env


# git's last lines are advice ("Please make sure you have the correct access rights / and the
# repository exists."): the cause is its first line; what to check follows from the cause
_CHECKS = (
    (
        ("could not resolve", "name or service not known", "temporary failure in name resolution"),
        "the network and the host's name (DNS) - is this machine online?",
    ),
    (
        ("permission denied", "publickey", "authentication failed", "could not read username"),
        "git's credentials for this remote (ssh agent and key, credential helper, a token)",
    ),
    (
        ("not found", "does not appear to be a git repository", "no such file"),
        "the URL (`memory-agent remote set URL`) and your access to the repository",
    ),
    (
        ("timed out", "connection refused", "no route to host", "network is unreachable"),
        "the network, a firewall or proxy between here and the host",
    ),
)


def git_cause(stderr: str) -> tuple[str, str]:
    """(the cause git reported, what to check): the first line git printed (ssh's own when it
    failed), with git's `fatal:` line when that is another; masked."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    if not lines:
        return "git failed without saying why", "the URL, the network and git's credentials"
    cause = lines[0]
    fatal = next((x for x in lines[1:] if x.startswith("fatal:")), None)
    if fatal and fatal not in cause:
        cause = f"{cause} ({fatal})"
    lowered = cause.lower()
    check = next(
        (what for words, what in _CHECKS if any(w in lowered for w in words)),
        "the URL (`memory-agent remote set URL`), the network and git's credentials",
    )
    return shown(cause), check


def fetch(kb_dir: Path, branch: str, url: str | None, missing: Callable[[], None]) -> None:
    """`git fetch` the remote's `branch` into `refs/remotes/origin/<branch>`. A remote without
    that branch calls `missing` (an empty remote, or one holding other branches: that is
    `memory_agent.sync.upstream`'s to say); any other failure raises `RemoteUnreachable`."""
    try:
        proc = subprocess.run(
            [
                "git",
                "-C",
                str(kb_dir),
                "fetch",
                "--quiet",
                "--no-tags",
                REMOTE,
                f"+refs/heads/{branch}:refs/remotes/{REMOTE}/{branch}",
            ],
            capture_output=True,
            text=True,
            env=network_env(kb_dir),
            timeout=FETCH_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise RemoteUnreachable(
            f"fetching from {shown(url)} took over {FETCH_TIMEOUT_S:.0f} s",
            "check the network; writes go on and the next round catches up",
        ) from exc
    if proc.returncode != 0:
        err = proc.stderr.strip()
        if "couldn't find remote ref" in err:  # an empty remote (the push creates it)?
            return missing()
        cause, check = git_cause(err)
        raise RemoteUnreachable(
            f"cannot fetch from {shown(url)}: {cause}",
            f"check {check}; writes go on meanwhile and the next round catches up",
        )


def push(kb_dir: Path, branch: str, head: str, url: str | None) -> bool:
    """Push `head` to the remote's `branch` (never forced); False when the remote moved (the
    other side pushed first). On success the remote-tracking ref follows."""
    proc = subprocess.run(
        [
            "git",
            "-C",
            str(kb_dir),
            "push",
            "--quiet",
            "--porcelain",
            REMOTE,
            f"{head}:refs/heads/{branch}",
        ],
        capture_output=True,
        text=True,
        env=network_env(kb_dir),
        timeout=FETCH_TIMEOUT_S,
    )
    if proc.returncode == 0:
        KBRepo(kb_dir).git("update-ref", f"refs/remotes/{REMOTE}/{branch}", head)
        return True
    text = proc.stdout + proc.stderr
    if "[remote rejected]" in text:  # the remote's own rule (a hook, a protected branch)
        said = " / ".join(x[7:].strip() for x in text.splitlines() if x.startswith("remote:"))
        raise PushRefused(
            f"the remote {shown(url)} refused the push; it said (quoted, redacted): "
            f"{json.dumps(redact(shown(said.strip(' /') or text.strip()))[:300])}",
            "your commits stay here and the next round offers them again; a remote that "
            "refuses every push (a hook, a protected branch) needs its rule or your access "
            "changed",
        )
    if "[rejected]" in text or "non-fast-forward" in text or "fetch first" in text:
        return False  # the other side pushed first
    cause, check = git_cause(proc.stderr or proc.stdout)
    raise RemoteUnreachable(
        f"cannot push to {shown(url)}: {cause}",
        f"check {check}, and your write access; the next round retries",
    )
