"""Vectors for the benchmark homes' entries, composed from real MiniLM sentence vectors, written
into a benchmark embedding cache - for sizes that the model cannot embed in a session.

    .venv/bin/python benchmarks/daemon_vectors.py --entries 1000000 \
        --work /tmp/memory-agent-bench-composed [--check 200]

MiniLM embeds a benchmark entry (a title and 2-5 sentences, ~150-250 tokens) at ~13 a second
on this 2-core machine: 100,000 entries take two hours, 1,000,000 a day. An entry of
`benchmarks/daemon_home.py` is made of sentences of SciFact and LoCoMo (~49,000 of them), so
this embeds each sentence once with the real model (minutes) and gives each entry the
normalised mean of its title's and body sentences' vectors (MiniLM itself mean-pools its
tokens). The vectors are stored under the content hash of the entry's chunk text, as the index
would look them up, in `--work`/cache: a cache of its own, never the real one, so a composed
vector is never served as a real one elsewhere. `benchmarks/daemon.py --work` the same folder
then indexes every entry from that cache.

`--check N` embeds the first N entries for real and prints the cosine between each entry's
real and composed vector (how close the stand-in is).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from daemon_home import HOME_SEED, Text

from ragcore import make_embedder
from ragcore.documents import DEFAULT_MAX_CHARS, Document, chunk_document
from ragcore.embedding import Embedding, EmbeddingCache, text_hash


def entry_parts(text: Text, count: int):
    """(n, title, body, sentence indices) of the first `count` entries of every home: the
    same calls on the same seeded stream as `Text.entry` (choice, randint, sample)."""
    rng = text.rng
    rng.seed(HOME_SEED)
    size = len(text.sentences)
    for n in range(count):
        state = rng.getstate()
        title_i = rng.choice(range(size))
        body_i = rng.sample(range(size), rng.randint(2, 5))
        rng.setstate(state)
        title, body = text.entry(n)
        yield n, title, body, [title_i, *body_i]


def chunk_texts(n: int, title: str, body: str) -> list[str]:
    doc = Document(id=f"bench-{n:06d}", title=title, body=body)
    return [c.text for c in chunk_document(doc, DEFAULT_MAX_CHARS)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-bench-composed"))
    ap.add_argument("--check", type=int, default=0)
    args = ap.parse_args()
    text = Text()
    model = make_embedder("minilm", runtime="onnx", work_dir=args.work / "cache")
    model.load()
    sentences_file = args.work / "sentences.npy"
    if sentences_file.is_file():
        vectors = np.load(sentences_file)
    else:
        t = time.perf_counter()
        vectors = np.zeros((len(text.sentences), model.dim), dtype=np.float32)
        for start in range(0, len(text.sentences), 512):
            part = text.sentences[start : start + 512]
            vectors[start : start + len(part)] = [e.dense for e in model.embed_documents(part)]
            print(f"sentences {start + len(part)}/{len(text.sentences)}", file=sys.stderr)
        args.work.mkdir(parents=True, exist_ok=True)
        np.save(sentences_file, vectors)
        print(f"sentences embedded in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    cache = EmbeddingCache(args.work / "cache")
    pending: list[tuple[str, Embedding]] = []
    checks = []
    for n, title, body, parts in entry_parts(text, args.entries):
        composed = vectors[parts].mean(axis=0)
        composed /= np.linalg.norm(composed)
        for chunk in chunk_texts(n, title, body):
            pending.append((text_hash(chunk), Embedding(dense=composed.astype(np.float32))))
            if n < args.check:
                real = model.embed_documents([chunk])[0].dense
                checks.append(float(real @ composed))
        if len(pending) >= 20_000:
            cache.put_many(model.model_id, pending)
            pending = []
            print(f"entries {n + 1}/{args.entries}", file=sys.stderr)
    cache.put_many(model.model_id, pending)
    print(f"{cache.count(model.model_id)} vectors in {cache.path}")
    if checks:
        c = np.array(checks)
        print(
            f"cosine(real, composed) over {c.size} chunks: mean {c.mean():.3f}, "
            f"p5 {np.percentile(c, 5):.3f}, min {c.min():.3f}"
        )


if __name__ == "__main__":
    main()
