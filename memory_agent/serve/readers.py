"""The daemon's reader processes (ADR 0028): started, listed, restarted, stopped.

With `read_processes = N` (N > 0) the daemon starts N `memory-agent reader` processes
(`serve.reader`) once it serves. Each is listed in the daemon's `/health` (`readers`) once it
said it serves; the proxy sends its session's `memory_search` and `memory_get` to one of them.
A reader that exits is started again at once the first time, then at most once a
`RESTART_EVERY_S` per slot (one that cannot start does not take a core in a loop); `/health`
names it meanwhile, and the proxies send its calls to the daemon. The readers stop with the daemon: it closes their stdin (and, should one
not exit within `STOP_WAIT_S`, kills it); a daemon that dies closes the pipes as it goes.

While readers serve, the daemon refreshes its index from the files every `REFRESH_EVERY_S`
(`Refresher`; `RESCAN_EVERY_S` where it has no file watcher and each refresh is a full scan):
the searches that used to refresh it on their way now go to the readers, which only follow
the index. A file a person edits by hand is therefore seen within about a second (ten
without a watcher).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_agent import config as config_mod
from memory_agent.client import detached, get_json
from memory_agent.endpoint import Endpoint
from memory_agent.errors import describe

__all__ = [
    "REFRESH_EVERY_S",
    "RESCAN_EVERY_S",
    "RESTART_EVERY_S",
    "Readers",
    "Refresher",
    "start_readers",
]

log = logging.getLogger("memory_agent.readers")
RESTART_EVERY_S = 60.0  # a reader that exited again is started again at most this often
STOP_WAIT_S = 10.0  # how long a stopping reader may take before it is killed
REFRESH_EVERY_S = 1.0  # with a file watcher: a refresh with nothing changed reads no file
RESCAN_EVERY_S = 10.0  # without one (`watcher = rescan`, or none available): a full scan


class _Slot:
    def __init__(self, slot: int):
        self.slot = slot
        self.proc: subprocess.Popen | None = None
        self.ready: dict[str, Any] | None = None  # the reader's line: where it serves
        self.restarted_at = float("-inf")  # monotonic time of the last start after an exit
        self.starts = 0
        self.exit_code: int | None = None  # of the last process, once it exited


class Readers:
    """`count` reader processes of the home `home` (its run folder `run_dir`); `token`: the
    daemon's, for the TCP transport (None: Unix sockets)."""

    def __init__(
        self,
        home: Path,
        run_dir: Path,
        count: int,
        token: str | None,
        restart_every_s: float = RESTART_EVERY_S,
    ):
        self.home = Path(home)
        self.run_dir = Path(run_dir)
        self.token = token
        self.restart_every_s = restart_every_s
        self.slots = [_Slot(k) for k in range(count)]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._searches = 0  # the readers' searches at the last `used_since`

    def start(self) -> None:
        for slot in self.slots:
            self._start(slot)

    def _start(self, slot: _Slot) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            cmd = [sys.executable, "-m", "memory_agent", "reader", "--home", str(self.home)]
            cmd += ["--slot", str(slot.slot)]
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,  # it logs to the daemon's log
                    close_fds=True,
                    cwd=str(self.home),
                    **detached(),
                )
            except OSError as exc:
                log.error("reader %d could not be started: %s", slot.slot, exc)
                return
            slot.proc, slot.ready, slot.exit_code = proc, None, None
            slot.starts += 1
        assert proc.stdin is not None
        try:
            given = {"transport": "tcp" if self.token else "unix", "token": self.token}
            proc.stdin.write((json.dumps(given) + "\n").encode())
            proc.stdin.flush()  # the pipe stays open: its end is the reader's signal to stop
        except OSError:
            pass  # it died at once: its watcher below sees it exit
        threading.Thread(
            target=self._watch, args=(slot, proc), name=f"reader-{slot.slot}", daemon=True
        ).start()

    def _watch(self, slot: _Slot, proc: subprocess.Popen) -> None:
        """Read the reader's line (it serves), wait for it to exit, start it again."""
        assert proc.stdout is not None
        line = proc.stdout.readline()
        try:
            ready = json.loads(line) if line else None
        except ValueError:
            ready = None
        if isinstance(ready, dict):
            with self._lock:
                if slot.proc is proc:
                    slot.ready = ready
            log.info("reader %d (pid %d) serves", slot.slot, proc.pid)
        code = proc.wait()
        with self._lock:
            if slot.proc is proc:
                slot.ready, slot.exit_code = None, code
        if self._stopping.is_set():
            return
        log.warning(
            "reader %d (pid %d) exited with status %d; the daemon answers its calls until it "
            "is started again",
            slot.slot,
            proc.pid,
            code,
        )
        wait = slot.restarted_at + self.restart_every_s - time.monotonic()
        if self._stopping.wait(max(0.0, wait)):
            return
        slot.restarted_at = time.monotonic()
        self._start(slot)

    def serving(self) -> list[dict[str, Any]]:
        """The readers that serve now: `{slot, pid, socket}` or `{slot, pid, port}` (the proxy
        picks one)."""
        with self._lock:
            return [dict(s.ready) for s in self.slots if s.ready is not None]

    def health(self) -> list[dict[str, Any]]:
        """Every slot: serving, starting, or exited (with its status) - for `/health`."""
        out = []
        with self._lock:
            for s in self.slots:
                item: dict[str, Any] = {"slot": s.slot, "starts": s.starts}
                if s.ready is not None:
                    item.update(s.ready, state="serving")
                elif s.proc is not None and s.exit_code is None:
                    item.update(pid=s.proc.pid, state="starting")
                else:
                    item.update(state="exited", exit_code=s.exit_code)
                out.append(item)
        return out

    def endpoint(self, ready: dict[str, Any]) -> Endpoint:
        """Where a serving reader answers (its line: a socket, or a port with the token)."""
        if "port" in ready:
            return Endpoint(self.run_dir, int(ready["port"]), self.token)
        return Endpoint(self.run_dir, socket=str(ready["socket"]))

    def details(self) -> list[dict[str, Any]]:
        """`health()`, with each serving reader's own health (its searches, the daemon's last
        change its snapshot holds) - for `memory-agent status`."""
        out = self.health()
        for item in out:
            if item["state"] == "serving":
                own = get_json(self.endpoint(item), "/health", timeout=2.0)
                if own is None:
                    item["state"] = "not answering"
                else:
                    item.update({k: own.get(k) for k in ("searches", "gets", "generation", "seen")})
        return out

    def used_since_last(self) -> bool:
        """Whether the readers answered a search since the last call (the idle watch asks:
        a daemon whose readers serve is not idle)."""
        total = sum(
            int(item.get("searches") or 0) + int(item.get("gets") or 0) for item in self.details()
        )
        used, self._searches = total != self._searches, total
        return used

    def stop(self) -> None:
        """Close every reader's stdin (it stops), wait for them, kill any left."""
        self._stopping.set()
        with self._lock:
            procs = [s.proc for s in self.slots if s.proc is not None]
        for proc in procs:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + STOP_WAIT_S
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("reader pid %d did not stop within %g s: killed", proc.pid, STOP_WAIT_S)
                proc.kill()
                proc.wait()


class Refresher:
    """`refresh()` every `every_s` seconds on a thread, while `ready()` (the model is loaded),
    until `stop`: the daemon's index follows the files while the searches are the readers'."""

    def __init__(
        self,
        refresh: Callable[[], object],
        ready: Callable[[], bool],
        every_s: float = REFRESH_EVERY_S,
    ):
        self._refresh = refresh
        self._ready = ready
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="refresher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        failing = None
        while not self._stop.wait(self.every_s):
            if not self._ready():
                continue
            try:
                self._refresh()
                failing = None
            except Exception as exc:  # noqa: BLE001 - logged once; the next round tries again
                message = describe(exc).message
                if message != failing:
                    log.warning("refresh for the readers failed: %s", message)
                failing = message

    def stop(self) -> None:
        """Stop, and wait for a refresh under way (the index closes after)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def start_readers(service: Any, cfg: Any, token: str | None) -> tuple[Any, Any] | None:
    """The reader processes of the `read_processes` setting (ADR 0028), started, and the
    daemon's refresh of its index from the files while they serve; None without readers."""
    count = int(cfg.read_processes)
    if count <= 0:
        return None
    if config_mod.qdrant_of(cfg):
        log.warning("read_processes = %d ignored: readers serve a local index only", count)
        return None
    memory = service.memory
    readers = Readers(memory.home, memory.run_dir, count, token)
    refresher = Refresher(
        memory.refresh_for_read,
        lambda: service.model.loaded and memory.index.exists(),
        REFRESH_EVERY_S if memory.scanner.watcher is not None else RESCAN_EVERY_S,
    )
    service.readers = readers
    readers.start()
    refresher.start()
    return refresher, readers
