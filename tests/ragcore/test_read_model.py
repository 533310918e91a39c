"""A generation's read model: filtered dense search returns exactly what the filter allows (in
memory and on Qdrant's server path, the filter pushed down - the KB filter of the team KBs too),
updates, deletes and a vacuum give the answers of a fresh build, and the sparse channel on its
inverted index scores like a dot product. (Issues 10 and 21.)"""

import random

import numpy as np
import pytest

import ragcore
from ragcore import Document, Filter, Index, SearchConfig, search
from ragcore.lexical import SparseIndex
from ragcore.store import QdrantStore, qdrant_filter
from tests.ragcore.hashed_corpus import Hashing, _corpus

FILTERS = [
    Filter(statuses=("active",)),
    Filter(statuses=("active",), types=("fact", "pitfall")),
    Filter(statuses=("active", "archived"), sources=("kb",)),
    Filter(tags=("ci",)),
    Filter(statuses=("active",), tags=("db", "ops"), sources=("repo", "wiki")),
    Filter(doc_ids=("d001", "d017", "d100", "d239")),
    Filter(doc_ids=()),
    Filter(exclude_ids=frozenset({"d001", "d017", "d100"})),  # a session's own episodes
    Filter(statuses=("active",), exclude_ids=frozenset({"d002", "d239", "nope"})),
    Filter(scopes=("global", "alpha")),  # a project and the global ones (unscoped included)
    Filter(statuses=("active",), scopes=("github.com/acme/beta",)),
    Filter(scopes=("nobody",)),
]


@pytest.mark.parametrize("server", [False, True], ids=["in-memory", "qdrant-server-path"])
def test_filtered_search_returns_exactly_what_the_filter_allows(tmp_path, server):
    if server:
        pytest.importorskip("qdrant_client", reason="the server path needs the qdrant extra")
    docs = _corpus()
    index = Index(
        tmp_path / "index",
        ragcore.CachedEmbedder(Hashing(), None),
        qdrant_location=str(tmp_path / "qdrant") if server else None,
    )
    index.build(docs)
    snap = index.snapshot()
    for flt in FILTERS:
        expected = {
            d.id for d in docs if flt.matches({**d.meta, "doc_id": d.id, "source": d.source})
        }
        query = index.embedder.embed_query("alpha omega").dense
        dense = {snap.doc_of(c) for c, _ in snap.channels(flt).dense(query, 500)}
        assert dense == expected, flt
        found = {h.doc_id for h in search(index, "alpha omega beta", limit=500, flt=flt).hits}
        assert found <= expected, flt
    index.close()


def test_the_server_path_pushes_the_filter_down(tmp_path):
    pytest.importorskip("qdrant_client", reason="the server path needs the qdrant extra")
    flt = Filter(statuses=("active",), types=("fact",), tags=("ci", "db"), sources=("kb",))
    built = qdrant_filter(flt)
    conditions = {c.key: c.match.any for c in built.must}
    assert conditions == {
        "status": ["active"],
        "type": ["fact"],
        "tags": ["ci", "db"],
        "source": ["kb"],
    }
    assert qdrant_filter(Filter()) is None
    store = QdrantStore(location=":memory:", collection="t")
    store.create(4)
    store.upsert(
        [
            ("a#0", np.ones(4), {"doc_id": "a", "status": "active", "tags": ["ci"]}),
            ("b#0", np.ones(4), {"doc_id": "b", "status": "archived", "tags": ["db"]}),
            ("c#0", np.ones(4), {"doc_id": "c", "status": "active", "scope": "alpha"}),
            ("d#0", np.ones(4), {"doc_id": "d", "status": "active", "scope": "beta"}),
        ]
    )
    hits = store.search(np.ones(4), 10, Filter(statuses=("active",), tags=("ci", "ui")))
    assert [c for c, _ in hits] == ["a#0"]
    # a point written before scopes has none: it is global
    scoped = store.search(np.ones(4), 10, Filter(scopes=("global", "alpha")))
    assert sorted(c for c, _ in scoped) == ["a#0", "b#0", "c#0"]
    assert [c for c, _ in store.search(np.ones(4), 10, Filter(scopes=("beta",)))] == ["d#0"]
    assert store.search(np.ones(4), 10, Filter(doc_ids=())) == []
    store.close()


def test_updates_deletes_and_a_vacuum_give_the_same_answers_as_a_fresh_build(tmp_path):
    docs = _corpus(1200, seed=5)
    emb = ragcore.CachedEmbedder(Hashing(), None)
    churned = Index(tmp_path / "churned", emb)
    churned.build(docs)
    rng = random.Random(9)
    current = {d.id: d for d in docs}
    for _ in range(3):  # rewrite most documents three times: the slots are vacuumed
        changed = [
            Document(
                d.id,
                d.title,
                d.body + " " + rng.choice(["omega", "sigma", "zeta"]),
                d.meta,
                d.source,
            )
            for d in rng.sample(list(current.values()), 600)
        ]
        gone = rng.sample(sorted(current), 20)
        churned.apply([c for c in changed if c.id not in gone], gone)
        current.update({c.id: c for c in changed})
        for g in gone:
            current.pop(g, None)
    fresh = Index(tmp_path / "fresh", emb)
    fresh.build(list(current.values()))
    for query, flt in [("omega sigma", None), ("alpha zeta", Filter(statuses=("active",)))]:
        every = SearchConfig(candidates=5000)  # every document in every channel: exact sets
        a = search(churned, query, limit=2000, flt=flt, config=every)
        b = search(fresh, query, limit=2000, flt=flt, config=every)
        key = lambda h: (-round(h.score, 5), h.doc_id)  # noqa: E731 - ties in any order
        assert [(h.doc_id, round(h.score, 5)) for h in sorted(a.hits, key=key)] == [
            (h.doc_id, round(h.score, 5)) for h in sorted(b.hits, key=key)
        ]
    assert churned.check().consistent and len(churned) == len(current)


def test_the_sparse_channel_on_its_inverted_index_scores_like_a_dot_product():
    rng = np.random.default_rng(1)
    index, vectors = SparseIndex(), {}
    for slot in range(500):
        terms = rng.choice(2000, size=rng.integers(1, 30), replace=False)
        vectors[slot] = {
            int(t): float(w) for t, w in zip(terms, rng.random(terms.size), strict=True)
        }
        index.add(slot, vectors[slot])
    for slot in range(0, 500, 7):
        index.remove(slot)
        vectors.pop(slot)
    query = {int(t): 1.0 + float(t % 3) for t in rng.choice(2000, 40, replace=False)}
    expected = sorted(
        ((s, sum(w * v.get(t, 0.0) for t, w in query.items())) for s, v in vectors.items()),
        key=lambda x: -x[1],
    )
    expected = [(s, sc) for s, sc in expected if sc > 0][:25]
    got = index.search_slots(query, 25)
    assert [s for s, _ in got] == [s for s, _ in expected]
    assert np.allclose([sc for _, sc in got], [sc for _, sc in expected], rtol=1e-5)


@pytest.mark.parametrize("server", [False, True], ids=["in-memory", "qdrant-server-path"])
def test_the_kb_filter_is_pushed_down_to_qdrant(tmp_path, server):
    """One collection, every KB a tenant in the `source` payload field (kb, kb:<name>), the KB
    filter pushed down: the index on qdrant-client's in-process engine (the server path's
    code; no server runs here) answers exactly what the in-memory store answers."""
    import dataclasses

    import ragcore
    from ragcore import Filter, Index
    from ragcore.store import FILTER_FIELDS, qdrant_filter
    from tests.ragcore.hashed_corpus import Hashing, _corpus

    if server:
        pytest.importorskip("qdrant_client", reason="the server path needs the qdrant extra")
    tenants = {"wiki": "kb:team", "repo": "kb:ops"}
    docs = [dataclasses.replace(d, source=tenants.get(d.source, d.source)) for d in _corpus()]
    index = Index(
        tmp_path / "index",
        ragcore.CachedEmbedder(Hashing(), None),
        qdrant_location=str(tmp_path / "qdrant") if server else None,
    )
    index.build(docs)
    snap = index.snapshot()
    query = index.embedder.embed_query("alpha omega").dense
    for flt in (
        Filter(sources=("kb:team",)),
        Filter(sources=("kb", "kb:team"), statuses=("active",)),
        Filter(sources=("kb:ops",), scopes=("global", "alpha")),
    ):
        expected = {
            d.id for d in docs if flt.matches({**d.meta, "doc_id": d.id, "source": d.source})
        }
        assert expected, flt
        assert {snap.doc_of(c) for c, _ in snap.channels(flt).dense(query, 500)} == expected, flt
    index.close()
    assert "source" in FILTER_FIELDS  # a keyword payload index on a server
    pushed = qdrant_filter(Filter(sources=("kb:team",))) if server else None
    if pushed is not None:
        assert [(c.key, c.match.any) for c in pushed.must] == [("source", ["kb:team"])]
