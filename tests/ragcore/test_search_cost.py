"""Per-search work that grew with the corpus (issue 30): a filter's mask is computed once per
published state and reused read-only (a change publishes a state with none); BM25's length
norms are computed once per state, and scores stay those of a fresh index after adds and
removes."""

import numpy as np
import pytest

import ragcore
from ragcore import Filter, Index
from ragcore.lexical import BM25Index
from tests.ragcore.hashed_corpus import Hashing, _corpus


def test_a_filter_mask_is_kept_per_state_and_a_change_starts_afresh(tmp_path):
    docs = _corpus()
    index = Index(tmp_path / "index", ragcore.CachedEmbedder(Hashing(), None))
    index.build(docs)
    flt = Filter(statuses=("active",))
    model = index.snapshot().model
    first = model.mask(flt)
    assert model.mask(Filter(statuses=("active",))) is first  # equal filters share it
    with pytest.raises(ValueError):
        first[0] = not first[0]  # read-only: no search can change another's mask
    archived = next(d for d in docs if d.meta.get("status") == "active")
    archived.meta["status"] = "archived"
    index.apply([archived])
    after = index.snapshot().model
    slots = after.slots_of(archived.id)
    assert not after.mask(flt)[slots].any()
    assert first is model.mask(flt)  # the old state keeps its own
    index.close()


def test_bm25_scores_after_adds_and_removes_are_those_of_a_fresh_index():
    rng = np.random.default_rng(4)
    vectors = {
        f"k{i}": {int(t): float(rng.integers(1, 4)) for t in rng.integers(0, 30, 8)}
        for i in range(200)
    }
    grown = BM25Index()
    for key, tf in list(vectors.items())[:150]:
        grown.add(key, tf)
    query = {3: 1.0, 7: 2.0, 11: 1.0}
    grown.search(query, 10)  # norms computed for this state
    for key, tf in list(vectors.items())[150:]:
        grown.add(key, tf)
    for key in list(vectors)[:40]:
        grown.remove(key)
    fresh = BM25Index()
    for key, tf in list(vectors.items())[40:]:
        fresh.add(key, tf)
    got, want = grown.search(query, 50), fresh.search(query, 50)
    assert [k for k, _ in got] == [k for k, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want], rtol=1e-5)
