"""Sweep of the expansion settings on one LoCoMo index, per category.

    MEMORY_AGENT_CACHE=... .venv/bin/python experiments/multihop/sweep.py [BENCH_DIR] [--json]

Indexes BENCH_DIR (default ../shared/bench/locomo) once through the production path
(`ragcore.evaluate` with the product's searcher: the default filter, the ranking with empty
usage stats) and, for every query, runs the ranking under each variant of
`memory_agent.recall.policy` on that same index. Prints nDCG@10 and Recall@10 per category and
overall, and the mean ranking time of each variant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_agent import config  # noqa: E402
from memory_agent.index.links import link_graph  # noqa: E402
from memory_agent.recall import policy  # noqa: E402
from memory_agent.recall.reads import default_filter, rank  # noqa: E402
from ragcore import evaluate, make_embedder, metrics, metrics_by  # noqa: E402
from ragcore.evaluate import load_qrels, read_queries  # noqa: E402

# The ranking before this experiment: one hop along wikilinks and supersedes, LINK_SCALE 0.08;
# every variant changes only what it names. ENTITY is the entity edge's weight.
BASE = {
    "LINK_SOURCES": 3,
    "LINK_MIN_SCORE": 0.5,
    "LINK_SCALE": 0.08,
    "MAX_HOPS": 2,
    "CAP_MATCHING": True,
    "ENTITY_MAX_DOCS": 50,
    "ENTITY": 0.0,
    "QUERY_ENTITY_SCALE": 0.0,
}
VARIANTS: dict[str, dict] = {
    "before (no entity edges, scale 0.08)": {},
    "entity edges": {"ENTITY": 0.5},
    "entity edges, 1 hop": {"ENTITY": 0.5, "MAX_HOPS": 1},
    "entity edges, max docs 10": {"ENTITY": 0.5, "ENTITY_MAX_DOCS": 10},
    "entity edges, max docs 200": {"ENTITY": 0.5, "ENTITY_MAX_DOCS": 200},
    "entity edges, sources 10, min 0.3": {
        "ENTITY": 0.5,
        "LINK_SOURCES": 10,
        "LINK_MIN_SCORE": 0.3,
    },
    "entity edges, scale 0.2": {"ENTITY": 0.5, "LINK_SCALE": 0.2},
    "entity edges, scale 0.2, no cap on matching": {
        "ENTITY": 0.5,
        "LINK_SCALE": 0.2,
        "CAP_MATCHING": False,
    },
    "entity edges, scale 0.5, no cap on matching": {
        "ENTITY": 0.5,
        "LINK_SCALE": 0.5,
        "CAP_MATCHING": False,
    },
    "entity edges, scale 1.0, no cap, sources 10": {
        "ENTITY": 0.5,
        "LINK_SCALE": 1.0,
        "CAP_MATCHING": False,
        "LINK_SOURCES": 10,
        "LINK_MIN_SCORE": 0.3,
    },
    "query entities 0.05": {"QUERY_ENTITY_SCALE": 0.05},
    "query entities 0.15": {"QUERY_ENTITY_SCALE": 0.15},
    "entity edges, scale 0.2, query entities 0.05": {
        "ENTITY": 0.5,
        "LINK_SCALE": 0.2,
        "QUERY_ENTITY_SCALE": 0.05,
    },
    "entity edges, scale 0.2, query entities 0.15": {
        "ENTITY": 0.5,
        "LINK_SCALE": 0.2,
        "QUERY_ENTITY_SCALE": 0.15,
    },
}


@contextlib.contextmanager
def settings(values: dict):
    merged = {**BASE, **values}
    saved = {k: getattr(policy, k) for k in BASE if k != "ENTITY"}
    saved_entity = policy.EDGE_WEIGHTS["entity"]
    try:
        for key, value in merged.items():
            if key == "ENTITY":
                policy.EDGE_WEIGHTS["entity"] = value
            else:
                setattr(policy, key, value)
        yield
    finally:
        for key, value in saved.items():
            setattr(policy, key, value)
        policy.EDGE_WEIGHTS["entity"] = saved_entity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", nargs="?", default=str(ROOT.parent / "shared/bench/locomo"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bench = Path(args.bench)
    if not (bench / "queries.jsonl").is_file():
        raise SystemExit(f"no bench at {bench}: ../shared is absent (it is not copied here)")
    cfg = config.load({"embedder": "minilm"})
    embedder = make_embedder("minilm", runtime=cfg.runtime, work_dir=cfg.cache_dir)
    qid_of: dict[str, list[str]] = {}
    for qid, text in read_queries(bench / "queries.jsonl"):
        qid_of.setdefault(text, []).append(qid)
    runs: dict[str, dict[str, list[str]]] = {name: {} for name in VARIANTS}
    spent: dict[str, float] = dict.fromkeys(VARIANTS, 0.0)
    graphs: dict[int, dict] = {}

    def searcher(index, query: str, limit: int) -> list[str]:
        graph = graphs.get(index.revision)
        if graph is None:
            graph = graphs[index.revision] = link_graph(index)
        first = None
        for name, values in VARIANTS.items():
            with settings(values):
                t = time.perf_counter()
                found = rank(
                    index, query, default_filter(), limit=limit, stats={}, now=0.0, graph=graph
                )
                spent[name] += time.perf_counter() - t
            ids = [h["id"] for h in found.reply["hits"]]
            for qid in qid_of.get(query, []):
                runs[name][qid] = ids
            first = first or ids
        return first

    report = evaluate(bench, embedder, cache_dir=cfg.cache_dir, searcher=searcher)
    qrels = load_qrels(bench / "qrels.tsv")
    rows = []
    for name, run in runs.items():
        overall = metrics({q: qrels[q] for q in run if q in qrels}, run)
        groups = metrics_by(bench, run, "category")
        rows.append(
            {
                "variant": name,
                "overall": round(overall["ndcg@10"], 4),
                **{c: round(m["ndcg@10"], 4) for c, (_, m) in groups.items()},
                **{f"R@10 {c}": round(m["recall@10"], 4) for c, (_, m) in groups.items()},
                "rank ms": round(1000 * spent[name] / max(1, len(run)), 2),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    cats = [k for k in rows[0] if k not in ("variant", "overall", "rank ms") and "R@" not in k]
    print(f"{bench.name}: {report.docs} docs, {len(runs[next(iter(runs))])} queries; nDCG@10")
    print("| variant | overall | " + " | ".join(cats) + " | R@10 multi-hop | rank ms |")
    print("|---|---|" + "---|" * len(cats) + "---|---|")
    for r in rows:
        print(
            f"| {r['variant']} | {r['overall']:.4f} | "
            + " | ".join(f"{r[c]:.4f}" for c in cats)
            + f" | {r.get('R@10 multi-hop', 0):.4f} | {r['rank ms']} |"
        )


if __name__ == "__main__":
    main()
