"""Ablations on the chosen configuration, through the production path.

    python experiments/retrieval-baselines/ablations.py ../shared/bench

1. MMR: nDCG@10 with mmr_lambda 1.0 (off), 0.85, 0.7 on each dataset (`ragcore.evaluate`).
2. Title in the indexed text: the lexical channel alone on LoCoMo with and without titles
   (`lexical_sweep.run`, k1 0.9, b 0.4).
"""

import os
import sys
from pathlib import Path

from lexical_sweep import run  # noqa: E402 - a sibling script

from ragcore import SearchConfig, Tokenizer, evaluate, make_embedder


def main(root: str) -> None:
    root_dir = Path(root)
    cache = os.environ.get("MEMORY_AGENT_CACHE", str(Path.home() / ".memory-agent" / "cache"))
    embedder = make_embedder("minilm")
    print("| dataset | MMR off | MMR 0.85 | MMR 0.7 |")
    print("|---|---|---|---|")
    for name in ("locomo", "scifact", "cmrc2018"):
        row = []
        for lam in (1.0, 0.85, 0.7):
            report = evaluate(
                root_dir / name, embedder, cache_dir=cache, config=SearchConfig(mmr_lambda=lam)
            )
            row.append(f"{report.metrics['ndcg@10']:.4f}")
        print(f"| {name} | " + " | ".join(row) + " |", flush=True)
    print()
    for with_title in (True, False):
        print(
            f"LoCoMo lexical only, title {'in' if with_title else 'out'}: "
            f"{run(root_dir / 'locomo', Tokenizer(), 0.9, 0.4, with_title)['ndcg@10']:.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1])
