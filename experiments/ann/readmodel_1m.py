"""A read model of 1,000,000 benchmark entries in this process: what each part of a search
costs at that size (dense exact vs on the graph, lexical, the filter mask, per-document
aggregation), the graph's build time and recall, and the process's memory.

    .venv/bin/python experiments/ann/readmodel_1m.py [--entries 1000000] [--queries 100]
        [--work /tmp/memory-agent-bench-composed] [--graph PATH]

The entries are those of benchmarks/daemon.py's homes (the same seeded stream); each entry's
dense vector is the normalised mean of its sentences' real MiniLM vectors (as
benchmarks/daemon_vectors.py composes them; its sentences.npy is read from --work) and its
term frequencies the sum of its sentences' (the real tokenizer, each sentence tokenised once;
the title's "(n)" left out). Queries: SciFact and LoCoMo dev queries, embedded with MiniLM.
`--graph PATH`: a graph saved by an earlier run is mapped instead of built (and one built is
saved there). `--tiny` (CI): 200 entries in a temporary folder, only their sentences embedded,
3 queries.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from daemon_home import Text  # noqa: E402
from daemon_vectors import entry_parts  # noqa: E402

from ragcore import ann  # noqa: E402
from ragcore.docinfo import DocInfo  # noqa: E402
from ragcore.postings import Base  # noqa: E402
from ragcore.readmodel import ModelArrays, ReadModel  # noqa: E402
from ragcore.setindex import name_table  # noqa: E402
from ragcore.store import Filter  # noqa: E402
from ragcore.tokenizer import Tokenizer, term_frequencies  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ms(fn, items) -> tuple[float, float, list]:
    times, out = [], []
    for item in items:
        t = time.perf_counter()
        out.append(fn(item))
        times.append((time.perf_counter() - t) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95)), out


def tiny_sentences(text: Text, entries: int, cache: Path) -> np.ndarray:
    """The `--tiny` run's sentence vectors: only the sentences its entries use are embedded
    (the others stay zero; no entry reads them)."""
    from ragcore import make_embedder

    used = sorted({s for *_, p in entry_parts(text, entries) for s in p})
    embedder = make_embedder("minilm", runtime="onnx", work_dir=cache)
    out = np.zeros((len(text.sentences), embedder.dim), dtype=np.float32)
    out[used] = [e.dense for e in embedder.embed_documents([text.sentences[i] for i in used])]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memory-agent-bench-composed"))
    ap.add_argument("--graph", type=Path, default=None)
    ap.add_argument("--tiny", action="store_true", help="200 entries in a temporary folder")
    args = ap.parse_args()
    text = Text()
    cache = args.work / "cache"
    if args.tiny:
        import tempfile

        args.entries, args.queries = 200, 3
        args.work = Path(tempfile.mkdtemp(prefix="readmodel-tiny-"))
        cache = Path(os.environ.get("MEMORY_AGENT_CACHE") or args.work / "cache")
        sentences = tiny_sentences(text, args.entries, cache)
    elif (args.work / "sentences.npy").is_file():
        sentences = np.load(args.work / "sentences.npy")
    else:
        ap.error(
            f"no {args.work / 'sentences.npy'}: run benchmarks/daemon_vectors.py --work "
            f"{args.work} first (or pass --tiny)"
        )
    report: dict = {"entries": args.entries, "load_start": os.getloadavg()[0]}
    tok = Tokenizer()
    t = time.perf_counter()
    sent_tf = [term_frequencies(tok(s)) for s in text.sentences]
    parts = [p for *_, p in entry_parts(text, args.entries)]
    report["tokenise_s"] = time.perf_counter() - t
    n = args.entries
    t = time.perf_counter()
    pad = np.full((n, 6), -1, dtype=np.int64)
    for i, p in enumerate(parts):
        pad[i, : len(p)] = p
    matrix = np.zeros((n, sentences.shape[1]), dtype=np.float32)
    for start in range(0, n, 20_000):
        idx = pad[start : start + 20_000]
        rows = sentences[np.clip(idx, 0, None)] * (idx >= 0)[..., None]
        matrix[start : start + len(idx)] = rows.sum(axis=1)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    slots, terms, tfs = [], [], []
    for i, p in enumerate(parts):
        tf: dict[int, float] = {}
        for s in p:
            for k, v in sent_tf[s].items():
                tf[k] = tf.get(k, 0.0) + v
        slots.append(np.full(len(tf), i, dtype=np.int32))
        terms.append(np.fromiter(tf.keys(), dtype=np.int64, count=len(tf)))
        tfs.append(np.fromiter(tf.values(), dtype=np.float32, count=len(tf)))
    slots_a, terms_a, tfs_a = np.concatenate(slots), np.concatenate(terms), np.concatenate(tfs)
    lengths = np.bincount(slots_a, weights=tfs_a, minlength=n).astype(np.float32)
    lexical = Base.of_entries(slots_a, terms_a, tfs_a)
    del slots, terms, tfs, slots_a, terms_a, tfs_a
    report["postings_entries"] = int(lexical.slots.size)
    report["postings_mb"] = sum(a.nbytes for a in lexical) / 2**20
    report["arrays_s"] = time.perf_counter() - t
    statuses = ["active"] * 9 + ["archived"]
    docs = [
        DocInfo(
            f"bench-{i:07d}",
            "",
            "kb",
            None,
            True,
            [],
            {"type": "note", "status": statuses[i % 10]},
            "",
            1,
        )
        for i in range(n)
    ]
    r0 = rss_mb()
    t = time.perf_counter()
    arrays = ModelArrays(
        384,
        True,
        docs,
        [f"{d.id}#0" for d in docs],
        np.arange(n, dtype=np.int32),
        np.zeros(n, dtype=np.int32),
        matrix,
        lengths,
        lexical,
        None,
        None,
        name_table([()] * n),
        name_table([()] * n),
    )
    model = ReadModel.from_arrays(arrays)
    report["from_arrays_s"] = time.perf_counter() - t
    report["rss_mb_model"] = rss_mb()
    report["rss_mb_model_growth"] = rss_mb() - r0

    from ragcore import make_embedder

    qtexts = text.queries  # SciFact's and LoCoMo's when ../shared is there
    qtexts = qtexts[:: max(1, len(qtexts) // args.queries)][: args.queries]
    embedder = make_embedder("minilm", runtime="onnx", work_dir=cache)
    qs = [embedder.embed_query(q).dense for q in qtexts]
    qtf = [term_frequencies(tok(q)) for q in qtexts]

    flt = Filter(statuses=("active",))
    report["mask_p50_ms"], _, masks = ms(lambda _: model.mask(flt), qs)
    mask = masks[0]
    report["lexical_p50_ms"], report["lexical_p95_ms"], _ = ms(
        lambda i: model.lexical_search(qtf[i], 100, mask), range(len(qs))
    )
    report["dense_exact_p50_ms"], report["dense_exact_p95_ms"], exact = ms(
        lambda q: model.dense_search(q, 100, mask), qs
    )
    t = time.perf_counter()
    graph = ann.open_graph(args.graph, {"entries": n}) if args.graph else None
    if graph is None:
        graph = ann.build_graph(matrix, threads=0)
        report["graph_build_s"] = time.perf_counter() - t
        if args.graph:
            ann.save_graph(graph, args.graph, {"entries": n})
    else:
        report["graph_open_s"] = time.perf_counter() - t
    model.attach_graph(graph)
    report["rss_mb_with_graph"] = rss_mb()
    report["dense_graph_p50_ms"], report["dense_graph_p95_ms"], found = ms(
        lambda q: model.dense_search(q, 100, mask), qs
    )
    report["recall10_vs_exact"] = float(
        np.mean(
            [
                len({c for c, _ in f[:10]} & {c for c, _ in e[:10]}) / 10
                for f, e in zip(found, exact, strict=True)
            ]
        )
    )
    report["recall100_vs_exact"] = float(
        np.mean(
            [
                len({c for c, _ in f} & {c for c, _ in e}) / 100
                for f, e in zip(found, exact, strict=True)
            ]
        )
    )
    report["load_end"] = os.getloadavg()[0]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in report.items()}))


if __name__ == "__main__":
    main()
