"""Calibrate the near-duplicate threshold on the demo KB (see README.md beside this file).

.venv/bin/python experiments/dedup-threshold/calibrate.py [--embedder minilm]
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from memory_agent import config
from memory_agent.index.memory import Memory
from memory_agent.kb.entries import read_entry
from memory_agent.kb.files import kb_files
from memory_agent.write.dedup import nearest

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    rows = [json.loads(line) for line in (HERE / "rewordings.jsonl").read_text().splitlines()]
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(config.load({"home": tmp, "embedder": args.embedder}))
        memory.init(demo=True, embedder=args.embedder)
        memory = Memory(config.load({"home": tmp, "embedder": args.embedder}), resident=True)
        memory.require_home()
        memory.refresh()
        scores: dict[str, list[float]] = {
            "distinct": [],
            "related": [],
            "light": [],
            "restated": [],
        }
        worst = {}
        for path in kb_files(memory.kb_dir)[0]:
            entry = read_entry(path)
            if entry.status != "active":
                continue
            doc_id, score = nearest(memory, entry.title, entry.body, exclude={entry.id})
            scores["distinct"].append(score)
            worst.setdefault("distinct", []).append((score, entry.id, doc_id))
        for row in rows:
            doc_id, score = nearest(memory, row["title"], row["body"])
            hit = doc_id == row["source"]
            scores[row["kind"]].append(score)
            worst.setdefault(row["kind"], []).append((score, row["source"], doc_id, hit))
        memory.close()
    print(f"embedder {args.embedder}")
    print("| population | n | min | p50 | p90 | max |")
    print("|---|---|---|---|---|---|")
    for kind, values in scores.items():
        a = np.array(values)
        print(
            f"| {kind} | {a.size} | {a.min():.3f} | {np.median(a):.3f} | "
            f"{np.percentile(a, 90):.3f} | {a.max():.3f} |"
        )
    keep_max = max(max(scores["distinct"]), max(scores["related"]))
    refuse_min = min(scores["light"])
    print(
        f"\nhighest must-not-refuse: {keep_max:.3f}; lowest must-refuse (light): {refuse_min:.3f}"
    )
    if refuse_min > keep_max:
        threshold = (keep_max + refuse_min) / 2
        print(f"gap {refuse_min - keep_max:.3f}; threshold at its middle: {threshold:.3f}")
    else:
        threshold = keep_max + 0.005
        print(
            f"no gap: overlap {keep_max - refuse_min:.3f}; threshold just above keep_max: "
            f"{threshold:.3f}"
        )
    for kind in ("light", "restated"):
        caught = sum(s >= threshold for s in scores[kind])
        print(f"{kind}: {caught}/{len(scores[kind])} refused at {threshold:.3f}")
    wrong = [w for w in worst["light"] + worst["restated"] if not w[3]]
    print(f"rewordings whose nearest entry is not their source: {wrong}")
    for kind in ("distinct", "related"):
        print(f"top {kind}: {sorted(worst[kind], reverse=True)[:3]}")


if __name__ == "__main__":
    main()
