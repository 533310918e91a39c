"""Lexical channel alone: tokenizer variants and BM25 parameters, on the production chunker.

python experiments/retrieval-baselines/lexical_sweep.py ../shared/bench/cmrc2018
"""

import sys
from dataclasses import replace
from pathlib import Path

from ragcore import Tokenizer, chunk_document
from ragcore.evaluate import load_qrels, metrics, read_corpus, read_queries
from ragcore.lexical import BM25Index
from ragcore.tokenizer import term_frequencies

VARIANTS = {
    "stem+jieba+bigrams": Tokenizer(),
    "stem+jieba": Tokenizer(bigrams=False),
    "stem+bigrams": Tokenizer(jieba=False),
    "stem+bigrams+unigrams": Tokenizer(jieba=False, unigrams=True),
    "stem+jieba+bigrams+unigrams": Tokenizer(unigrams=True),
    "nostem+jieba+bigrams": Tokenizer(stem=False),
}


def run(bench: Path, tok: Tokenizer, k1: float, b: float, with_title: bool = True) -> dict:
    idx = BM25Index(k1=k1, b=b)
    doc_of = {}
    for doc in read_corpus(bench / "corpus.jsonl"):
        doc = doc if with_title else replace(doc, title="")
        for c in chunk_document(doc):
            idx.add(c.id, term_frequencies(tok(c.text)))
            doc_of[c.id] = doc.id
    qrels = load_qrels(bench / "qrels.tsv")
    run = {}
    for qid, text in read_queries(bench / "queries.jsonl"):
        if qid not in qrels:
            continue
        ranked = []
        for cid, _ in idx.search(term_frequencies(tok(text)), 50):
            if doc_of[cid] not in ranked:
                ranked.append(doc_of[cid])
        run[qid] = ranked[:10]
    return metrics({q: qrels[q] for q in run}, run)


if __name__ == "__main__":
    bench = Path(sys.argv[1])
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(VARIANTS)
    for name in names:
        for k1, b in ((1.2, 0.75), (1.5, 0.75), (0.9, 0.4), (1.2, 0.5), (2.0, 0.75)):
            m = run(bench, VARIANTS[name], k1, b)
            print(
                f"{bench.name:9s} {name:30s} k1={k1} b={b}  ndcg@10={m['ndcg@10']:.4f} mrr={m['mrr@10']:.4f} r@10={m['recall@10']:.4f}",
                flush=True,
            )
