"""Run the regulation Q&A web app: `python -m legal_web` or `memory-agent web`.

It serves on 127.0.0.1 (port 0 picks a free port) and prints the URL. It keeps its own index in
its home (default: a folder per data directory under ~/.cache/legal_web) and holds a lock there
for its whole life, so two instances never share an index. Ctrl-C or SIGTERM stops it; the
port and the lock are released and it exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from legal_web.engine import LegalEngine, default_data_dir

__all__ = ["main"]


def default_home(data_dir: Path) -> Path:
    tag = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:10]
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "legal_web" / f"{data_dir.resolve().name}-{tag}"


def _try_lock(fh) -> bool:
    """An exclusive lock on the open file, without waiting, on any OS: flock where the fcntl
    module exists, msvcrt on Windows, lockf otherwise (this app may not import memory_agent,
    whose `files.FileLock` is the same rule; tests/legal_web pins that)."""
    try:
        import fcntl

        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except ImportError:
        pass
    except BlockingIOError:
        return False
    try:
        if sys.platform == "win32":
            import msvcrt

            fh.seek(1 << 30)
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            fh.seek(0)
            os.lockf(fh.fileno(), os.F_TLOCK, 0)
    except OSError:
        return False
    return True


def _lock(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    fh = open(home / "web.lock", "a+")  # noqa: SIM115 - held for the process's life
    if not _try_lock(fh):
        fh.seek(0)
        pid = fh.read().strip() or "?"
        fh.close()
        raise SystemExit(
            f"legal_web: another instance (pid {pid}) is using {home}; "
            "stop it, or pass --home DIR for a second one"
        ) from None
    fh.truncate(0)
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise SystemExit(
            f"legal_web: cannot listen on 127.0.0.1:{port} ({exc.strerror}); "
            "choose another --port, or 0 for any free port"
        ) from None
    sock.listen(128)
    return sock


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="legal_web", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=8765, help="TCP port on 127.0.0.1 (0: any free)")
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="folder of knowledge bases (default: the bundled sample regulations)",
    )
    p.add_argument("--home", type=Path, default=None, help="where the index lives")
    p.add_argument("--embedder", choices=("minilm", "bge-m3"), default="minilm")
    p.add_argument(
        "--json", action="store_true", help='print the start line as JSON: {"url", "kbs"}'
    )
    return p


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from legal_web.app import create_app

    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s legal_web %(levelname)s %(message)s",
    )
    data = args.data or default_data_dir()
    home = args.home or default_home(data)
    lock = _lock(home)
    sock = _bind(args.port)
    engine = LegalEngine(data, home, embedder=args.embedder)
    try:
        engine.load()
        port = sock.getsockname()[1]

        class Server(uvicorn.Server):
            def handle_exit(self, sig, frame) -> None:  # exit 0 on SIGTERM, no re-raise
                if self.should_exit and sig == signal.SIGINT:
                    self.force_exit = True
                else:
                    self.should_exit = True

        server = Server(uvicorn.Config(create_app(engine), log_config=None, access_log=False))
        kbs = ", ".join(f"{kb.name} ({kb.docs})" for kb in engine.kbs.values())
        url = f"http://127.0.0.1:{port}/"
        if args.json:
            counts = {kb.name: kb.docs for kb in engine.kbs.values()}
            print(json.dumps({"url": url, "kbs": counts}), flush=True)
        else:
            print(f"legal_web serving {url}  knowledge bases: {kbs}", flush=True)
        server.run(sockets=[sock])
        return 0
    finally:
        sock.close()
        engine.close()
        lock.close()  # (closing it releases the lock)
