"""A write's way from request to reply, for every tool of the gateway
(`memory_agent.write.gateway`):

    request replay -> recover -> (the gateway's checks and dedup) -> secrets -> intent
    -> atomic writes -> one git commit of exactly those files -> index refresh -> reply

- A request id seen before answers with its first reply (a client's timeout is not a failed
  write); reused for another call it is a `conflict`.
- A write a killed process left half done is finished first (`recover`), from its intent in
  the redo log (`memory_agent.write.intents`).
- The reply names the commit and the index generation; a commit whose refresh failed is
  `write_failed` with `outcome: finished` (the entry is written; `rebuild` makes it found).
- A confirm within an hour of its preview writes the preview's timestamps (`when`).
- Every few writes, a thread packs git's loose objects once they pass a budget
  (`memory_agent.kb.upkeep`): plumbing commits never run `git gc --auto`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memory_agent import limits
from memory_agent.errors import WriteFailed
from memory_agent.index.memory import Memory
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.kbs import KbPlace
from memory_agent.kb.upkeep import LooseObjects
from memory_agent.write.checks import check_secrets, check_target
from memory_agent.write.intents import Intent, RedoLog, RequestLog, fingerprint

__all__ = ["PREVIEW_KEEP_S", "Transactions"]

log = logging.getLogger("memory_agent.gateway")
PREVIEW_KEEP_S = 3600.0  # a confirm this soon after its preview writes the preview's times


class Transactions:
    """The writes of one KB (`place`): its redo log, the request replies, recovery."""

    def __init__(self, memory: Memory, place: KbPlace):
        self.memory = memory
        self.place = place
        self.kb_dir = place.dir
        run_dir = memory.run_dir if place.personal else place.run_dir
        assert run_dir is not None
        self.redo = RedoLog(run_dir / "pending", self.kb_dir, memory.faults)
        self.requests = RequestLog(
            memory.run_dir / "requests", memory.clock, float(memory.cfg.request_ttl)
        )
        self._branch_seen = False
        self.loose = LooseObjects(self.kb_dir)  # git's loose objects, packed as they pile up
        self._previewed: dict[str, float] = {}  # a preview's time, by the call's fingerprint

    def when(self, tool: str, args: dict[str, Any], confirm: bool) -> float:
        """The time a supersede or archive writes: a preview's time is kept, and a confirm
        of the same call (same arguments, within PREVIEW_KEEP_S, same daemon) writes exactly
        the timestamps that preview showed. Otherwise now."""
        key, now = fingerprint(tool, args), self.memory.clock()
        if not confirm:
            self._previewed.pop(key, None)
            self._previewed[key] = now
            while len(self._previewed) > 100:
                self._previewed.pop(next(iter(self._previewed)))
            return now
        shown = self._previewed.pop(key, None)
        return shown if shown is not None and 0 <= now - shown <= PREVIEW_KEEP_S else now

    @property
    def repo(self) -> KBRepo:
        return KBRepo(self.kb_dir)

    def begin(self, request_id: str | None, tool: str, args: dict[str, Any]):
        """Start a write: replay a known request, finish what a killed process left (which
        may be this very request), and scan for outside changes. Returns (replay, print)."""
        if request_id is not None:
            limits.check_text(
                "request_id", request_id, limits.MAX_REQUEST_ID, required=True, one_line=True
            )
        print_ = fingerprint(tool, args)
        replay = self.requests.replay(request_id, tool, print_)
        if replay is None:
            self.repo.check_writable()  # not on a detached HEAD, another branch, mid-rebase
            self.recover()
            replay = self.requests.replay(request_id, tool, print_)
        if replay is None:
            self.memory.refresh(force=True)
        return replay, {"request_id": request_id, "tool": tool, "fingerprint": print_}

    def apply(
        self, files: dict[Path, str], message: str, request: dict[str, Any], reply: dict[str, Any]
    ) -> dict[str, Any]:
        """Intent, atomic writes, one commit of exactly these files, refresh, reply; refused
        before the intent when a file or the message adds a real-looking secret."""
        for path in files:
            check_target(self.kb_dir, path)
        check_secrets(self.kb_dir, files, message)
        intent = self.redo.begin(files, message, request, reply)
        commit = self.redo.apply(intent)
        return self.finish(intent, commit)

    def finish(self, intent: Intent, commit: str) -> dict[str, Any]:
        reply = dict(intent.reply, commit=commit)
        made = self.redo.made
        if self.place.personal and made is not None and made[1] == commit:
            self.memory.kb_commit.wrote(*made)  # the refresh takes its files from here
        try:
            self.memory.refresh(force=True)
        except Exception as exc:
            from memory_agent.errors import describe

            info = describe(exc)
            if info.code == "internal":  # its message names the daemon log: put it there
                log.error("the index refresh after commit %s failed", commit, exc_info=exc)
            reply["generation"] = None
            self.remember(intent.request, reply)
            self.redo.done(intent)
            raise WriteFailed(
                f"the write is finished (commit {commit[:12]}), but the index could not be "
                f"refreshed: {info.message}",
                info.fix or "run `memory-agent rebuild`; searches find the entry after that",
                outcome="finished",
            ) from exc
        reply["generation"] = self.memory.index.generation
        self.remember(intent.request, reply)
        self.redo.done(intent)
        self.loose.wrote()
        return reply

    def remember(self, request: dict[str, Any], reply: dict[str, Any]) -> None:
        self.requests.remember(
            request.get("request_id"),
            request.get("tool", ""),
            request.get("fingerprint", ""),
            reply,
        )

    def recover(self) -> list[dict[str, Any]]:
        """Finish every write a killed process left half done; their replies. Call with the
        home lock held.
        (The daemon calls it at start: a home made before the branch record gets it then.)"""
        done = []
        pending = self.redo.pending()
        if not self._branch_seen:
            self.repo.record_branch()
            if self.repo.split_index_if_large():
                log.info("the KB's git index is large: git's split index is on (ADR 0025)")
            self._branch_seen = True
        if pending:
            self.repo.check_writable()
        for path in pending:
            intent = self.redo.load(path)
            if intent is None:  # the intent itself was torn: nothing was written after it
                path.unlink(missing_ok=True)
                continue
            commit = self.redo.redo(intent)
            done.append(self.finish(intent, commit))
        return done
