"""A KB's loose git objects, packed as they pile up.

Every write commits with git's plumbing (`KBRepo.commit_paths`), which - unlike `git commit` -
never runs `git gc --auto`, so every object a commit makes stays loose: the entry's blob, the
commit, and the tree of each folder on the entry's path, written whole. A type folder of
100,000 entries is a 4.3 MB tree (written uncompressed: `gitrepo.STORE`): a hundred adds there
leave ~430 MB of loose objects beside a KB that packs into 50 MB, and at a million entries one
add leaves ~43 MB.

So, every `CHECK_EVERY` writes, a thread asks git how much is loose (`git count-objects -v`)
and, past `LOOSE_BUDGET_MB`, packs it with `git repack --geometric=2 -d`: the loose objects go
into a new pack (deltas between them: trees that differ by one entry take bytes, not
megabytes), small packs are rolled into larger ones so that their number stays logarithmic,
and the loose copies are dropped. It walks no history (`git repack -d` does: 10 s of a
100,000-entry KB's 24 s went to listing reachable objects) and drops nothing - an object no
commit reaches is packed and kept (git's own gc expires those, as ever). A git older than 2.32
has no geometric repack: `git repack -d` then. One packing at a time in a process, on one of
git's threads (`pack.threads=1`: a core stays free for searches); it never holds the write lock,
as git packs safely beside commits. A failure is logged and tried again `CHECK_EVERY` writes later.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from memory_agent.errors import GitError
from memory_agent.kb.gitrepo import KBRepo

__all__ = ["CHECK_EVERY", "LOOSE_BUDGET_MB", "LooseObjects"]

log = logging.getLogger("memory_agent.kb")

CHECK_EVERY = 8  # writes between two looks at the loose objects (one short git process)
LOOSE_BUDGET_MB = 128.0  # loose objects past this are packed
PACK_TIMEOUT_S = 3600.0
_ONE_AT_A_TIME = threading.Lock()  # one packing per process, whatever the number of KBs


class LooseObjects:
    """The loose objects of one KB's repository: counted after writes, packed past a budget."""

    def __init__(self, kb_dir: Path):
        self.kb_dir = kb_dir
        self._writes = 0
        self._running = False
        self._again = False  # writes came in while packing: look once more after it
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wrote(self) -> None:
        """A write committed: every CHECK_EVERY writes, look (and pack) on a thread."""
        with self._lock:
            self._writes += 1
            if self._writes < CHECK_EVERY:
                return
            self._writes = 0
            if self._running:
                self._again = True
                return
            thread = threading.Thread(target=self._run, name="kb-pack", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to be had: the write stands, pack later
                log.warning("could not start packing %s's git objects: %s", self.kb_dir, exc)
                return
            self._running, self._thread = True, thread

    def _run(self) -> None:
        while True:
            try:
                with _ONE_AT_A_TIME:  # the KBs of a home pack one after the other
                    self.pack()
            except Exception:  # (never leave `_running` set: no packing would follow)
                log.exception("packing the loose git objects of %s failed", self.kb_dir)
            with self._lock:
                if not self._again:
                    self._running = False
                    return
                self._again = False

    def wait(self, timeout: float | None = None) -> None:
        """Until the packing under way, if any, has finished."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def counts(self) -> dict[str, float]:
        """git's `count-objects -v` as numbers: `count` and `size` (KiB) loose, `packs`..."""
        out = KBRepo(self.kb_dir).git("count-objects", "-v")
        pairs = (line.split(":", 1) for line in out.splitlines() if ":" in line)
        return {key.strip(): float(value) for key, value in pairs if value.strip().isdigit()}

    def pack(self) -> dict[str, float] | None:
        """Pack the loose objects if they are past the budget: what was done, or None when
        nothing was needed or it failed (logged)."""
        repo = KBRepo(self.kb_dir)
        try:
            before = self.counts()
            loose_mb = before.get("size", 0.0) / 1024
            if loose_mb <= LOOSE_BUDGET_MB:
                return None
            started = time.monotonic()
            one_thread = ("-c", "pack.threads=1", "repack", "-d", "-q")
            try:
                repo.git(*one_thread, "--geometric=2", timeout=PACK_TIMEOUT_S)
            except GitError as exc:
                if "geometric" not in exc.message:
                    raise
                repo.git(*one_thread, timeout=PACK_TIMEOUT_S)  # git < 2.32
            after = self.counts()
        except (GitError, OSError, ValueError) as exc:
            log.warning("packing the loose git objects of %s failed: %s", self.kb_dir, exc)
            return None
        done = {
            "loose_mb_before": loose_mb,
            "loose_mb_after": after.get("size", 0.0) / 1024,
            "packs": after.get("packs", 0.0),
            "seconds": time.monotonic() - started,
        }
        log.info(
            "packed the loose git objects of %s: %.0f -> %.0f MB loose, %d pack(s), %.1f s",
            self.kb_dir,
            done["loose_mb_before"],
            done["loose_mb_after"],
            done["packs"],
            done["seconds"],
        )
        return done
