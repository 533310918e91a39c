"""Where one search's time goes at a given size, channel by channel, in one process.

    .venv/bin/python experiments/million/stages.py HOME [--queries 200] [--offset 0] [--no-prune]
    .venv/bin/python experiments/million/stages.py --tiny   # the demo home (CI)

HOME: a home with a built index (`benchmarks/daemon.py --entries N --work W` leaves
W/home-N); no daemon may be running on it. The product's search (`recall.reads.search`, limit
8, default filters, no usage logged) over the benchmark's dev queries, each timed whole and,
inside it, ragcore's own stages as `ragcore.search` records them (`SearchResult.timings_ms`): the
lexical channel (tokenising, BM25 over the postings, grouping by document), the query's
embedding, the dense channel (graph or exact scan, with the lexical candidates), and the rest
of ragcore's search (fusion, MMR, payloads); "product" is what the memory adds around it
(scopes, reranking, the hits' reply). The query's embedding is timed where the product
runs it (before ragcore's search, which is handed the vector). Prints p50 / p95 of each in ms, then the lexical
channel's size: its postings (entries, bytes; mapped from the saved arrays) and the terms.
experiments/million/README.md, "The lexical channel and the other per-search work".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon runs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments" / "million"))
sys.path.insert(0, str(ROOT / "experiments" / "concurrency"))

import fusion_recall  # noqa: E402
from inprocess import demo_home  # noqa: E402

from memory_agent import config  # noqa: E402
from memory_agent.index.memory import Memory  # noqa: E402
from memory_agent.recall import reads  # noqa: E402
from ragcore import lexical  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--tiny", action="store_true", help="the demo home")
    parser.add_argument(
        "--no-prune", action="store_true", help="BM25 scores every posting (no top-k pruning)"
    )
    args = parser.parse_args()
    if args.no_prune:  # in this process only: the lexical channel as it was before the pruning
        lexical.PRUNE_TERMS_OVER = 1 << 62
    if args.tiny:
        args.home, args.queries = demo_home("stages-"), 3
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    memory = Memory(config.load({"home": args.home}), resident=True)
    memory.require_home()
    memory.start_watching()  # as the daemon: a search with nothing changed reads no file
    memory.refresh()
    for _ in range(1200):  # a large index maps its saved graph after the open
        snap = memory.index.snapshot()
        if snap.model.graph is not None or snap.model.hw < 50_000:
            break
        time.sleep(0.5)
    recorded: list[dict[str, float]] = []
    inner = reads.relevance  # ragcore.search, as reads calls it

    def timed(*a, **kw):  # ragcore's search, its own timings kept
        result = inner(*a, **kw)
        recorded.append(result.timings_ms)
        return result

    reads.relevance = timed
    embedder = memory.index.embedder
    embed_query = embedder.embed_query
    embedded: list[float] = []

    def timed_embedding(text):  # the product embeds the query before ragcore's search
        t = time.perf_counter()
        out = embed_query(text)
        embedded.append((time.perf_counter() - t) * 1000)
        return out

    embedder.embed_query = timed_embedding
    queries = fusion_recall.queries(args.queries, args.offset)
    for q in queries[:5]:  # warm up
        reads.search(memory, q, limit=8)
    recorded.clear()
    embedded.clear()
    stages: dict[str, list[float]] = {}
    for q in queries:
        t = time.perf_counter()
        reads.search(memory, q, limit=8)
        whole = (time.perf_counter() - t) * 1000
        parts = recorded.pop()
        embed = sum(embedded)
        recorded.clear()
        embedded.clear()
        rest = parts["total"] - sum(parts.get(k, 0.0) for k in ("lexical", "embed", "dense"))
        for name, value in (
            ("embed", embed),
            *((k, parts.get(k, 0.0)) for k in ("lexical", "dense")),
            ("fusion and payloads", rest),
            ("product", whole - parts["total"] - embed + parts.get("embed", 0.0)),
            ("search, whole", whole),
        ):
            stages.setdefault(name, []).append(value)
    model = memory.index.snapshot().model
    print(
        f"{args.home}: {len(model.docs)} documents, {model.chunks} chunks, {len(queries)} queries"
    )
    for name, values in stages.items():
        print(f"  {name:20} p50 {statistics.median(values):7.2f}  p95 {pct(values, 0.95):7.2f} ms")
    p = model.bm25._postings  # the arrays' sizes, read (an experiment, not the product)
    size = sum(a.nbytes for a in (p._terms, p._offsets, p._slots, p._weights)) / 2**20
    print(
        f"  lexical postings: {p.base_entries} base entries in {size:.0f} MB "
        f"({p._terms.size} terms), {p.delta_entries} in the delta"
    )
    memory.close()


if __name__ == "__main__":
    main()
