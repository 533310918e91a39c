"""`memory-agent ...`: thin shells over library calls. Printing and exit codes live here only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memory_agent import config as config_mod

EMBEDDERS = ("minilm", "bge-m3")


def _progress(stage: str, done: int, total: int) -> None:
    print(
        f"\r{stage}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from ragcore import RagcoreError, evaluate, make_embedder

    cfg = config_mod.load({"home": args.home, "embedder": args.embedder, "cache": args.cache})
    bench = Path(args.bench_dir)
    try:
        embedder = make_embedder(cfg.embedder, model_path=cfg.model_path or None)
        report = evaluate(
            bench,
            embedder,
            cache_dir=cfg.cache_dir,
            max_queries=args.max_queries,
            progress=None if args.quiet else _progress,
        )
    except RagcoreError as exc:
        print(f"memory-agent eval: {exc}", file=sys.stderr)
        return 2
    if args.run_out:
        with open(args.run_out, "w", encoding="utf-8") as fh:
            for qid, ranked in report.run.items():
                fh.write(json.dumps({"qid": qid, "ranked": ranked}) + "\n")
    out = report.as_json()
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{bench.name}: {out['docs']} docs, {out['chunks']} chunks, {out['queries']} queries, "
            f"embedder {cfg.embedder}"
        )
        for key in ("recall@5", "recall@10", "mrr@10", "ndcg@10"):
            print(f"  {key:10s} {out[key]:.4f}")
        print(
            f"  query p50 {out['query_p50_ms']:.1f} ms, p95 {out['query_p95_ms']:.1f} ms; "
            f"index {out['index_s']:.1f} s ({out['texts_embedded']} texts embedded, "
            "the rest from the cache)"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-agent",
        description="Long-term memory for coding agents: a Markdown knowledge base in git, "
        "searched through a resident daemon over MCP.",
    )
    parser.add_argument(
        "--home", help="home directory (default: $MEMORY_AGENT_HOME or ~/.memory-agent)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "eval",
        help="score retrieval on a benchmark folder (corpus.jsonl, queries.jsonl, qrels.tsv)",
        description="Index BENCH_DIR/corpus.jsonl in a temporary home through the production "
        "indexing path, run BENCH_DIR/queries.jsonl through the production search path, and "
        "print Recall@5, Recall@10, MRR@10, nDCG@10, query latency p50/p95 and index time. "
        "Embeddings are cached in $MEMORY_AGENT_CACHE (default <home>/cache), so a second run "
        "of the same corpus embeds nothing.",
    )
    p.add_argument("bench_dir", metavar="BENCH_DIR")
    p.add_argument("--embedder", choices=EMBEDDERS, help="embedding model (default: config)")
    p.add_argument("--cache", help="embedding cache directory (default: $MEMORY_AGENT_CACHE)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--run-out", metavar="FILE", help="write the ranking of every query as JSONL")
    p.add_argument("--max-queries", type=int, help="score only the first N queries")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:  # configuration errors
        print(f"memory-agent: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
