"""Score fusion variants offline from channel dumps (see channels.py), through the production
`ragcore.fusion.fuse`.

    python experiments/retrieval-baselines/fusion_sweep.py out/cmrc2018.json out/locomo.json out/scifact.json
"""

import json
import sys

import numpy as np

from ragcore.evaluate import metrics
from ragcore.fusion import FusionConfig, fuse
from ragcore.search import ChannelHit


def load(path):
    data = json.load(open(path))
    runs = {
        q: {
            name: {d: ChannelHit(r, s, d) for r, (d, s) in enumerate(lst, start=1)}
            for name, lst in row.items()
            if isinstance(lst, list)
        }
        for q, row in data["runs"].items()
    }
    for q, row in data["runs"].items():
        # a lexical list that holds every match has a natural floor of 0 (as in production)
        runs[q]["_floors"] = {"lexical": 0.0} if row.get("lexical_exhaustive") else {}
    return data["qrels"], runs


def single(name):
    def rank(channels):
        return {d: -h.rank for d, h in channels[name].items()}

    return rank


def production(config, depth=100):
    def rank(channels):
        trimmed = {
            n: {d: h for d, h in ch.items() if h.rank <= depth}
            for n, ch in channels.items()
            if n != "_floors"
        }
        return fuse(trimmed, config, channels["_floors"])[0]

    return rank


def zscore(alpha):
    """z-score normalisation instead of min-max (missing documents get the channel minimum)."""

    def rank(channels):
        out = {}
        for name, w in (("dense", alpha), ("lexical", 1 - alpha)):
            hits = channels[name]
            if not hits:
                continue
            a = np.array([h.score for h in hits.values()])
            z = (a - a.mean()) / (a.std() or 1.0)
            floor = z.min()
            for d, v in zip(hits, z, strict=True):
                out[d] = out.get(d, 0.0) + w * (v - floor)
        return out

    return rank


def evaluate(qrels, runs, fn):
    ranked = {
        q: [d for d, _ in sorted(fn(ch).items(), key=lambda kv: -kv[1])[:10]]
        for q, ch in runs.items()
    }
    return metrics(qrels, ranked)["ndcg@10"]


VARIANTS = {"lexical only": single("lexical"), "dense only": single("dense")}
VARIANTS["rrf k=60 equal"] = production(FusionConfig("rrf", {"dense": 1, "lexical": 1}))
for w in (0.3, 0.5):
    VARIANTS[f"rrf k=60 dense={w}"] = production(FusionConfig("rrf", {"dense": w, "lexical": 1}))
for a in (0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
    VARIANTS[f"score minmax dense={a}"] = production(
        FusionConfig("score", {"dense": a, "lexical": 1 - a})
    )
for a in (0.3, 0.4):
    VARIANTS[f"score z-score dense={a}"] = zscore(a)
for depth in (20, 50):
    VARIANTS[f"score minmax dense=0.3 depth={depth}"] = production(
        FusionConfig("score", {"dense": 0.3, "lexical": 0.7}), depth
    )


if __name__ == "__main__":
    data = {p.split("/")[-1].split(".")[0]: load(p) for p in sys.argv[1:]}
    names = list(data)
    print(f"| {'variant':36s} | " + " | ".join(f"{n:>9s}" for n in names) + " |")
    print("|" + "---|" * (len(names) + 1))
    for v, fn in VARIANTS.items():
        print(
            f"| {v:36s} | " + " | ".join(f"{evaluate(*data[n], fn):9.4f}" for n in names) + " |",
            flush=True,
        )
