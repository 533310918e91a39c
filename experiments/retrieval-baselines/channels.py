"""Dump each channel's document ranking for every query of a bench folder.

Builds the index through the production path (ragcore.Index with the embedding cache), then
for each query records (with the calls `ragcore.search` makes: a snapshot's lexical and dense channels,
best chunk per document) the top documents of the lexical and dense channels with their raw
scores. `fusion_sweep.py` then scores fusion variants offline from these files.

    python experiments/retrieval-baselines/channels.py ../shared/bench/locomo out/locomo.json
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from ragcore import CachedEmbedder, EmbeddingCache, Index, Tokenizer, make_embedder
from ragcore.evaluate import load_qrels, read_corpus, read_queries
from ragcore.search import _per_document
from ragcore.tokenizer import term_frequencies


def main(bench: str, out: str, tokenizer_spec: str = "stem,jieba,bigrams") -> None:
    bench_dir = Path(bench)
    flags = set(tokenizer_spec.split(","))
    tok = Tokenizer(
        stem="stem" in flags,
        jieba="jieba" in flags,
        bigrams="bigrams" in flags,
        unigrams="unigrams" in flags,
    )
    cache = EmbeddingCache(
        os.environ.get("MEMORY_AGENT_CACHE", str(Path.home() / ".memory-agent/cache"))
    )
    emb = CachedEmbedder(make_embedder("minilm"), cache)
    qrels = load_qrels(bench_dir / "qrels.tsv")
    queries = [(q, t) for q, t in read_queries(bench_dir / "queries.jsonl") if q in qrels]
    with tempfile.TemporaryDirectory() as tmp:
        index = Index(Path(tmp) / "index", emb, tokenizer=tok)
        t = time.perf_counter()
        rep = index.build(
            read_corpus(bench_dir / "corpus.jsonl"),
            progress=lambda s, d, n: print(f"\r{s} {d}/{n}", end="", file=sys.stderr),
        )
        print(
            f"\nbuilt {rep.chunks} chunks in {time.perf_counter() - t:.1f}s, embedded {emb.stats.texts_embedded}",
            file=sys.stderr,
        )
        rows = {}
        snap = index.snapshot()  # the published state ragcore.search reads
        view = snap.channels(None)  # no filter
        for qid, text in queries:
            lex_hits = view.lexical(term_frequencies(tok(text)), 100)
            lex = _per_document(snap, lex_hits)
            q = emb.embed_query(text)
            dense = _per_document(snap, view.dense(q.dense, 100))
            rows[qid] = {
                "lexical": [
                    [d, h.score] for d, h in sorted(lex.items(), key=lambda kv: kv[1].rank)
                ],
                "dense": [
                    [d, h.score] for d, h in sorted(dense.items(), key=lambda kv: kv[1].rank)
                ],
                "lexical_exhaustive": len(lex_hits) < 100,
            }
        index.close()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"qrels": {q: qrels[q] for q, _ in queries}, "runs": rows}))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
