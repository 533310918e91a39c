"""One agent session against the demo home, through a real `memory-agent proxy`: what an MCP
client (Claude Code, Codex, Cursor, opencode) does. Run by scripts/demo."""

import json
import os
import sys
import time
from pathlib import Path

from memory_agent.serve.session import ProxySession


def show(title: str, value) -> None:
    print(f"\n\033[1m> {title}\033[0m")
    print(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2))


def main(home: Path) -> int:
    t = time.perf_counter()
    s = ProxySession(home, env=dict(os.environ))
    try:
        init = s.initialize()["result"]
        tools = [t["name"] for t in s.send("tools/list")["result"]["tools"]]
        show(
            "initialize + tools/list",
            f"{init['serverInfo']['name']} {init['serverInfo']['version']}"
            f": {', '.join(tools)} ({(time.perf_counter() - t) * 1000:.0f} ms)",
        )
        for query in ("why did order timestamps shift by 8 hours", "数据库迁移怎么写"):
            hits = s.call("memory_search", query=query, limit=3)["structuredContent"]["hits"]
            show(
                f'memory_search "{query}"',
                "\n".join(f"{h['score']:.3f}  {h['id']}  {h['title']}" for h in hits),
            )
        added = s.call(
            "memory_add",
            title="The demo session ran through the MCP proxy",
            body="scripts/demo drove a real memory-agent proxy and daemon with the "
            "offline MiniLM model.",
            type="note",
            tags=["demo"],
            request_id="scripts-demo",
        )["structuredContent"]
        show("memory_add (same request_id on every run: the first reply comes back)", added)
        status = s.call("memory_index_status")["structuredContent"]
        show(
            "memory_index_status",
            {
                k: status[k]
                for k in ("generation", "consistent", "entries", "points", "embedder", "pending")
            },
        )
    finally:
        stderr = s.close()
    if stderr.strip():
        print(stderr, file=sys.stderr)
    bad = [line for line in s.lines if json.loads(line).get("jsonrpc") != "2.0"]
    show(
        "proxy stdout", f"{len(s.lines)} lines, all JSON-RPC" if not bad else f"NOT JSON-RPC: {bad}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
