"""A channel's hits kept as arrays (`ragcore.hits.SlotHits`): each document's best chunk is
chosen over them exactly as the loop over (chunk id, score) pairs chose it - ties included -
on made-up hits and on a real index whose slots a history of adds and removes has shuffled."""

import random

import numpy as np

import ragcore
from ragcore import Document, Filter, Index
from ragcore.hits import SlotHits
from ragcore.search import _per_document
from ragcore.tokenizer import term_frequencies
from tests.ragcore.hashed_corpus import Hashing


class _ByChunk:
    """What the pairs' loop asks of an index: the document of a chunk id."""

    def __init__(self, doc_of_chunk):
        self.doc_of = doc_of_chunk.get


def test_the_best_chunk_of_each_document_is_the_one_the_pairs_loop_keeps():
    rng = random.Random(7)
    for _ in range(300):
        n_slots, n_docs = rng.randint(1, 60), rng.randint(1, 12)
        slot_doc = np.array([rng.randrange(n_docs) for _ in range(n_slots)], dtype=np.int32)
        row_doc = [f"doc{r}" for r in range(n_docs)]
        slot_chunk = [f"{row_doc[r]}#{s}" for s, r in enumerate(slot_doc.tolist())]
        slots = np.array(rng.sample(range(n_slots), rng.randint(0, n_slots)), dtype=np.int64)
        # few distinct scores, not sorted: ties within a document and across documents
        scores = np.array([rng.choice([0.5, 0.25, 0.125, 1.0]) for _ in slots], dtype=np.float32)
        hits = SlotHits(slots, scores, slot_chunk, slot_doc, row_doc)
        pairs = list(hits)
        assert pairs == [(slot_chunk[s], float(v)) for s, v in zip(slots, scores, strict=True)]
        index = _ByChunk({c: row_doc[slot_doc[s]] for s, c in enumerate(slot_chunk)})
        assert _per_document(index, hits) == _per_document(index, pairs)


def _documents(n, rng):
    words = "alpha beta gamma delta omega sigma kappa theta lambda zeta".split()
    docs = []
    for i in range(n):
        sections = [
            f"## Part {k}\n\n" + " ".join(rng.choice(words) for _ in range(rng.randint(8, 60)))
            for k in range(rng.randint(1, 4))
        ]
        meta = {"status": rng.choice(["active", "active", "archived"]), "type": "note"}
        docs.append(Document(f"d{i:03d}", f"Doc {i}", "\n\n".join(sections), meta, "kb"))
    return docs


def test_a_real_index_after_adds_and_removes_ranks_documents_as_the_pairs_did(tmp_path):
    rng = random.Random(11)
    docs = _documents(160, rng)
    index = Index(tmp_path / "index", ragcore.CachedEmbedder(Hashing(), None), max_chars=120)
    index.build(docs[:100])
    index.apply(docs[100:])  # slots beyond the base, then documents gone and rewritten
    index.apply(deletes=[d.id for d in docs[:160:7]])
    rewritten = [Document(d.id, d.title, d.body + " omega", d.meta, d.source) for d in docs[3:90:9]]
    index.apply(rewritten)
    snap = index.snapshot()
    assert snap.model.hw > len(snap.model.docs)  # documents of several chunks each
    gone = {d.id for d in docs[:160:7]} - {d.id for d in rewritten}
    for flt in (None, Filter(statuses=("active",))):
        view = snap.channels(flt)
        for _ in range(40):
            query = " ".join(rng.sample("alpha beta gamma delta omega sigma".split(), 3))
            lexical = view.lexical(term_frequencies(snap.tokenizer(query)), 100)
            dense = view.dense(index.embedder.embed_query(query).dense, 100, lexical)
            for hits in (lexical, dense):
                assert isinstance(hits, SlotHits) and len(hits) > 0
                got = _per_document(snap, hits)
                assert got == _per_document(snap, list(hits))
                assert not gone & set(got)
