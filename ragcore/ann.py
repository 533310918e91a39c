"""Approximate dense search for large read models: an HNSW graph of int8 vectors (usearch),
whose candidates are rescored exactly with the float32 vectors.

    index/gen-000007/dense.usearch        the graph over the saved arrays' slots 0..n-1
    index/gen-000007/dense.usearch.json   what it was built from (the arrays' uid and seq, n)

The engine is usearch (chosen in experiments/ann: recall@10 after rescoring, latency, mmap,
add and delete, wheels for Linux, macOS and Windows). A graph is built once per saved read
model and never changed afterwards: readers share it without a lock on its contents, and a
snapshot stays whole-or-nothing because each read model says which of its slots the graph
covers (`DenseGraph.cover`) and scans the slots added since exactly; deleted slots stay in the
graph and are masked by the model's own live flags, like any filter.

`plan(...)` is the one decision of a dense search: below `EXACT_BELOW` live rows, or when a
filter leaves at most `FILTER_EXACT_BELOW` allowed rows, the exact scan is faster than the
graph and is used; otherwise the graph is searched for `fetch` candidates (more when a filter
removes many), the allowed ones and the uncovered tail are rescored exactly, and the best
`limit` returned.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

__all__ = [
    "EXACT_BELOW",
    "FILTER_EXACT_BELOW",
    "Builds",
    "DenseGraph",
    "available",
    "build_graph",
    "expansion_for",
    "open_graph",
]

log = logging.getLogger("ragcore.ann")

EXACT_BELOW = 50_000  # rows: the exact scan (~6 ms at 50k, one thread) is used below this
FILTER_EXACT_BELOW = 30_000  # allowed rows a filter leaves: scanned exactly at or below this
CONNECTIVITY = 32  # 16 reached recall@10 0.95-0.96 on clustered entries (experiments/ann)
EXPANSION_ADD = 128
EXPANSION_SEARCH = 512
# A wider search as the graph grows: at 1M rows, 512 kept 0.93 of the exact top 100 and the
# daemon's answers 0.87 of the exact top 10; 2048 keeps 0.98 of the top 100 at ~26 ms
# (experiments/ann/search_1m.py; tuned on the benchmark's vectors, checked on held-out queries).
WIDER = ((500_000, 2048), (200_000, 1024))  # (rows from, expansion_search)


def expansion_for(rows: int) -> int:
    """The graph's search width (`expansion_search`) for a graph of `rows` points."""
    return next((ef for start, ef in WIDER if rows >= start), EXPANSION_SEARCH)


OVERFETCH = 2  # graph candidates per result asked, before a filter's share
FILE = "dense.usearch"


def _usearch():
    """usearch's Index class. ONNX Runtime is imported first when it is installed: loading
    usearch's extension before it makes ONNX Runtime's import crash the process (a segfault,
    usearch 2.26 with onnxruntime 1.32 on Linux; the other order is fine)."""
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


def available() -> bool:
    try:
        _usearch()
    except ImportError:
        return False
    return True


class DenseGraph:
    """An immutable HNSW graph whose keys are read-model slots 0..cover-1 (as they were when
    it was built; `remap` follows a vacuum). Thread-safe: searches take a lock of their own
    (usearch's Python search shares one search context per index)."""

    def __init__(self, index, cover: int, key_slot: np.ndarray | None = None):
        self._index = index
        self.cover = cover  # the graph holds the model's slots below this (as renumbered)
        self._key_slot = key_slot  # graph key -> current slot (-1: gone); None: identity
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._index.size

    def remap(self, mapping: np.ndarray, new_cover: int) -> DenseGraph:
        """The same graph after the model renumbered its slots (`mapping[old] = new`, -1 for a
        dropped slot): shares the graph, not a copy."""
        keys = np.arange(self._index.size) if self._key_slot is None else self._key_slot
        moved = np.where(keys >= 0, mapping[np.clip(keys, 0, None)], -1)
        graph = DenseGraph(self._index, new_cover, moved)
        graph._lock = self._lock
        return graph

    def candidates(self, vector: np.ndarray, count: int) -> np.ndarray:
        """The slots of about `count` nearest graph points (-1 never returned)."""
        count = min(count, self._index.size)
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        with self._lock:
            found = self._index.search(vector, count, threads=1)
        keys = np.asarray(found.keys, dtype=np.int64)
        if self._key_slot is None:
            return keys
        slots = self._key_slot[keys]
        return slots[slots >= 0]


def build_graph(matrix: np.ndarray, threads: int = 0) -> DenseGraph:
    """An int8 HNSW graph over the rows of `matrix` (keys 0..n-1)."""
    Index = _usearch()  # noqa: N806 - the engine's class
    index = Index(
        ndim=matrix.shape[1],
        metric="cos",
        dtype="i8",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=expansion_for(matrix.shape[0]),
    )
    n = matrix.shape[0]
    step = 65_536  # in parts: the float32 rows of a mapped matrix are read a part at a time
    for start in range(0, n, step):
        part = np.ascontiguousarray(matrix[start : start + step], dtype=np.float32)
        index.add(np.arange(start, start + len(part), dtype=np.uint64), part, threads=threads)
    return DenseGraph(index, n)


def save_graph(graph: DenseGraph, path: Path, meta: dict) -> None:
    """Write the graph and its meta beside it (each replaced whole)."""
    own = f"{os.getpid()}.{threading.get_ident()}"  # two builds of one generation may save at once
    tmp = path.with_name(f".{path.name}.{own}.tmp")
    graph._index.save(str(tmp))
    os.replace(tmp, path)
    side = path.with_name(path.name + ".json")
    tmp = side.with_name(f".{side.name}.{own}.tmp")
    tmp.write_text(json.dumps({**meta, "count": len(graph)}))
    os.replace(tmp, side)


def open_graph(path: Path, meta: dict) -> DenseGraph | None:
    """The graph saved at `path` if it was built from exactly `meta` (memory-mapped), else
    None (missing, stale or unreadable: the caller builds it again)."""
    if not available():
        return None
    Index = _usearch()  # noqa: N806 - the engine's class
    try:
        saved = json.loads(path.with_name(path.name + ".json").read_text())
        if any(saved.get(k) != v for k, v in meta.items()):
            return None
        index = Index.restore(str(path), view=True)
    except (OSError, ValueError, RuntimeError):
        return None
    if index is None or index.size != saved.get("count"):
        return None
    index.expansion_search = expansion_for(index.size)
    return DenseGraph(index, int(saved["count"]))


def fetch_for(limit: int, allowed_share: float) -> int:
    """Graph candidates to ask for `limit` results when `allowed_share` of the rows pass."""
    return int(limit * OVERFETCH / max(allowed_share, 0.02)) + 16


def wanted(model) -> bool:
    """A graph would serve this read model and it has none (nor can it be stale)."""
    return model.with_dense and model.graph is None and model.hw >= EXACT_BELOW and available()


class Builds:
    """The dense graphs being built in the background for one index, by the rows each is
    built over. Another generation may be opened or switched to while one builds: only the
    build over the live model's rows counts (`Index.dense_state`), and a build counts until
    its `publish` has returned (attached or not)."""

    def __init__(self) -> None:
        self._rows: tuple[np.ndarray, ...] = ()  # replaced whole: read without the lock
        self._lock = threading.Lock()

    def start(self, model, path: Path, publish) -> None:
        """`build_in_background(model, path, publish)`, counted from now."""
        rows = model.base_rows
        with self._lock:
            self._rows = (*self._rows, rows)

        def done(base, graph) -> None:
            try:
                publish(base, graph)
            finally:
                self._drop(base)

        try:
            build_in_background(model, path, done)
        except BaseException:
            self._drop(rows)
            raise

    def _drop(self, rows) -> None:
        with self._lock:
            self._rows = tuple(r for r in self._rows if r is not rows)

    def running(self) -> tuple[np.ndarray, ...]:
        """The rows of the builds in flight."""
        return self._rows


def build_in_background(model, path: Path, publish) -> threading.Thread:
    """Build a graph over `model`'s base rows on a thread ("dense-graph"), save it at `path`
    when the base is the saved arrays (`model.arrays_key`), then `publish(base, graph)`: the
    index attaches it to its live model if that model still has these base rows. A build that
    fails is logged and published as None (the search stays exact)."""
    base, key = model.base_rows, model.arrays_key

    def run() -> None:
        graph = None
        try:
            graph = build_graph(base, threads=0)
        except Exception:  # noqa: BLE001 - search stays exact; the next open tries again
            log.exception("the dense graph could not be built; dense search stays exact")
        else:
            if key is not None:
                try:
                    save_graph(graph, path, key)
                except Exception:  # noqa: BLE001 - served from memory; the next open builds it
                    log.warning("the dense graph could not be saved at %s", path, exc_info=True)
        finally:
            publish(base, graph)  # always: the index counts this build done

    thread = threading.Thread(target=run, name="dense-graph", daemon=True)
    thread.start()
    return thread
