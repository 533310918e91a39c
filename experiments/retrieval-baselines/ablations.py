"""Ablations on the chosen configuration, through the production path.

    python experiments/retrieval-baselines/ablations.py ../shared/bench

1. MMR: nDCG@10 with mmr_lambda 1.0 (off), 0.85, 0.7 on each dataset (`ragcore.evaluate`).
2. Title in the indexed text: the lexical channel alone on LoCoMo with and without titles.
"""

import os
import sys
from dataclasses import replace
from pathlib import Path

from ragcore import BM25Index, SearchConfig, Tokenizer, chunk_document, evaluate, make_embedder
from ragcore.evaluate import load_qrels, metrics, read_corpus, read_queries
from ragcore.lexical import term_frequencies


def lexical_only(bench: Path, with_title: bool) -> float:
    tok, idx, doc_of = Tokenizer(), BM25Index(), {}
    for doc in read_corpus(bench / "corpus.jsonl"):
        doc = doc if with_title else replace(doc, title="")
        for c in chunk_document(doc):
            idx.add(c.id, term_frequencies(tok(c.text)))
            doc_of[c.id] = doc.id
    qrels = load_qrels(bench / "qrels.tsv")
    run = {}
    for qid, text in read_queries(bench / "queries.jsonl"):
        if qid in qrels:
            ranked = []
            for cid, _ in idx.search(term_frequencies(tok(text)), 50):
                if doc_of[cid] not in ranked:
                    ranked.append(doc_of[cid])
            run[qid] = ranked[:10]
    return metrics({q: qrels[q] for q in run}, run)["ndcg@10"]


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
            f"{lexical_only(root_dir / 'locomo', with_title):.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1])
