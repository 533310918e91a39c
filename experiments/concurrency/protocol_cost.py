"""What the MCP protocol path costs a search in the daemon: CPU per call of the bare
`Service.search`, of a `tools/call` through the SDK's stateless transport, and of the same call
through `serve.single_exchange`.

    .venv/bin/python experiments/concurrency/protocol_cost.py HOME [--calls 100] [--rounds 10]
    .venv/bin/python experiments/concurrency/protocol_cost.py --tiny   # a temporary demo home (CI)

In one process, no daemon running on HOME: one `Service` on the home, and the daemon's ASGI app
built twice on it (`build_app(..., single_exchange=False)` and the default), driven directly in
one event loop - no socket, no uvicorn, no proxy, so only the server's own work is counted.
The three are interleaved, `--calls` searches each per round (limit 8, four fixed queries);
prints the median and the minimum over the rounds of the process's CPU time per call (ONNX
Runtime's query embedding included: it runs in the calling thread).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from memory_agent import config
from memory_agent.index.memory import Memory
from memory_agent.serve.daemon import build_app
from memory_agent.serve.service import Service

QUERIES = [
    "how do we run migrations",
    "which database does staging use",
    "tests are flaky in parallel",
    "why was the cache tier changed",
]
HEADERS = [
    (b"host", b"localhost"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", b"2025-06-18"),
]


async def call(app: Any, n: int) -> None:
    """One `memory_search` POSTed to /mcp, as uvicorn hands it to the app."""
    arguments = {"query": QUERIES[n % len(QUERIES)], "limit": 8}
    params = {"name": "memory_search", "arguments": arguments}
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
    body_bytes = body.encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "client": None,
        "server": None,
        "headers": [*HEADERS, (b"content-length", str(len(body_bytes)).encode())],
    }
    pending = [{"type": "http.request", "body": body_bytes, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200 and b'"isError":true' not in sent[1]["body"], sent


async def start(app: Any) -> None:
    """Run the app's lifespan (the SDK's session manager) in the background."""
    inbox: asyncio.Queue = asyncio.Queue()
    outbox: asyncio.Queue = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    asyncio.get_running_loop().create_task(app(scope, inbox.get, outbox.put))
    assert (await outbox.get())["type"] == "lifespan.startup.complete"


async def measure(service: Service, calls: int, rounds: int) -> dict[str, list[float]]:
    apps = {
        "SDK path": build_app(service, {}, single_exchange=False),
        "single-exchange path": build_app(service, {}),
    }
    for app in apps.values():
        await start(app)
        for n in range(10):  # warm up: the model, the caches, the first-call imports
            await call(app, n)

    async def bare(n: int) -> None:
        await asyncio.to_thread(service.search, QUERIES[n % len(QUERIES)], limit=8)

    runs: dict[str, Any] = {"bare Service.search": bare}
    runs.update({name: (lambda n, app=app: call(app, n)) for name, app in apps.items()})
    out: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            t = time.process_time()
            for n in range(calls):
                await run(n)
            out[name].append((time.process_time() - t) / calls * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="a temporary demo home, 2 x 10 calls")
    args = parser.parse_args()
    if args.tiny:
        import tempfile

        home = Path(tempfile.mkdtemp(prefix="protocol-cost-")) / "home"
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm")
        args.home, args.calls, args.rounds = str(home), 10, 2
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    memory = Memory(config.load({"home": args.home}), resident=True)
    memory.require_home()
    service = Service(memory)
    service.refresh_index()  # waits for the model: every search below is a full one
    try:
        out = asyncio.run(measure(service, args.calls, args.rounds))
    finally:
        service.events.close()
        memory.close()
    bare = statistics.median(out["bare Service.search"])
    print(f"CPU per search, median (min) of {args.rounds} rounds of {args.calls} calls:")
    for name, values in out.items():
        median = statistics.median(values)
        extra = (
            f", +{median - bare:.2f} ms over the bare call"
            if values is not out["bare Service.search"]
            else ""
        )
        print(f"  {name}: {median:.2f} ms ({min(values):.2f} ms){extra}")


if __name__ == "__main__":
    main()
