"""`memory-agent eval`: a benchmark folder through the product's own search, its metrics printed."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memory_agent import config as config_mod
from memory_agent.cli.shells import progress


def cmd_eval(args: argparse.Namespace) -> int:
    from memory_agent.errors import Invalid
    from memory_agent.recall.reads import product_searcher
    from ragcore import evaluate, make_embedder, metrics_by
    from ragcore import query_graph as graph_of  # `query_graph` is this function's variable

    cfg = config_mod.load(
        {
            "home": args.home,
            "embedder": args.embedder,
            "cache": args.cache,
            "embedding_url": args.embedding_url,
            "embedding_model": args.embedding_model,
        }
    )
    bench = Path(args.bench_dir)
    if args.by and not _queries_have(bench / "queries.jsonl", args.by):
        raise Invalid(  # before the index is built, not after
            f"--by {args.by}: no query in {bench / 'queries.jsonl'} has that field",
            "name a field the queries carry (LoCoMo: category), or drop --by",
        )
    embedder = make_embedder(cfg.embedder, **config_mod.embedder_args(cfg))
    report = evaluate(
        bench,
        embedder,
        cache_dir=cfg.cache_dir,
        max_queries=args.max_queries,
        progress=None if args.quiet else progress,
        searcher=product_searcher(cfg.clock),
    )
    if args.run_out:
        with open(args.run_out, "w", encoding="utf-8") as fh:
            for qid, ranked in report.run.items():
                fh.write(json.dumps({"qid": qid, "ranked": ranked}) + "\n")
    out = report.as_json()
    query_graph = graph_of(embedder)
    if query_graph:
        out["query_graph"] = query_graph
    groups = metrics_by(bench, report.run, args.by) if args.by else {}
    if groups:
        out["by"] = {
            args.by: {
                value: {"queries": n, **{k: round(v, 4) for k, v in m.items()}}
                for value, (n, m) in groups.items()
            }
        }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{bench.name}: {out['docs']} docs, {out['chunks']} chunks, {out['queries']} queries, "
            f"embedder {cfg.embedder}"
            + (f" (queries on the {query_graph} graph)" if query_graph else "")
        )
        for key in ("recall@5", "recall@10", "mrr@10", "ndcg@10"):
            print(f"  {key:10s} {out[key]:.4f}")
        print(
            f"  query p50 {out['query_p50_ms']:.1f} ms, p95 {out['query_p95_ms']:.1f} ms; "
            f"index {out['index_s']:.1f} s ({out['texts_embedded']} texts embedded, "
            "the rest from the cache)"
        )
        if groups:
            print(f"\n| {args.by} | n | nDCG@10 | R@10 | MRR@10 |\n|---|---|---|---|---|")
            for value, (n, m) in groups.items():
                print(
                    f"| {value} | {n} | {m['ndcg@10']:.4f} | {m['recall@10']:.4f} "
                    f"| {m['mrr@10']:.4f} |"
                )
    return 0


def _queries_have(path: Path, field: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return any(line.strip() and field in json.loads(line) for line in fh)
    except (OSError, ValueError):
        return True  # evaluate() names the real problem with the file
