"""The exact dense scan's int8 shortlist (`ragcore.int8_scan`, experiments/int8-scan): between
SCAN_FROM and SCAN_UP_TO slots the dense channel picks a shortlist by int8 scores (ONNX
Runtime's integer product) and rescores it in float32, and answers what the float32 scan of
every row answers - slots and scores - with filters, rows written after the int8 copy was made,
a copy rebuilt when they grow, an older snapshot that must not see newer slots, a crowd of
near duplicates, a broken (NaN) row, and an ONNX Runtime that fails."""

import zlib

import numpy as np
import pytest

import ragcore
from ragcore import Document, Index, dense, int8_scan
from ragcore.postings import top_arrays

pytest.importorskip("onnxruntime", reason="onnxruntime (a dependency) is not installed")

DIM = 384


def unit_rows(n: int, seed: int, centres: int = 50) -> np.ndarray:
    """Clustered unit rows, as sentence vectors are: many close calls inside a cluster."""
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, DIM)).astype(np.float32)
    rows = middle[rng.integers(0, centres, n)] + 0.7 * rng.standard_normal((n, DIM))
    rows = rows.astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def exact(rows: dense.DenseRows, vector, limit, allowed, hw):
    candidates = np.flatnonzero(allowed[:hw])
    return top_arrays(candidates, rows.take(candidates) @ vector, limit)


def same(got, want, rows: dense.DenseRows, vector) -> None:
    """`got` is an exact answer as `want` is: the same scores, best first, each the float32
    cosine of its own slot (equal scores may name different slots, in any order)."""
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(rows.take(got[0]) @ vector, got[1], rtol=0, atol=1e-5)
    assert len(set(got[0].tolist())) == got[0].size


def test_the_scan_is_on_where_onnx_runtime_is_installed():
    assert int8_scan.available()  # a session that cannot be built would hide every test here


def test_int8_scores_follow_the_float_cosines():
    rows = unit_rows(3000, 1)
    copy = int8_scan.Int8Rows([rows[:1000], rows[1000:]], DIM)
    for vector in unit_rows(20, 2):
        rough, truth = copy.scores(vector), rows @ vector
        assert rough.shape == (3000,)
        assert np.abs(rough - truth).max() < 0.006  # the offset and the scales taken out
        assert np.corrcoef(rough, truth)[0, 1] > 0.999


def test_the_shortlist_rescored_is_the_float_scans_answer_with_filters():
    rows = dense.DenseRows(DIM, unit_rows(9000, 3))
    for slot, vector in enumerate(unit_rows(1500, 4), start=9000):
        rows.put(slot, vector)  # a tail: rows written after the model was loaded
    hw = 10_500
    rng = np.random.default_rng(5)
    masks = [np.ones(hw, dtype=bool), rng.random(hw) < 0.6, rng.random(hw) < 0.3]
    for vector in unit_rows(30, 6):
        for allowed in masks:
            same(
                dense.search(rows, None, vector, 100, allowed, hw),
                exact(rows, vector, 100, allowed, hw),
                rows,
                vector,
            )
    assert rows._int8 is not None and rows._int8.n == hw  # the int8 path answered


def test_rows_written_after_the_copy_are_scored_in_float_until_the_copy_is_remade():
    rows = dense.DenseRows(DIM, unit_rows(9000, 7))
    everything = np.ones(20_000, dtype=bool)
    query = unit_rows(1, 8)[0]
    dense.search(rows, None, query, 10, everything[:9000], 9000)
    assert rows._int8.n == 9000
    rows.put(9000, query)  # the query itself, written after the copy
    slots, scores = dense.search(rows, None, query, 10, everything[:9001], 9001)
    assert slots[0] == 9000 and scores[0] == pytest.approx(1.0, abs=1e-5)
    assert rows._int8.n == 9000  # one new row: scored in float32, the copy kept
    for slot, vector in enumerate(unit_rows(int8_scan.SCAN_FROM + 1, 9), start=9001):
        rows.put(slot, vector)
    hw = 9001 + int8_scan.SCAN_FROM + 1
    same(
        dense.search(rows, None, query, 50, everything[:hw], hw),
        exact(rows, query, 50, everything, hw),
        rows,
        query,
    )
    assert rows._int8.n == hw  # grown past its threshold: remade over every row
    assert dense.search(rows, None, query, 1, everything[:hw], hw)[0].tolist() == [9000]


def test_an_older_snapshot_is_answered_from_its_own_slots_only():
    rows = dense.DenseRows(DIM, unit_rows(12_000, 10))
    everything = np.ones(12_000, dtype=bool)
    query = unit_rows(1, 11)[0]
    dense.search(rows, None, query, 10, everything, 12_000)  # the copy holds all 12,000
    slots, _ = dense.search(rows, None, query, 100, everything[:9000], 9000)
    assert slots.max() < 9000
    same((slots, _), exact(rows, query, 100, everything, 9000), rows, query)


def test_below_scan_from_the_float_scan_answers_and_no_copy_is_made():
    rows = dense.DenseRows(DIM, unit_rows(int8_scan.SCAN_FROM - 1, 12))
    hw = int8_scan.SCAN_FROM - 1
    query = unit_rows(1, 13)[0]
    allowed = np.ones(hw, dtype=bool)
    same(
        dense.search(rows, None, query, 20, allowed, hw),
        exact(rows, query, 20, allowed, hw),
        rows,
        query,
    )
    assert rows._int8 is None


class Clustered:
    """A deterministic 32-d embedder: 40 cluster centres, each text a centre plus noise."""

    model_id, dim, has_sparse = "clustered-32", 32, False

    def __init__(self):
        self.centres = np.random.default_rng(1).standard_normal((40, 32)).astype(np.float32)

    def _vec(self, text):
        seed = zlib.crc32(text.encode())
        v = self.centres[seed % 40] + 0.6 * np.random.default_rng(seed).standard_normal(32)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def embed_documents(self, texts):
        return [ragcore.Embedding(self._vec(t)) for t in texts]

    def embed_query(self, text):
        return self.embed_documents([f"query {text}"])[0]


def test_an_index_between_the_sizes_answers_as_the_float_scan_and_finds_a_new_entry(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(int8_scan, "SCAN_FROM", 500)
    embedder = Clustered()
    index = Index(tmp_path / "index", ragcore.CachedEmbedder(embedder, None))
    index.build(
        [
            Document(id=f"d{i:05d}", title="", body=f"text {i}", meta={"status": "active"})
            for i in range(1500)
        ]
    )
    snap = index.snapshot()
    rows, hw = snap.model._rows, snap.model.hw
    for text in ("alpha", "beta", "gamma", "delta"):
        vector = embedder.embed_query(text).dense
        got = [(c, round(s, 5)) for c, s in snap.channels(None).dense(vector, 20)]
        slots, scores = exact(rows, vector, 20, snap.model._alive, hw)
        want = [
            (snap.model.chunk_of(int(s)), round(float(v), 5))
            for s, v in zip(slots, scores, strict=True)
        ]
        assert got == want
    assert rows._int8 is not None  # the int8 shortlist answered
    new = Document(id="d-new", title="", body="query alpha", meta={"status": "active"})
    index.apply([new])  # its vector is the query's: it must come first
    snap = index.snapshot()
    top = snap.channels(None).dense(embedder.embed_query("alpha").dense, 1)
    assert snap.doc_of(top[0][0]) == "d-new"
    assert snap.model._rows._int8 is not None
    snap.model.clone().attach_graph(object())  # a graph answers from now: the copy is let go
    assert snap.model._rows._int8 is None
    index.close()


def test_a_crowd_of_near_duplicates_keeps_the_exact_top():
    """3,000 rows within int8's error of each other (cosine ~0.9996): the shortlist takes
    every one within the margin, so a row's own copy (score 1.0) stays first."""
    rng = np.random.default_rng(14)
    centre = unit_rows(1, 15)[0]
    crowd = centre + rng.standard_normal((3000, DIM)).astype(np.float32) * (0.028 / DIM**0.5)
    crowd /= np.linalg.norm(crowd, axis=1, keepdims=True)
    rows = dense.DenseRows(DIM, np.concatenate([unit_rows(9000, 16), crowd]).astype(np.float32))
    hw = rows.n0
    allowed = np.ones(hw, dtype=bool)
    for own in range(9000, 12_000, 150):
        query = rows.row(own)
        got = dense.search(rows, None, query, 10, allowed, hw)
        assert got[0][0] == own
        same(got, exact(rows, query, 10, allowed, hw), rows, query)


def test_a_broken_row_does_not_spoil_the_others():
    base = unit_rows(10_000, 17)
    base[1234] = np.nan  # a vector that went wrong, filtered out as a deleted slot would be
    rows = dense.DenseRows(DIM, base)
    allowed = np.ones(10_000, dtype=bool)
    allowed[1234] = False
    for vector in unit_rows(10, 18):
        same(
            dense.search(rows, None, vector, 10, allowed, 10_000),
            exact(rows, vector, 10, allowed, 10_000),
            rows,
            vector,
        )
    assert np.isfinite(rows._int8.scale).all() and rows._int8.scale.max() < 0.1


def test_an_onnx_runtime_that_cannot_build_the_scan_leaves_the_float_scan(monkeypatch, caplog):
    def broken(*_):
        raise RuntimeError("no kernel for MatMulInteger")

    monkeypatch.setattr(int8_scan, "_session", None)
    monkeypatch.setattr(int8_scan, "_session_of", broken)
    rows = dense.DenseRows(DIM, unit_rows(9000, 19))
    allowed = np.ones(9000, dtype=bool)
    query = unit_rows(1, 20)[0]
    same(
        dense.search(rows, None, query, 20, allowed, 9000),
        exact(rows, query, 20, allowed, 9000),
        rows,
        query,
    )
    assert not int8_scan.available() and rows._int8 is None
    assert "MatMulInteger" in caplog.text


def test_an_onnx_runtime_that_fails_at_a_search_leaves_the_float_scan(monkeypatch, caplog):
    class Failing:
        def run(self, *_):
            raise RuntimeError("bad allocation")

    monkeypatch.setattr(int8_scan, "_session", Failing())
    rows = dense.DenseRows(DIM, unit_rows(9000, 21))
    allowed = np.ones(9000, dtype=bool)
    for vector in unit_rows(3, 22):  # the first fails over; the next go straight to float32
        same(
            dense.search(rows, None, vector, 20, allowed, 9000),
            exact(rows, vector, 20, allowed, 9000),
            rows,
            vector,
        )
    assert int8_scan._session is False and caplog.text.count("bad allocation") == 1


def test_a_filter_allowing_many_slots_of_a_larger_index_is_scanned_in_int8():
    """Under a quarter of the slots but over TAKE_BELOW of them: gathering their float32
    rows costs more than the int8 scan of all (experiments/int8-scan); fewer: gathered."""
    rows = dense.DenseRows(DIM, unit_rows(40_000, 23))
    rng = np.random.default_rng(24)
    few = rng.random(40_000) < 0.02  # ~800 slots
    query = unit_rows(1, 25)[0]
    same(
        dense.search(rows, None, query, 50, few, 40_000),
        exact(rows, query, 50, few, 40_000),
        rows,
        query,
    )
    assert rows._int8 is None  # gathered: no copy made
    many = rng.random(40_000) < 0.2  # ~8,000 slots
    same(
        dense.search(rows, None, query, 50, many, 40_000),
        exact(rows, query, 50, many, 40_000),
        rows,
        query,
    )
    assert rows._int8 is not None


def test_a_limit_above_the_widest_shortlist_is_answered_in_full():
    rows = dense.DenseRows(DIM, unit_rows(12_000, 26))
    allowed = np.ones(12_000, dtype=bool)
    query = unit_rows(1, 27)[0]
    limit = int8_scan.MOST + 500
    got = dense.search(rows, None, query, limit, allowed, 12_000)
    assert got[0].size == limit
    same(got, exact(rows, query, limit, allowed, 12_000), rows, query)
