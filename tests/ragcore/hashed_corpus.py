"""A deterministic 64-d embedder (token hashing) and a random corpus of documents with metadata, so
exact result sets can be checked cheaply."""

import random

import numpy as np

from ragcore import Document


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
