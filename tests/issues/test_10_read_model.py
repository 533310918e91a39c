"""Issue 10: a read path that stays fast as the memory grows - no per-query rescans, filtered
dense search that never loops over points in Python, one public surface of ragcore."""

import ast
import itertools
import random
from pathlib import Path

import numpy as np
import pytest

import ragcore
from memory_agent.recall import reads
from ragcore import Document, Filter, Index, SearchConfig, search
from ragcore.lexical import SparseIndex
from ragcore.store import QdrantStore, qdrant_filter
from tests.memory_agent.helpers import make_memory

ROOT = Path(__file__).resolve().parents[2]


# -- no per-document work on a search when nothing changed -----------------------------------
def _entry(kb, n, text):
    path = kb / "note" / f"bulk-{n:04d}.md"
    path.write_text(
        f"---\nid: bulk-{n:04d}\ntitle: Bulk note {n}\ntype: note\nstatus: active\n"
        f"created: 2026-11-01T00:00:00Z\n---\n{text}\n"
    )
    return path


def test_a_search_with_nothing_changed_reads_and_hashes_nothing(
    env_home, minilm_model, monkeypatch
):
    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(embedder="minilm")
    (memory.kb_dir / "note").mkdir(exist_ok=True)
    for n in range(300):
        _entry(memory.kb_dir, n, f"Routine maintenance note number {n} about the build cache.")
    assert memory.start_watching()  # as the daemon does
    memory.require_home()
    reads.search(memory, "build cache maintenance")  # a full scan picks the 300 files up once
    hashes = itertools.count()
    original_hash = Document.content_hash
    monkeypatch.setattr(
        Document, "content_hash", property(lambda d: (next(hashes), original_hash.fget(d))[1])
    )
    stats = itertools.count()
    original_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda p, **kw: (next(stats), original_stat(p, **kw))[1])
    files_read = memory.scanner.reads
    for _ in range(5):
        reads.search(memory, "build cache maintenance")
    assert memory.scanner.reads == files_read  # no file read
    assert next(hashes) == 0  # no document hashed
    assert next(stats) <= 5 * 6  # a handful per search (repos.json, the index pointer), not 300
    # an editor's change is in the very next search
    path = memory.kb_dir / "note" / "bulk-0123.md"
    path.write_text(path.read_text().replace("build cache", "flux capacitor"))
    hits = reads.search(memory, "flux capacitor", limit=3)["hits"]
    assert hits[0]["id"] == "bulk-0123" and "flux capacitor" in hits[0]["snippet"]
    assert memory.scanner.reads == files_read + 1  # exactly that file
    path.unlink()
    assert "bulk-0123" not in {h["id"] for h in reads.search(memory, "flux capacitor")["hits"]}
    memory.close()


def test_without_a_change_signal_the_resident_memory_rescans_at_most_once_a_second(
    env_home, minilm_model, monkeypatch
):
    from memory_agent.index import memory as memory_mod

    memory = make_memory(env_home, minilm_model, resident=True)
    memory.init(demo=True, embedder="minilm")
    memory.require_home()
    reads.search(memory, "lock dependencies")
    full = memory.scanner.last_full
    # within the window no scan (the window made long: a slow first search on a loaded machine
    # must not make the second one fall due)
    monkeypatch.setattr(memory_mod, "RESCAN_EVERY_S", 3600.0)
    reads.search(memory, "lock dependencies")
    assert memory.scanner.last_full == full
    monkeypatch.setattr(memory_mod, "RESCAN_EVERY_S", 0.0)
    reads.search(memory, "lock dependencies")
    assert memory.scanner.last_full > full
    memory.close()


# -- filtered dense search returns exactly what the filter allows ----------------------------
class Hashing:
    """A deterministic 64-d embedder (token hashing), so exact sets can be checked cheaply."""

    model_id, dim, has_sparse = "hashing-64", 64, False

    def _vec(self, text):
        v = np.zeros(self.dim, dtype=np.float32)
        for token in text.lower().split():
            v[hash(token) % self.dim] += 1.0
        v[0] += 0.01
        return v / np.linalg.norm(v)

    def embed_documents(self, texts):
        from ragcore import Embedding

        return [Embedding(self._vec(t)) for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def _corpus(n=240, seed=3):
    rng = random.Random(seed)
    words = "alpha beta gamma delta omega sigma kappa theta lambda zeta".split()
    docs = []
    for i in range(n):
        meta = {
            "status": rng.choice(["active"] * 4 + ["archived", "superseded"]),
            "type": rng.choice(["note", "fact", "decision", "pitfall"]),
            "tags": rng.sample(["ci", "db", "api", "ops", "ui"], rng.randint(0, 2)),
        }
        scope = rng.choice([None, None, "global", "alpha", "github.com/acme/beta"])
        if scope:  # a project's documents; without a scope, global
            meta["scope"] = scope
        body = " ".join(rng.choice(words) for _ in range(12))
        docs.append(
            Document(f"d{i:03d}", f"Doc {i}", body, meta, rng.choice(["kb", "repo", "wiki"]))
        )
    return docs


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


# -- one public surface -----------------------------------------------------------------------
# The one reach into another package's insides, on purpose (ADR 0005, addendum): the
# single-exchange path runs the MCP SDK's kernel with the SDK's own server and lifespan state,
# which the SDK does not expose; tests/memory_agent/test_single_exchange.py compares its replies
# with the SDK's byte for byte, so an SDK that changes them fails there. Nothing else.
SDK_REACHES = {
    ("single_exchange.py", "_lowlevel_server"),
    ("single_exchange.py", "_lifespan_state"),
}


def test_the_pack_and_the_web_app_use_only_ragcores_public_names():
    public = set(ragcore.__all__)
    offenders = []
    for folder in ("memory_agent", "legal_web"):
        for path in sorted((ROOT / folder).rglob("*.py")):  # subpackages too
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    if node.module.startswith("ragcore."):
                        offenders.append(f"{path.name}: from {node.module} import ...")
                    elif node.module == "ragcore":
                        offenders += [
                            f"{path.name}: {a.name}" for a in node.names if a.name not in public
                        ]
                elif isinstance(node, ast.Import):
                    offenders += [
                        f"{path.name}: import {a.name}"
                        for a in node.names
                        if a.name.startswith("ragcore.")
                    ]
                elif (
                    isinstance(node, ast.Attribute)
                    and node.attr.startswith("_")
                    and (path.name, node.attr) not in SDK_REACHES
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and not (
                        isinstance(node.value, ast.Call)
                        and getattr(node.value.func, "id", "") == "super"
                    )
                ):
                    offenders.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert offenders == []


def test_the_index_has_no_public_insides():
    index_attrs = {n for n in vars(Index) if not n.startswith("_")}
    assert not index_attrs & {"payloads", "bm25", "sparse", "store", "manifest", "lock"}
