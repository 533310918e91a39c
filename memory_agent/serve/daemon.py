"""The resident daemon: one model, one index and every write, for all agent sessions of a home.

It serves MCP over streamable HTTP (stateless, JSON responses) on its endpoint
(`memory_agent.endpoint`): a Unix socket in `run/` (mode 0600, in a 0700 folder), or where the
OS has none (Windows; the `transport` setting) 127.0.0.1 on a free port with a token every
request must carry (`run/daemon.json`, 0600). Plus three plain routes: `GET /health`, `POST /admin/stop`,
`POST /admin/rebuild`. One daemon per home: it holds `run/daemon.lock` for its whole life
(a second one exits with a message naming the first) and the home lock, so no other process
touches the index meanwhile.

It opens the index at once, on a thread, while it imports the MCP SDK and builds its app
(`open_early`); a search or status that comes before the open is done waits for it. The model
loads on first use (or at once with `--preload`) in a background thread; meanwhile health
answers at once, and search answers from the lexical channel, saying so. SIGTERM (or
`/admin/stop`) lets the write in flight finish, releases the locks and the socket, and exits
0. With `idle_exit` set, it exits after that many seconds without a request; the next proxy
call starts it again.

Logs go to `run/daemon.log` (and stderr with `--foreground`); nothing is written to stdout.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memory_agent import __version__
from memory_agent import config as config_mod
from memory_agent.client import DAEMON_KEEPALIVE_S
from memory_agent.endpoint import DAEMON_JSON, SOCKET
from memory_agent.errors import AlreadyRunning, ConfigError, DaemonError
from memory_agent.files import FileLock
from memory_agent.serve.listen import TokenGate, listen
from memory_agent.serve.readers import start_readers

__all__ = ["AlreadyRunning", "run_daemon"]

log = logging.getLogger("memory_agent.daemon")
WORKER_THREADS = 128  # calls served at once (each a thread; a search holds no lock)


class RepeatFilter(logging.Filter):
    """Log a message repeated back to back once, then how often it came again: a client that
    polls a failing route writes one line, not a megabyte a minute."""

    def __init__(self) -> None:
        super().__init__()
        self._last: tuple[str, int, str] | None = None
        self._repeats = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.getMessage())
        with self._lock:
            if key == self._last:
                self._repeats += 1
                return False
            repeats, self._last, self._repeats = self._repeats, key, 0
        if repeats:
            record.msg = f"(the previous message was repeated {repeats} more times) {record.msg}"
        return True


def _setup_logging(run_dir: Path, foreground: bool) -> None:
    handlers: list[logging.Handler] = [logging.FileHandler(run_dir / "daemon.log")]
    if foreground:
        handlers.append(logging.StreamHandler(sys.stderr))
    repeat = RepeatFilter()
    for handler in handlers:
        handler.addFilter(repeat)
    logging.basicConfig(
        level=logging.INFO,
        handlers=handlers,
        force=True,
        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s",
    )
    for noisy in ("httpx", "mcp.server.streamable_http", "mcp.server.lowlevel.server"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _take_daemon_lock(run_dir: Path) -> FileLock:
    lock = FileLock(run_dir / "daemon.lock")  # held for the process's life
    if not lock.try_acquire():
        pid = (
            (run_dir / "daemon.pid").read_text().strip()
            if (run_dir / "daemon.pid").exists()
            else "?"
        )
        raise AlreadyRunning(f"a memory daemon is already running for this home (pid {pid})")
    return lock


def build_app(service: Any, server_holder: dict[str, Any], *, single_exchange: bool = True):
    """The ASGI app: MCP at /mcp plus health and admin routes. With `single_exchange`, a
    read-only tool call is answered without the SDK's per-request session
    (`serve.single_exchange`; the same kernel, the same reply)."""
    import anyio
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from memory_agent.errors import describe, http_status
    from memory_agent.serve.tools import build_server

    mcp = build_server(service)

    @mcp.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> JSONResponse:
        try:
            return JSONResponse(service.health())
        except Exception as exc:  # health must answer, whatever else is broken
            log.exception("health failed")
            return JSONResponse({"status": "error", "pid": os.getpid(), "error": str(exc)})

    @mcp.custom_route("/admin/stop", methods=["POST"])
    async def stop(request: Request) -> JSONResponse:
        log.info("stop requested")
        server = server_holder.get("server")
        if server is not None:
            server.should_exit = True
        return JSONResponse({"status": "stopping", "pid": os.getpid()})

    async def admin(fn) -> JSONResponse:
        try:
            reply = await anyio.to_thread.run_sync(fn)
        except Exception as exc:  # the same error shape as the tools: {"error": {...}}
            info = describe(exc)
            if info.code == "internal":
                log.exception("admin call failed")
            return JSONResponse({"error": info.as_json()}, status_code=http_status(info.code))
        return JSONResponse(reply)

    async def body(request: Request) -> dict[str, Any]:
        try:
            data = await request.json()
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @mcp.custom_route("/hooks/recall", methods=["POST"])
    async def hooks_recall(request: Request) -> JSONResponse:
        """What a hook injects: {prompt, session, event, cwd, project} -> {context, ids}."""
        data = await body(request)
        cwd, project = data.get("cwd"), data.get("project")
        if data.get("event") == "session-start":
            service.remote.poke(0.0)  # a session starts with what the other machines wrote
        return await admin(
            lambda: service.recall(
                str(data.get("prompt") or ""),
                data.get("session"),
                str(data.get("event") or "prompt"),
                cwd if isinstance(cwd, str) else None,
                project if isinstance(project, str) and project else None,
            )
        )

    @mcp.custom_route("/hooks/event", methods=["POST"])
    async def hooks_event(request: Request) -> JSONResponse:
        data = await body(request)
        return await admin(lambda: service.hook_event(str(data.get("event")), data.get("session")))

    @mcp.custom_route("/admin/overview", methods=["GET"])
    async def overview(request: Request) -> JSONResponse:
        return await admin(service.overview)

    @mcp.custom_route("/admin/entries", methods=["GET"])
    async def entries(request: Request) -> JSONResponse:
        q = request.query_params

        def page() -> dict[str, Any]:
            try:
                offset, limit = int(q.get("offset", 0)), int(q.get("limit", 50))
            except ValueError:
                offset, limit = 0, 50
            return service.entries(
                max(0, offset),
                max(1, min(limit, 200)),
                q.get("type", ""),
                q.get("status", ""),
                q.get("source", ""),
                q.get("scope", ""),
            )

        return await admin(page)

    @mcp.custom_route("/admin/entry", methods=["GET"])
    async def entry_context(request: Request) -> JSONResponse:
        return await admin(lambda: service.entry_context(request.query_params.get("id", "")))

    @mcp.custom_route("/admin/gate", methods=["POST"])
    async def gate(request: Request) -> JSONResponse:
        return await admin(service.run_gate)

    @mcp.custom_route("/admin/rebuild", methods=["POST"])
    async def rebuild(request: Request) -> JSONResponse:
        return await admin(service.rebuild)

    @mcp.custom_route("/admin/gc", methods=["POST"])
    async def gc(request: Request) -> JSONResponse:
        dry_run = request.query_params.get("dry_run", "1") == "1"
        confirm = request.query_params.get("confirm", "0") == "1"
        return await admin(lambda: service.gc(dry_run=dry_run, confirm=confirm))

    @mcp.custom_route("/admin/fanout", methods=["POST"])
    async def fanout(request: Request) -> JSONResponse:
        """`memory-agent fanout`: ?kb=NAME&confirm=1 -> the preview or the commit."""
        query = request.query_params
        confirm = query.get("confirm") == "1"
        return await admin(lambda: service.fanout(query.get("kb"), confirm=confirm))

    @mcp.custom_route("/admin/import", methods=["POST"])
    async def import_(request: Request) -> JSONResponse:
        """`memory-agent import`: {sections, label, scope, where, confirm} -> the plan or the
        commit (`Service.import_entries`)."""
        data = await body(request)
        args = [data.get(k) for k in ("sections", "label", "scope", "where")]
        return await admin(
            lambda: service.import_entries(*args, confirm=data.get("confirm") is True)
        )

    @mcp.custom_route("/admin/allow-secret", methods=["POST"])
    async def allow_secret(request: Request) -> JSONResponse:
        """`memory-agent secrets allow`: {fingerprint, reason, kb} -> the commit."""
        data = await body(request)
        args = [data.get(k) for k in ("fingerprint", "reason", "kb")]
        return await admin(lambda: service.allow_secret(*args))

    @mcp.custom_route("/admin/remote", methods=["GET", "POST"])
    async def remote(request: Request) -> JSONResponse:
        """GET: the remote and the last round. POST ?url=URL: set the remote."""
        if request.method == "GET":
            look = request.query_params.get("look") == "1"  # `memory-agent remote`
            return await admin(lambda: service.remote_status(look))
        return await admin(lambda: service.remote_set(request.query_params.get("url", "")))

    @mcp.custom_route("/admin/remote-sync", methods=["POST"])
    async def remote_sync(request: Request) -> JSONResponse:
        """One round of sync with the KB's remote now (?kb=NAME: that KB alone; else every KB)."""
        return await admin(lambda: service.remote_sync(request.query_params.get("kb") or None))

    @mcp.custom_route("/admin/kb", methods=["GET", "POST"])
    async def kb(request: Request) -> JSONResponse:
        """GET: the KBs of the home. POST ?name=&url=[&read_only=1]: add one (a clone)."""
        if request.method == "GET":
            return await admin(service.kb_list)
        q = request.query_params
        return await admin(
            lambda: service.kb_add(q.get("name"), q.get("url"), writable=q.get("read_only") != "1")
        )

    @mcp.custom_route("/admin/kb-remove", methods=["POST"])
    async def kb_remove(request: Request) -> JSONResponse:
        """POST ?name=NAME: remove a KB (refused while it holds unpushed work; kept aside)."""
        return await admin(lambda: service.kb_remove(request.query_params.get("name")))

    @mcp.custom_route("/admin/refresh", methods=["POST"])
    async def refresh(request: Request) -> JSONResponse:
        """Wait for the model, bring the index in line with the files, answer the status."""
        return await admin(service.refresh_index)

    # the route's name before "sync" came to mean the remote (a CLI of 0.x still calls it)
    mcp.custom_route("/admin/sync", methods=["POST"])(refresh)

    return mcp_app(mcp, single_exchange)


def mcp_app(mcp: Any, single_exchange: bool = True):
    """`mcp`'s ASGI app, stateless with JSON replies, for clients on this machine only (the
    host checks of DNS-rebinding protection); with `single_exchange`, read-only tool calls
    answered in one exchange (`serve.single_exchange`). The daemon's and a reader's."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["localhost", "localhost:*"],
        allowed_origins=[],
    )
    app = mcp.streamable_http_app(
        stateless_http=True, json_response=True, transport_security=security
    )
    if not single_exchange:
        return app
    from memory_agent.serve.single_exchange import SingleExchangeReads

    return SingleExchangeReads(app, mcp, security)


def open_early(memory: Any) -> bool:
    """Open the index, then build its link graph, on a thread started before the daemon
    imports the MCP SDK and builds its app, so the two overlap (issue 19). A search that comes
    meanwhile waits for each (the index's lock, then the graph's) and never does either again.
    A failure is logged (the daemon log's ERROR line, which the CLI shows) and kept
    (`Index.open_error`); the next call that reads the index - a search, status - opens it
    again and answers with the error and its fix. False: nothing was started - no index yet
    (the first is built once the model has loaded), or no embedder to open it with (the
    model's loader reports why)."""
    from memory_agent.errors import describe

    if memory.current_generation() is None:
        return False
    started = time.perf_counter()
    try:
        index = memory.index  # made on this thread: `Memory` makes it lazily, with no lock
    except Exception as exc:  # noqa: BLE001 - the embedder: its loader reports it, with the fix
        log.warning("the index is not opened at start: %s", describe(exc).message)
        return False

    def before() -> None:  # the test seam (memory_agent.faults): hold the open while it runs
        memory.faults.reach("pause-open")

    def then(snap: Any) -> None:
        if snap is None:
            info = describe(index.open_error)
            log.error("the index could not be opened at start: %s; fix: %s", info.message, info.fix)
            return
        opened = time.perf_counter()
        try:
            memory.link_graph(snap)
        except Exception:  # noqa: BLE001 - the first search builds it again and says what fails
            log.exception("the link graph could not be built at start")
            return
        log.info(
            "index %s opened at start: %d entries in %.2f s, link graph in %.2f s",
            snap.generation,
            len(snap),
            opened - started,
            time.perf_counter() - opened,
        )

    return index.open_in_background(before, then)


def _server_class():
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM after a graceful shutdown (exit status -15); for us SIGTERM
        is the normal way to stop: finish the work in flight, clean up, exit 0."""

        async def startup(self, sockets=None) -> None:
            # Sync tools and admin routes run in anyio's worker threads (40 by default).
            # Writes wait for the write lock in theirs; with enough threads a queue of writes
            # can never take every thread and leave searches waiting for one.
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
            await super().startup(sockets=sockets)

        def handle_exit(self, sig, frame) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    return Server


def http_server(app: Any, token: str | None, graceful_s: float) -> Any:
    """The uvicorn server of `app` (behind the token gate when there is a token): the daemon's
    and a reader's. `graceful_s`: how long a stop waits for the calls in flight."""
    import uvicorn

    if token is not None:
        app = TokenGate(app, token)
    return _server_class()(
        uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=graceful_s,
            timeout_keep_alive=DAEMON_KEEPALIVE_S,
        )
    )


def _idle_watch(service: Any, server_holder: dict[str, Any], idle_exit: float) -> None:
    """Stop the daemon after `idle_exit` seconds without a call - not while it builds
    something (`Service.busy`): the idle time counts from the end of that work."""
    while True:
        time.sleep(min(5.0, max(idle_exit / 4, 0.2)))
        server = server_holder.get("server")
        if server is None or server.should_exit:
            return
        if service.busy() is not None:
            service.touch()
            continue
        idle_for = time.monotonic() - service.last_used
        if (
            idle_for > idle_exit
            and service.readers is not None
            and service.readers.used_since_last()
        ):
            service.touch()  # the readers serve: the daemon is not idle
            continue
        if time.monotonic() - service.last_used > idle_exit and service.lock.acquire(False):
            try:
                log.info("idle for %.0f s: exiting", idle_exit)
                server.should_exit = True
            finally:
                service.lock.release()
            return


def run_daemon(
    home: str | None = None,
    *,
    preload: bool = False,
    idle_exit: float | None = None,
    foreground: bool = False,
) -> int:
    # One BLAS thread: a query's matrix-vector product is small, and on 2 cores a second
    # thread waits for a busy core (measured: the dense search took 3x longer under load).
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    from memory_agent.index.memory import Memory

    os.umask(0o077)  # everything the daemon creates (index, cache, events, log) is owner-only
    cfg = config_mod.load({"home": home})
    memory = Memory(cfg, resident=True)
    memory.require_home()
    memory.start_watching()  # inotify: a search with nothing changed reads no file
    run_dir = memory.run_dir
    os.chmod(run_dir, 0o700)
    if not foreground:
        # Never write to an inherited stdout: point fd 1 at the log's sink (stderr/devnull).
        os.dup2(2, 1)
    _setup_logging(run_dir, foreground)
    if str(cfg.machine):  # the commits' machine trailer (kb.gitrun.machine_name reads it)
        os.environ["MEMORY_AGENT_MACHINE"] = str(cfg.machine)
    daemon_lock = _take_daemon_lock(run_dir)
    assert memory.lock is not None
    memory.lock.acquire(timeout=60)  # CLI processes of an older kind may hold it briefly
    open_early(memory)  # from here on the open overlaps the imports and the app's setup
    import uvicorn  # noqa: F401 - imported now, while the index opens (`http_server` uses it)

    from memory_agent.serve.service import Service

    pid_file = run_dir / "daemon.pid"
    sock_path = run_dir / SOCKET
    endpoint_file = run_dir / DAEMON_JSON
    service = Service(memory)
    from memory_agent.serve import scrub  # issue 17: once on upgrade, redact what was stored before

    scrub.at_start(service)
    holder: dict[str, Any] = {}
    try:
        try:
            endpoint_file.unlink(missing_ok=True)  # a dead daemon's: we hold the daemon lock
            sock, token, where = listen(run_dir, str(cfg.transport))
        except (DaemonError, ConfigError) as exc:
            log.error("%s; fix: %s", exc.message, exc.fix)
            raise
        pid_file.write_text(f"{os.getpid()}\n")
        server = http_server(build_app(service, holder), token, graceful_s=60)
        holder["server"] = server
        idle = float(cfg.idle_exit) if idle_exit is None else idle_exit
        if idle > 0:
            threading.Thread(target=_idle_watch, args=(service, holder, idle), daemon=True).start()
        readers = start_readers(service, cfg, token)
        if preload or readers is not None:  # with readers, the daemon's model indexes the files
            service.start_model_load()
        service.remote.start()  # rounds of sync with the KB's remote, when it has one
        log.info(
            "memory-agent %s daemon pid %d serving %s (home %s, embedder %s)",
            __version__,
            os.getpid(),
            where,
            memory.home,
            cfg.embedder,
        )
        server.run(sockets=[sock])
        if readers is not None:
            readers[0].stop()
            readers[1].stop()
        service.remote.stop()
        service.rankers.shutdown()
        # uvicorn has finished the requests in flight (a write completes before we get here)
        with service.lock:
            memory.close()
        log.info("daemon pid %d stopped", os.getpid())
        return 0
    finally:
        for path in (sock_path, endpoint_file, pid_file):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        memory.lock.release()
        daemon_lock.release()
