"""How long the open of an index's read model takes: from the segment's rows, from the arrays
saved beside it, and from those arrays plus changes replayed.

    .venv/bin/python experiments/daemon-start/open.py [--entries 100000] [--runs 3]
        [--changes 100,2000] [--work DIR] [--tiny]

Builds (once; reused from --work) an index of N synthetic entries through `ragcore.Index` with
a hashing embedder of MiniLM's shape (384-d, no sparse weights: no model is loaded, so the
build costs chunking, tokenizing and SQLite only). Entries are sampled with a fixed seed as
benchmarks/daemon.py samples them: a title sentence and 2-5 body sentences of the SciFact and
LoCoMo corpora in ../shared/bench (word salad without it), type/status/tags in the metadata. Then, each `--runs` times in a fresh `Index` object of this process: the open from
the rows (the saved arrays deleted first), the open from the saved arrays, and - after a change
of K entries - the open that replays them; each followed by one lexical search (what a daemon's
first answer needs). It checks that every open answers the same searches identically. Prints
a table of medians: wall time and this process's CPU time (on a shared machine the CPU time
moves less with the neighbours' load). `--tiny`: 300 entries, one run, changes of 10.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from ragcore import Document, Embedding, Index, search
from ragcore.modelload import FILE

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT.parent / "shared" / "bench"
SENTENCES: list[str] = []
WORDS = (ROOT / "benchmarks" / "core.py").read_text().split('"""')[3].split()
QUERIES = [
    "what causes inflammation",
    "did she adopt a dog",
    "cell growth in tumours",
    "where did they travel last summer",
]


class Hashing:
    """384-d unit vectors from a hash of the text: MiniLM's shape, none of its cost."""

    model_id, dim, has_sparse = "hashing-384", 384, False

    def embed_documents(self, texts):
        out = []
        for text in texts:
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = rng.standard_normal(self.dim).astype(np.float32)
            out.append(Embedding(v / np.linalg.norm(v)))
        return out

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def sentences() -> list[str]:
    """Sentences of the SciFact and LoCoMo corpora (as benchmarks/daemon.py samples them), or
    seeded word salad without ../shared/bench."""
    out = []
    for name in ("scifact", "locomo"):
        corpus = BENCH / name / "corpus.jsonl"
        if corpus.is_file():
            for line in corpus.read_text(encoding="utf-8").splitlines():
                for s in (json.loads(line).get("text") or "").replace("\n", " ").split(". "):
                    s = " ".join(s.split())
                    if 40 <= len(s) <= 300:
                        out.append(s.rstrip(".") + ".")
    rng = random.Random(1)
    return out or [
        " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "." for _ in range(20000)
    ]


def entries(n: int, seed: int = 7, start: int = 0) -> list[Document]:
    """A title sentence and 2-5 body sentences each, as benchmarks/daemon.py writes them."""
    rng = random.Random(seed)
    pool = SENTENCES or sentences()
    SENTENCES[:] = pool
    docs = []
    for i in range(start, start + n):
        title = rng.choice(pool)[:150].rstrip(".")
        body = " ".join(rng.sample(pool, rng.randint(2, 5)))
        meta = {
            "type": rng.choice(["note", "fact", "decision"]),
            "status": "active",
            "created": "2026-11-01T00:00:00Z",
            "tags": rng.sample(["ci", "db", "api"], rng.randint(0, 2)),
        }
        docs.append(
            Document(f"bench-{i:06d}", f"{title} ({i})", body, meta, "kb", f"note/bench-{i:06d}.md")
        )
    return docs


def canonical(hits) -> tuple[list[float], list[str]]:
    """A search's answer up to ties: every score, and the documents scoring above the last
    one. Equal scores (entries that share their text) come in slot order, and a replay puts
    the changed entries in other slots than a fresh read of the rows."""
    scores = [round(h.score, 5) for h in hits]
    last = min(scores, default=0.0)
    return scores, sorted(h.doc_id for h in hits if round(h.score, 5) > last)


def open_once(root: Path) -> tuple[float, float, float, str, list]:
    """(open s, its CPU s, first lexical search ms, where the model came from, the answers)."""
    index = Index(root, Hashing())
    t, cpu = time.perf_counter(), time.process_time()
    index.open()
    opened, cpu = time.perf_counter() - t, time.process_time() - cpu
    t = time.perf_counter()
    search(index, QUERIES[0], use_dense=False)
    first = (time.perf_counter() - t) * 1000
    answers = [canonical(search(index, q, limit=20).hits) for q in QUERIES]
    origin = index.snapshot().origin
    index.close()
    return opened, cpu, first, origin, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changes", default="100,2000", help="entries changed before a reopen")
    parser.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-open"))
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    if args.tiny:
        args.entries, args.runs, args.changes = 300, 1, "10"
        args.work = Path("open-tiny").resolve()
    root = args.work / f"index-{args.entries}"
    if not (root / "CURRENT").is_file():
        shutil.rmtree(root, ignore_errors=True)
        print(f"building {args.entries} entries in {root}", file=sys.stderr)
        t = time.perf_counter()
        Index(root, Hashing()).build(entries(args.entries))
        print(f"built in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    saved = root / (root / "CURRENT").read_text().strip() / FILE
    rows: list[tuple[str, list[tuple[float, float, float, str, list]]]] = []
    runs = []
    for _ in range(args.runs):
        saved.unlink(missing_ok=True)
        runs.append(open_once(root))  # from the rows; saves the arrays
    rows.append(("segment rows (then saved)", runs))
    rows.append(("saved arrays", [open_once(root) for _ in range(args.runs)]))
    for k in (int(x) for x in args.changes.split(",")):
        index = Index(root, Hashing())
        index.apply(entries(k, seed=k, start=0))  # rewrite the first k entries
        index.close()
        runs = [open_once(root) for _ in range(args.runs)]
        rows.append((f"saved arrays + {k} changes", runs))
        saved.unlink()  # from the rows (and saved again): the reference for these answers
        assert all(r[4] == open_once(root)[4] for r in runs), "the replay answered differently"
    reference = rows[0][1][0][4]
    assert all(r[4] == reference for r in rows[1][1]), "saved arrays answered differently"
    size = saved.stat().st_size / 1e6
    segment = (saved.parent / "segment.sqlite").stat().st_size / 1e6
    print(
        f"{args.entries:,} entries, open of the read model in one process, median of "
        f"{args.runs}; segment {segment:.0f} MB, saved arrays {size:.0f} MB"
    )
    print("| open from | open (wall) | open (CPU) | first lexical search | origin |")
    print("|---|---|---|---|---|")
    for name, runs in rows:
        opened, cpu, first = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"| {name} | {opened:.2f} s | {cpu:.2f} s | {first:.1f} ms | {runs[-1][3]} |")


if __name__ == "__main__":
    main()
