"""Precision and recall of the gate's instruction test on hand-labelled captured lines (see
README.md beside this file).

.venv/bin/python experiments/gate-instructions/measure.py [--tiny] [--show-held-out]

`dev.jsonl` is what the rule was tuned on; `held_out.jsonl` was written before the rule changed
and is reported separately (its wrong lines only with --show-held-out, not while tuning).
"""

import argparse
import json
from pathlib import Path

from memory_agent.capture.lessons import looks_like_instruction

HERE = Path(__file__).parent


def measure(rows: list[dict]) -> dict:
    tp = fp = fn = tn = 0
    wrong = []
    for row in rows:
        flagged = looks_like_instruction(row["text"])
        instruction = row["label"] == "instruction"
        tp += flagged and instruction
        fp += flagged and not instruction
        fn += instruction and not flagged
        tn += not instruction and not flagged
        if flagged != instruction:
            wrong.append(("missed" if instruction else "flagged", row["text"]))
    return {
        "n": len(rows),
        "instructions": tp + fn,
        "benign": fp + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
        "benign flagged": fp / (fp + tn) if fp + tn else float("nan"),
        "wrong": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny", action="store_true", help="the first rows of each file")
    parser.add_argument("--show-held-out", action="store_true", help="its wrong lines too")
    args = parser.parse_args()
    print("| set | lines (instr / benign) | precision | recall | benign flagged |")
    print("|---|---|---|---|---|")
    results = {}
    for name in ("dev", "held_out"):
        rows = [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text().splitlines()]
        if args.tiny:
            rows = [r for r in rows if r["label"] == "benign"][:3] + [
                r for r in rows if r["label"] == "instruction"
            ][:3]
        results[name] = r = measure(rows)
        print(f"| {name} | {r['n']} ({r['instructions']} / {r['benign']}) | "
              f"{r['precision']:.2f} ({r['tp']}/{r['tp'] + r['fp']}) | "
              f"{r['recall']:.2f} ({r['tp']}/{r['instructions']}) | "
              f"{r['benign flagged']:.2f} ({r['fp']}/{r['benign']}) |")  # fmt: skip
    for name, r in results.items():
        if name == "held_out" and not args.show_held_out:
            continue
        print(f"\n{name}: wrong lines")
        for kind, text in r["wrong"]:
            print(f"  {kind}: {text}")


if __name__ == "__main__":
    main()
