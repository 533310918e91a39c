"""A reader process: `memory_search` and `memory_get` served beside the daemon (ADR 0028).

One daemon process answers every call with one interpreter lock: under ten clients the second
core waits on it. With `read_processes = N` the daemon starts N of these (`serve.readers`);
each loads its own model, follows the daemon's index read-only (`index.followed`: the saved
arrays mapped, the daemon's changes replayed before each search) and answers the two read
tools the proxy sends it, with the daemon's own tool code, kernel and reply
(`serve.read_calls`, `serve.tools`, `serve.single_exchange`). Everything else - writes,
status, hooks - stays the daemon's.

Started by the daemon only (`memory-agent reader --slot K`): the daemon writes its transport
and, over TCP, its token as the first line of the reader's stdin (JSON) and keeps the pipe
open; the reader answers with one
line on its stdout once it serves (`{"slot", "pid", "socket"}` or `{"slot", "pid", "port"}`)
and exits when its stdin closes - the daemon stopped or died - or on SIGTERM. Its log lines go
to the daemon's log, under its own pid.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memory_agent import __version__
from memory_agent import config as config_mod
from memory_agent.errors import Invalid, describe
from memory_agent.index.followed import FollowingMemory
from memory_agent.intake.projects import ProjectCache
from memory_agent.kb.scopes import project_named
from memory_agent.serve.listen import listen
from memory_agent.serve.model import ModelLoader
from memory_agent.serve.read_calls import ReadCalls
from memory_agent.serve.usage import Usage

__all__ = ["ReaderService", "reader_socket", "run_reader"]

log = logging.getLogger("memory_agent.reader")
WAIT_FOR_INDEX_S = 0.5  # how often a reader started before the first index looks for it


def reader_socket(slot: int) -> str:
    """The Unix socket of reader `slot`, in the home's run/ folder."""
    return f"reader-{slot}.sock"


class ReaderService:
    """What a reader's tools call: search and get (`ReadCalls`), and its health. Any other
    tool is the daemon's: asked here (a client that connected by hand), it is refused."""

    def __init__(self, memory: FollowingMemory, model: ModelLoader, slot: int):
        self.memory = memory
        self.slot = slot
        self.started = time.time()
        self.usage = Usage(memory, compact_old=False)  # compaction is the daemon's
        self.projects = ProjectCache()
        self.reads = ReadCalls(memory, model, self.usage, self.project)

    def project(self, where: str | None) -> str | None:
        return project_named(where, self.memory.kb_dir, self.projects)

    def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        return self.reads.search(query, **kwargs)

    def get(self, entry_id: str, caller: str | None = None) -> dict[str, Any]:
        return self.reads.get(entry_id, caller)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise Invalid(
                f"this reader process answers memory_search and memory_get only ({name} is "
                "the daemon's)",
                "connect through `memory-agent proxy`: it sends every other call to the daemon",
            )

        return refuse

    def health(self) -> dict[str, Any]:
        index = self.memory.index
        snap = index.follower.held  # health opens nothing
        return {
            "status": "ok",
            "role": "reader",
            "slot": self.slot,
            "pid": os.getpid(),
            "version": __version__,
            "uptime_s": round(time.time() - self.started, 1),
            "searches": self.reads.searches,
            "gets": self.reads.gets,
            "generation": None if snap is None else snap.generation,
            "seen": index.seen,  # the daemon's last change this reader's snapshot holds
            "dense": self.memory.dense_state(),
        }


def build_reader_app(service: ReaderService):
    """The reader's ASGI app: the daemon's tools (only search and get answer) and `/health`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from memory_agent.serve.daemon import mcp_app
    from memory_agent.serve.tools import build_server

    mcp = build_server(service)  # type: ignore[arg-type] - the two read tools' service

    @mcp.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> JSONResponse:
        try:
            return JSONResponse(service.health())
        except Exception as exc:  # health must answer
            log.exception("health failed")
            return JSONResponse({"status": "error", "pid": os.getpid(), "error": str(exc)})

    return mcp_app(mcp)


def _wait_for_index(memory: FollowingMemory, stop: threading.Event) -> bool:
    """Open the daemon's index, waiting while it has none yet (its first build)."""
    while not stop.is_set():
        if memory.index.exists():
            memory.index.follow()
            return True
        stop.wait(WAIT_FOR_INDEX_S)
    return False


def run_reader(home: str | None, slot: int) -> int:
    """Serve as reader `slot` of the home's daemon until stdin closes or SIGTERM."""
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as the daemon: see run_daemon
        os.environ.setdefault(name, "1")
    os.umask(0o077)
    out = os.fdopen(os.dup(1), "w")  # the one line for the daemon; then fd 1 is the log's sink
    os.dup2(2, 1)
    # what the daemon serves with: its transport (not the config's, which may have changed
    # since it started) and, over TCP, its token
    given = json.loads(sys.stdin.readline() or "{}")
    transport, token = str(given.get("transport") or "unix"), given.get("token")
    stop = threading.Event()
    holder: dict[str, Any] = {}

    def watch_stdin() -> None:  # the daemon closes the pipe (or dies): stop
        sys.stdin.read()
        stop.set()
        server = holder.get("server")
        if server is not None:
            server.should_exit = True

    threading.Thread(target=watch_stdin, name="reader-stdin", daemon=True).start()
    from memory_agent.serve.daemon import _setup_logging, http_server

    started = time.perf_counter()
    try:
        cfg = config_mod.load({"home": home})
        memory = FollowingMemory(cfg)
        memory.require_home()
        _setup_logging(memory.run_dir, foreground=False)
        if transport == "tcp" and not token:
            raise Invalid("a reader over TCP needs the daemon's token", "let the daemon start it")
        model = ModelLoader(memory, after_load=lambda: None)
        model.wait()
        if not _wait_for_index(memory, stop):
            return 0
        service = ReaderService(memory, model, slot)
        name = reader_socket(slot)
        sock, _, where = listen(memory.run_dir, transport, name=name, token=token)
    except Exception as exc:  # noqa: BLE001 - logged with its fix; the daemon serves meanwhile
        info = describe(exc)
        log.error("reader %d could not start: %s; fix: %s", slot, info.message, info.fix)
        return 1
    server = http_server(build_reader_app(service), token, graceful_s=10)
    holder["server"] = server
    path = memory.run_dir / name
    bound = path.stat().st_ino if transport == "unix" else None
    ready: dict[str, Any] = {"slot": slot, "pid": os.getpid()}
    if transport == "unix":
        ready["socket"] = name
    else:
        ready["port"] = sock.getsockname()[1]
    log.info(
        "reader %d pid %d serving %s (generation %s, ready in %.1f s)",
        slot,
        os.getpid(),
        where,
        service.health()["generation"],
        time.perf_counter() - started,
    )
    try:
        if stop.is_set():
            return 0
        # the daemon lists this reader once the line is read, and uvicorn accepts the socket's
        # queue as soon as it runs: no call is lost in between
        out.write(json.dumps(ready) + "\n")
        out.flush()
        server.run(sockets=[sock])
    finally:
        service.reads.shutdown()
        service.usage.events.close()
        memory.close()
        _unlink_own(path, bound)
        log.info("reader %d pid %d stopped", slot, os.getpid())
    return 0


def _unlink_own(path: Path, inode: int | None) -> None:
    """Remove the socket this reader bound - not one a reader started since bound at the same
    path (a reader of a new daemon, while this one finished a call)."""
    try:
        if inode is not None and path.stat().st_ino == inode:
            path.unlink()
    except OSError:
        pass
