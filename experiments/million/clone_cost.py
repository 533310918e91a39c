"""What one write's copy of the read model costs at a given size, in one process.

    .venv/bin/python experiments/million/clone_cost.py --docs 1000000 --writes 30
    .venv/bin/python experiments/million/clone_cost.py --tiny   # 2,000 documents (CI)

Builds a read model of `--docs` documents of one chunk each (synthetic ids, metadata and
terms; no dense vectors - the dense matrix is shared by a clone, never copied), then times
what the index does per write: `clone()` of the live model and `apply()` of one new
document on the clone, which then serves (as `Index.apply` swaps it in). Prints the p50 and
max of each, and the process's peak RSS. Run it on two checkouts (PYTHONPATH) to compare.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

from ragcore.docinfo import DocInfo
from ragcore.postings import Base
from ragcore.readmodel import ModelArrays, ReadModel
from ragcore.segment import ChunkRow
from ragcore.setindex import name_table


def synthetic(n: int) -> ModelArrays:
    rng = np.random.default_rng(0)
    docs = [
        DocInfo(
            f"bench-{i:07d}",
            f"title {i}",
            "kb",
            f"note/bench-{i:07d}.md",
            True,
            [],
            {"type": "note", "status": "active", "scope": "global", "tags": ["t"]},
            f"h{i}",
            1,
        )
        for i in range(n)
    ]
    slots = np.repeat(np.arange(n, dtype=np.int32), 8)
    terms = rng.integers(0, 50_000, slots.size).astype(np.int64)
    return ModelArrays(
        dim=4,
        with_dense=False,
        docs=docs,
        chunk_ids=[f"bench-{i:07d}#0" for i in range(n)],
        slot_doc=np.arange(n, dtype=np.int32),
        slot_n=np.zeros(n, dtype=np.int32),
        matrix=None,
        lengths=np.full(n, 8, dtype=np.float32),
        lexical=Base.of_entries(slots, terms, np.ones(slots.size, dtype=np.float32)),
        sparse_alive=None,
        sparse=None,
        tags=name_table([("t",)] * n),
        entities=name_table([()] * n),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--writes", type=int, default=30)
    ap.add_argument("--tiny", action="store_true", help="2,000 documents, 3 writes")
    args = ap.parse_args()
    if args.tiny:
        args.docs, args.writes = 2_000, 3
    t = time.perf_counter()
    model = ReadModel.from_arrays(synthetic(args.docs))
    print(f"built {args.docs} documents in {time.perf_counter() - t:.1f} s")
    clones, applies = [], []
    for w in range(args.writes):
        doc_id = f"new-{w:05d}"
        info = DocInfo(doc_id, "new", "kb", f"note/{doc_id}.md", True, [], {"type": "note"}, "x", 1)
        row = ChunkRow(
            f"{doc_id}#0", doc_id, 0, "", "", np.zeros(0, np.float32),
            np.arange(8, dtype=np.int64), np.ones(8, dtype=np.float32),
        )  # fmt: skip
        t = time.perf_counter()
        new = model.clone()
        clones.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        new.apply([info], [row], [])
        applies.append((time.perf_counter() - t) * 1000)
        model = new  # the clone serves; the old model is dropped
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"clone p50 {statistics.median(clones):.2f} ms (max {max(clones):.2f}); "
        f"apply p50 {statistics.median(applies):.2f} ms (max {max(applies):.2f}); "
        f"peak RSS {rss:.0f} MB"
    )


if __name__ == "__main__":
    main()
