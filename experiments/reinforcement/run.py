"""Cold vs warm retrieval over the demo KB (see README.md beside this file).

.venv/bin/python experiments/reinforcement/run.py
"""

import json
import tempfile
from pathlib import Path

from memory_agent import config
from memory_agent.index.memory import Memory
from memory_agent.recall import policy, reads
from memory_agent.recall.events import apply_event

HERE = Path(__file__).parent


def scores(memory, queries, stats):
    memory.stats = stats
    out = {}
    for q in queries:
        hits = reads.search(memory, q["query"], limit=10, explain=True)["hits"]
        out[q["qid"]] = hits
    return out


def mrr_recall(queries, runs, key=None):
    mrr = rec = 0.0
    for q in queries:
        hits = runs[q["qid"]]
        if key is not None:
            hits = sorted(hits, key=key)
        ids = [h["id"] for h in hits][:10]
        rel = set(q["relevant"])
        first = next((i for i, d in enumerate(ids) if d in rel), None)
        mrr += 1 / (first + 1) if first is not None else 0
        rec += len(rel & set(ids)) / len(rel)
    return mrr / len(queries), rec / len(queries)


def warm(targets, n, now):
    """`now`: the memory's clock (a recall stamped by the real clock would be out of its time)."""
    stats = {}
    for t in targets:
        for _ in range(n):
            apply_event(stats, {"kind": "recall", "entry": t, "rank": 1, "ts": now})
    return stats


def first_rank(hits, relevant):
    return next((i for i, h in enumerate(hits) if h["id"] in relevant), 99)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=policy.REINFORCEMENT_SCALE)
    parser.add_argument("--cap", type=float, default=policy.REINFORCEMENT_CAP)
    args = parser.parse_args()
    policy.REINFORCEMENT_SCALE, policy.REINFORCEMENT_CAP = args.scale, args.cap
    print(f"reinforcement scale {args.scale}, cap {args.cap}\n")
    queries = [json.loads(x) for x in (HERE / "queries.jsonl").read_text().splitlines()]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config.load({"home": tmp, "embedder": "minilm"})
        Memory(cfg).init(demo=True, embedder="minilm")
        memory = Memory(config.load({"home": tmp}), resident=True)
        memory.require_home()
        memory.refresh()
        cold = scores(memory, queries, {})
        base = mrr_recall(queries, cold, key=lambda h: -h["why"]["relevance"])
        print("| condition | N | MRR@10 | Recall@10 |")
        print("|---|---|---|---|")
        print(f"| relevance only (no dynamics) | - | {base[0]:.4f} | {base[1]:.4f} |")
        c = mrr_recall(queries, cold)
        print(f"| cold (dynamics on, no stats) | - | {c[0]:.4f} | {c[1]:.4f} |")
        for name, attr in (("links off", "LINK_SCALE"), ("recency off", "RECENCY_WEIGHT")):
            saved = getattr(policy, attr)
            setattr(policy, attr, 0.0)
            a = mrr_recall(queries, scores(memory, queries, {}))
            setattr(policy, attr, saved)
            print(f"| cold, {name} | - | {a[0]:.4f} | {a[1]:.4f} |")
        all_targets = sorted({t for q in queries for t in q["relevant"]})
        for n in (1, 5, 20):
            per_query = {}
            for q in queries:
                memory.stats = warm(q["relevant"], n, memory.clock())
                per_query[q["qid"]] = reads.search(memory, q["query"], limit=10, explain=True)[
                    "hits"
                ]
            w = mrr_recall(queries, per_query)
            print(f"| per-query warm | {n} | {w[0]:.4f} | {w[1]:.4f} |")
            glob = scores(memory, queries, warm(all_targets, n, memory.clock()))
            g = mrr_recall(queries, glob)
            print(f"| global warm ({len(all_targets)} entries) | {n} | {g[0]:.4f} | {g[1]:.4f} |")
            worse = better = intruders = 0
            for q in queries:
                rel = set(q["relevant"])
                before, after = first_rank(cold[q["qid"]], rel), first_rank(glob[q["qid"]], rel)
                worse += after > before
                better += after < before
                intruders += sum(
                    1
                    for h in glob[q["qid"]][:after]
                    if h["id"] in all_targets
                    and h["id"] not in rel
                    and h["id"] not in {x["id"] for x in cold[q["qid"]][:before]}
                )
            print(
                f"|   contamination (global, N={n}) | | {worse} queries worse, {better} better"
                f" | {intruders} new warmed intruders above the first relevant |"
            )
            # The sharpest case: everything warm except this query's own answers.
            others, worse = {}, 0
            for q in queries:
                memory.stats = warm(
                    [t for t in all_targets if t not in q["relevant"]], n, memory.clock()
                )
                others[q["qid"]] = reads.search(memory, q["query"], limit=10, explain=True)["hits"]
                rel = set(q["relevant"])
                worse += first_rank(others[q["qid"]], rel) > first_rank(cold[q["qid"]], rel)
            o = mrr_recall(queries, others)
            print(f"| others warm, own cold (leave-one-out) | {n} | {o[0]:.4f} | {o[1]:.4f} |")
            print(f"|   contamination (leave-one-out, N={n}) | | {worse} queries worse | |")
        memory.close()


if __name__ == "__main__":
    main()
