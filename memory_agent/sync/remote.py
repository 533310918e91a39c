"""The knowledge base shared through a git remote: fetch, replay, push - never force.
`memory-agent remote set URL` (credentials are git's business), `memory-agent sync` (one round
now; the daemon runs them on its own). A round (`Syncer.run`):

1. `git fetch` the KB's branch from `origin` (no lock held: writes never wait for the network;
   `memory_agent.sync.transport` talks to the remote).
2. Only ahead: push. Only behind: fast-forward. Diverged (or two unrelated first commits: every
   home starts its own): **replay this machine's unpushed commits on upstream in a temporary
   worktree** (`memory_agent.sync.replay`), one commit each with its message and author, the files merged by what they mean
   (`memory_agent.sync.merging`: no conflict marker is ever written). A KB holding only what
   `init` wrote takes upstream's history as it is.
3. The incoming entries are embedded into the embedding cache, still with no lock held.
4. Under the write lock, for that moment alone: the branch is still where the replay started
   (else the round starts again), a rescue ref keeps the old head
   (`refs/memory-agent/rescue/<time>`), and `git reset --keep` moves the branch and the files
   (a person's uncommitted edits stay). The index follows the files.
5. The commits to publish, their files and their messages, are scanned with capture's secret
   patterns (`memory_agent.sync.publish`: one holding a secret is refused, naming the file or
   the commit and the way out), then `git push` - never forced. Refused because
   the other side pushed first: the round starts again (three times); refused by the remote's
   own rule (a hook, a protected branch): said so, the commits kept for the next round.
6. Upstream rewritten (the last upstream commit synced is no longer in its history): nothing
   is pushed or replayed, every local commit is kept, and the round fails naming the fix.

What a round did and what waits for a person (forks, variants, a stop) is kept in
`<home>/run/remote.json` for `status`, with the rounds a person has not been shown yet
(`memory_agent.sync.rounds`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memory_agent.errors import Conflict, GitError, Invalid, MemoryAgentError, NotReady
from memory_agent.faults import NONE, Faults
from memory_agent.kb.entries import parse_entry
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.sync.merging import VARIANTS
from memory_agent.sync.publish import check_quiet, check_secrets
from memory_agent.sync.replay import clean_stale, replay
from memory_agent.sync.rounds import mark_seen, note_round, unseen
from memory_agent.sync.transport import FETCH_TIMEOUT_S, REMOTE, fetch, push, shown
from memory_agent.sync.upstream import check_missing_branch, refused_commit, set_remote

__all__ = ["Syncer", "UpstreamRewritten"]

_RECORD_LOCKS: dict[str, threading.Lock] = {}
_RECORD_LOCKS_GUARD = threading.Lock()


def _record_lock(path: Path) -> threading.Lock:
    """One lock per record file in this process (a Syncer is made per request)."""
    with _RECORD_LOCKS_GUARD:
        return _RECORD_LOCKS.setdefault(str(path), threading.Lock())


SYNCED_REF = "refs/memory-agent/synced"  # the upstream commit the last round ended on
RESCUE_REFS = "refs/memory-agent/rescue/"
ROUNDS = 3  # a round restarted (a write meanwhile, a push refused) at most this often
PRE_EMBED_BATCH = 32  # incoming entries embedded per step (progress moves this often)


class UpstreamRewritten(Conflict):
    pass


class Syncer:
    """One KB's remote: its URL, a round of sync, and the record of the last round."""

    def __init__(
        self,
        kb_dir: Path,
        run_dir: Path,
        write_lock: Any,
        refresh: Callable[[list[Path]], Any],
        clock: Callable[[], float] = time.time,
        pre_embed: Callable[[list[tuple[str, str]]], Any] | None = None,
        faults: Faults = NONE,
        push: bool = True,
    ):
        self.push = push  # False: a KB added read-only only pulls (docs/adr/0017-team-kb.md)
        self.kb_dir = kb_dir
        self.run_dir = run_dir
        self.write_lock = write_lock
        self.refresh = refresh  # (paths) -> brings their documents in line (under write_lock)
        self.clock = clock
        # (path, text) of incoming entries -> their chunks embedded into the embedding cache,
        # with no lock held (`_prepare`); the move's refresh then finds them cached
        self.pre_embed = pre_embed
        self.progress: dict[str, Any] | None = None  # a round's pre-embedding, for `status`
        self.faults = faults  # the test seam (memory_agent.faults): "pause-sync-embed"
        self._waiting: tuple[Any, dict[str, Any]] | None = None  # (the KB's state, forks...)

    @property
    def repo(self) -> KBRepo:
        return KBRepo(self.kb_dir)

    # -- the remote -----------------------------------------------------------------------
    def url(self) -> str | None:
        return self.repo.git("config", "--get", f"remote.{REMOTE}.url", check=False).strip() or None

    def set_url(self, url: str) -> dict[str, Any]:
        if not isinstance(url, str) or not url.strip() or "\n" in url:
            raise Invalid(f"remote: {url!r} is not a URL", "pass a path, an ssh or an https URL")
        set_remote(self.kb_dir, REMOTE, url.strip(), self.url(), self.branch(), SYNCED_REF)
        with self._updating() as record:
            record["stopped"] = None  # the URL itself stays git's
        return {"remote": shown(url.strip()), "branch": self.branch()}

    def branch(self) -> str:
        repo = self.repo
        return repo.recorded_branch() or repo.branch() or "main"

    # -- the record of the last round -------------------------------------------------------
    @property
    def record_path(self) -> Path:
        return self.run_dir / "remote.json"

    def record(self) -> dict[str, Any]:
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _updating(self) -> Iterator[dict[str, Any]]:
        """The record, read, changed by the block and saved, with no other change of it in
        this process in between (a person's look and a round's end: neither waits for a round
        in flight, and neither loses the other's change)."""
        with _record_lock(self.record_path):
            record = self.record()
            yield record
            self._save(record)

    def _save(self, record: dict[str, Any]) -> None:
        from ragcore import atomic_write

        self.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.record_path, json.dumps(record, indent=1, sort_keys=True))

    def status(self) -> dict[str, Any]:
        """The remote, the last round, ahead/behind, and what waits for a person."""
        url = self.url()
        if url is None:
            return {"remote": None}
        record = self.record()
        out = {
            "remote": shown(url),
            "branch": self.branch(),
            "last_sync": record.get("last_sync"),
            "last_error": record.get("last_error"),
            "stopped": record.get("stopped"),
            **self.waiting(),
        }
        if self.progress is not None:
            out["progress"] = dict(self.progress)
        upstream = self._rev(f"refs/remotes/{REMOTE}/{out['branch']}")
        local = self._rev(f"refs/heads/{out['branch']}")
        if upstream and local:
            counts = self.repo.git(
                "rev-list", "--left-right", "--count", f"{local}...{upstream}", check=False
            ).split()
            if len(counts) == 2:
                out["ahead"], out["behind"] = int(counts[0]), int(counts[1])
        elif local and not upstream:
            out["ahead"], out["behind"] = None, 0  # nothing fetched yet, or an empty remote
        return out

    def waiting(self) -> dict[str, list[dict[str, Any]]]:
        """What a sync left for a person, read from the KB itself (so every machine sees it):
        forks (an entry superseded by two successors) and variants (`kb/variants/`). Worked
        out again only when the KB changed - its HEAD (a round, a write) or the variants
        folder - not at every `status`: no git process while nothing changed."""
        folder = self.kb_dir / VARIANTS
        try:
            seen = folder.stat().st_mtime_ns
        except OSError:
            seen = None
        key = (self.repo.head(), seen)
        cached = self._waiting
        if cached is not None and cached[0] == key:
            return copy.deepcopy(cached[1])
        forks = []
        found = self.repo.git(
            "grep", "-l", "-z", "-E", "^superseded_by: \\[", "--", "*.md", check=False
        )  # -z: names as they are (unquoted, spaces kept)
        for name in filter(None, found.split("\0")):
            try:
                entry = parse_entry((self.kb_dir / name).read_text(encoding="utf-8"), name)
            except (OSError, ValueError):  # (not UTF-8, not an entry)
                continue
            successors = entry.extra.get("superseded_by")
            if isinstance(successors, list) and len(successors) > 1:
                forks.append({"id": entry.id, "successors": [str(s) for s in successors]})
        variants = (
            [
                {"variant": f"{VARIANTS}/{p.name}", "path": p.name.split(".")[0]}
                for p in sorted(folder.iterdir())
                if p.is_file()  # (an entry's `<id>.<machine>.md`, any file's `<stem>.<m><suffix>`)
            ]
            if folder.is_dir()
            else []
        )
        self._waiting = (key, {"forks": forks, "variants": variants})
        return copy.deepcopy(self._waiting[1])

    # -- git helpers ------------------------------------------------------------------------
    def _rev(self, ref: str) -> str | None:
        out = self.repo.git("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
        return out.strip() or None

    def _is_ancestor(self, a: str, b: str) -> bool:
        return self.repo.succeeds("merge-base", "--is-ancestor", a, b)

    def _missing(self, branch: str) -> None:
        """The remote has no `branch`: empty (the first push creates it) or holding others."""
        check_missing_branch(
            self.kb_dir,
            REMOTE,
            branch,
            shown(self.url()),
            self._rev(SYNCED_REF) is not None,
            FETCH_TIMEOUT_S,
        )

    # -- a round ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """One round of sync; its report. Raises on an unreachable remote, a secret, or a
        rewritten upstream (each recorded for `status`)."""
        if self.url() is None:
            raise NotReady("this knowledge base has no remote", "run `memory-agent remote set URL`")
        record = self.record()
        if record.get("stopped"):
            raise UpstreamRewritten(record["stopped"], record.get("stopped_fix", ""))
        clean_stale(self.repo)  # a replay's worktree a killed process left (a copy of the KB)
        try:
            report = self._round()
        except MemoryAgentError as exc:
            with self._updating() as record:
                record["last_error"] = {
                    "code": exc.code,
                    "message": exc.message,
                    "fix": exc.fix,
                    "at": self.clock(),
                }
                if isinstance(exc, UpstreamRewritten):
                    record["stopped"], record["stopped_fix"] = exc.message, exc.fix
            raise
        with self._updating() as record:
            record.update(last_sync=self.clock(), last_error=None)
            note_round(record, report, self.clock())  # for the person not looking
        return report

    def look(self, mark: bool) -> dict[str, Any] | None:
        """What the rounds did since a person last looked (`memory_agent.sync.rounds`), or
        None; `mark`: they have looked now. A round in flight is not waited for: its report
        is seen at the next look."""
        if not mark:
            return unseen(self.record())
        with self._updating() as record:
            found = unseen(record)
            if found is not None:
                mark_seen(record, found["upto"])
        return found

    def _round(self) -> dict[str, Any]:
        branch = self.branch()
        report: dict[str, Any] = {
            "branch": branch,
            "pulled": 0,
            "entries_in": 0,
            "pushed": 0,
            "replayed": 0,
            "renamed": [],
            "forks": [],
            "variants": [],
            "joined": False,
        }
        for _ in range(ROUNDS):
            fetch(self.kb_dir, branch, self.url(), lambda: self._missing(branch))
            check_quiet(self.kb_dir)  # not while a person rewrites the branch (a rebase...)
            upstream = self._rev(f"refs/remotes/{REMOTE}/{branch}")
            local = self._rev(f"refs/heads/{branch}")
            if local is None:
                raise GitError(f"the KB has no branch {branch}", "run `memory-agent init`")
            synced = self._rev(SYNCED_REF)
            if (
                upstream is not None
                and synced is not None
                and not self._is_ancestor(synced, upstream)
            ):
                raise UpstreamRewritten(
                    f"the remote's {branch} was rewritten (the commit last synced, "
                    f"{synced[:12]}, is no longer in its history); nothing was pushed or "
                    "replayed and every local commit is kept",
                    "find out who rewrote it; to follow the new history, keep a copy "
                    f"(`git -C {self.kb_dir} branch before-rewrite {local[:12]}`), then "
                    f"`git -C {self.kb_dir} update-ref -d {SYNCED_REF}` and "
                    "`memory-agent sync` replays this machine's commits onto it",
                )
            if upstream is None or upstream == local or self._is_ancestor(upstream, local):
                head = local  # nothing to take: push what is ahead
            elif self._is_ancestor(local, upstream):
                head = self._move(branch, local, upstream, report, "fast-forward")
                if head is None:
                    continue
                report["pulled"] += self._count(local, upstream)
            elif self._only_init(local, upstream):
                head = self._move(branch, local, upstream, report, "join")
                if head is None:
                    continue
                report["joined"] = True
                report["pulled"] += self._count(local, upstream)
            else:
                replayed = replay(self.repo, self._base(local, upstream), local, upstream, report)
                head = self._move(branch, local, replayed, report, "replay")
                if head is None:
                    continue
                report["pulled"] += self._count(self._base(local, upstream), upstream)
            if upstream != head and not self.push:
                report["not_pushed"] = self._count(upstream, head)  # read-only: never pushed
                if upstream is not None:
                    self.repo.git("update-ref", SYNCED_REF, upstream)
                return report
            if upstream != head:
                check_quiet(self.kb_dir)  # (a rebase started meanwhile)
                check_secrets(self.kb_dir, upstream, head)
                if not push(self.kb_dir, branch, head, self.url()):
                    continue  # the other side pushed first: fetch and go again
                report["pushed"] += self._count(upstream, head)
            self.repo.git("update-ref", SYNCED_REF, head)
            return report
        raise Conflict(
            f"the branch kept moving during {ROUNDS} rounds of sync (writes here or pushes "
            "from another machine)",
            "run `memory-agent sync` again",
        )

    def _count(self, since: str | None, head: str) -> int:
        span = [head, "--not", since] if since else [head]
        return len(self.repo.git("rev-list", *span).split())

    def _base(self, a: str, b: str) -> str | None:
        out = self.repo.git("merge-base", a, b, check=False).strip()
        return out or None

    def _only_init(self, local: str, upstream: str) -> bool:
        """Local and upstream share no history and local holds only what `init` wrote (no
        file at all - an entry, the scope map, a person's README): it takes upstream's history."""
        if self._base(local, upstream) is not None:
            return False
        return not self.repo.git("ls-tree", "-r", "--name-only", "-z", local)

    def _move(
        self, branch: str, local: str, head: str, report: dict[str, Any], why: str
    ) -> str | None:
        """Move the branch and the files from `local` to `head` under the write lock; None
        when the branch moved meanwhile (the round starts again). The incoming entries are
        embedded first, with no lock held: the lock covers the move and the index's switch."""
        self._prepare(local, head)
        with self.write_lock:
            if self._rev(f"refs/heads/{branch}") != local:
                return None
            self.repo.check_writable()
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.clock()))
            rescue = f"{RESCUE_REFS}{stamp}-{local[:12]}"
            self.repo.git("update-ref", rescue, local)
            changed = self.repo.changed_between(local, head) or []  # (-z: any file name)
            try:
                self.repo.move_to(head)
            except Conflict:  # an uncommitted edit in the way: nothing moved, no rescue needed
                self.repo.git("update-ref", "-d", rescue)
                raise
            except GitError as exc:  # a path git refuses to write (upstream's, from a tool)?
                refused = refused_commit(self.kb_dir, local, head, exc.message)
                if refused is None:
                    raise
                self.repo.git("update-ref", "-d", rescue)
                raise refused from None
            report.setdefault("moves", []).append(why)
            report["entries_in"] = report.get("entries_in", 0) + sum(
                1 for n in changed if n.endswith(".md") and not n.startswith(f"{VARIANTS}/")
            )
            self.refresh([self.kb_dir / name for name in changed])  # exactly those files
        return head

    def _prepare(self, local: str, head: str) -> None:
        """Embed the entries `head` adds or changes since `local` (read from git: the files
        are not in place yet) into the embedding cache, a batch at a time, with no lock held;
        `progress` says how far it is (status shows it, `memory-agent sync` prints it)."""
        if self.pre_embed is None:
            return
        listed = self.repo.git(
            "diff", "--name-only", "--no-renames", "--diff-filter=AM", "-z", local, head, "--"
        )
        names = [
            n
            for n in listed.split("\0")
            if n.endswith(".md") and "/" in n and not n.startswith(f"{VARIANTS}/")
        ]
        if not names:
            return
        self.progress = {"phase": "embedding", "done": 0, "of": len(names)}
        try:
            for start in range(0, len(names), PRE_EMBED_BATCH):
                batch = names[start : start + PRE_EMBED_BATCH]
                texts = self.repo.blobs([(head, n) for n in batch])
                self.pre_embed([(n, t) for n, t in zip(batch, texts, strict=True) if t])
                self.progress = {**self.progress, "done": start + len(batch)}
                self.faults.reach("pause-sync-embed")
        finally:
            self.progress = None
