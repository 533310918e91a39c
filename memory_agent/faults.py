"""Fault points: the one seam through which tests stop or kill the product at a named step.

The `fault` setting (a test hook, never for normal use; memory_agent.config) names at most
one point. The product calls `Faults.reach(point)` at each point below; unless the setting
names that point, the call returns at once and does nothing.

    point              where                                               what happens
    after-write        write.intents: the files written, nothing committed  the process dies
    after-commit       write.intents: committed, the intent not yet done    the process dies
    pause-commit       kb.gitrepo: the paths staged, HEAD not yet moved      it waits
    pause-rebuild      index.memory: a rebuild, before it embeds             it waits
    pause-open         serve.daemon: the daemon's open of the index          it waits
    pause-sync-embed   sync.remote: a round's pre-embedding, after a batch    it waits

Dying is SIGKILL where the OS has it (no `finally`, no `atexit`: a crash), else `os._exit`.
Waiting creates `<run>/fault-<point>` (so the test knows the step is reached) and waits, at most
`PAUSE_S` seconds, until `<run>/fault-continue` exists. Standard library only.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KILLS", "PAUSES", "Faults"]

KILLS = frozenset({"after-write", "after-commit"})
PAUSES = frozenset({"pause-commit", "pause-rebuild", "pause-open", "pause-sync-embed"})
PAUSE_S = 60.0


@dataclass(frozen=True)
class Faults:
    """The fault points of one home: the `fault` setting and the home's `run/` folder."""

    setting: str = ""
    run_dir: Path | None = None

    def reach(self, point: str) -> None:
        """This step is reached: die or wait if the setting names it, else nothing."""
        if point not in KILLS and point not in PAUSES:
            raise ValueError(f"no fault point {point!r}")  # a typo would never fire
        if not self.setting or self.setting != point:
            return
        if point in KILLS:
            kill = getattr(signal, "SIGKILL", None)  # (Windows has none)
            if kill is not None:
                os.kill(os.getpid(), kill)
            os._exit(137)
        if self.run_dir is None:
            return
        (self.run_dir / f"fault-{point}").touch()
        deadline = time.monotonic() + PAUSE_S
        while not (self.run_dir / "fault-continue").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


NONE = Faults()
