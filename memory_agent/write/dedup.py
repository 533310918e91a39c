"""Whether a new entry is already in the knowledge base: an active KB entry with the same
normalised text (`match: exact`), or one whose similarity is at or above the embedder's
threshold (`match: near`, `dedup_threshold`, calibrated in experiments/dedup-threshold).

Scopes: an entry written into a project is compared with that project's entries and the global
ones; a global entry with every entry (a lesson a project already holds is not copied to global
by hand - the gate promotes one that recurs). `scopes_seen` says which.

Every KB of the home is looked in (`kb.kbs`): adding to the personal KB what the team KB
already says answers `duplicate` with `team:<id>`.

The similarity is the cosine of the new text's first chunk's dense vector against every stored
chunk of the active KB entries: `nearest`, which the calibration uses too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_agent.kb.entries import content_key
from ragcore import Document, Filter

if TYPE_CHECKING:
    from memory_agent.index.memory import Memory

__all__ = ["DEDUP_THRESHOLDS", "dedup_threshold", "find_duplicate", "nearest"]

# -- when a new entry is already known
# Cosine similarity at or above which a new entry is a near-duplicate of an existing active
# entry, per embedder (`memory_add` then says `duplicate` unless forced; another embedder gets
# DEDUP_DEFAULT). minilm: the middle of the gap between distinct/related entries (max 0.775) and
# light rewordings (min 0.954) on the demo KB, experiments/dedup-threshold. bge-m3: the seed
# system's calibration on its own KB (distinct <= 0.792, re-adds >= 0.949); not re-measured
# here (no BGE-M3 weights on the measuring machine).
DEDUP_THRESHOLDS = {"minilm": 0.865, "bge-m3": 0.88}
DEDUP_DEFAULT = 0.9


def dedup_threshold(embedder: str) -> float:
    return DEDUP_THRESHOLDS.get(embedder, DEDUP_DEFAULT)


def scopes_seen(scope: str) -> tuple[str, ...] | None:
    """The scopes a new entry in `scope` is compared with (None: all)."""
    return None if scope == "global" else (scope, "global")


def find_duplicate(
    memory: Memory,
    title: str,
    body: str,
    exclude: set[str],
    scope: str = "global",
    scopes: tuple[str, ...] | None | bool = False,
) -> dict[str, Any] | None:
    """An active KB entry with the same normalised text, or a near-duplicate above the
    embedder's threshold, among the entries a new one in `scope` is compared with (`scopes`:
    those scopes as the index holds them, when the writer computed them; None: all)."""
    seen = scopes_seen(scope) if scopes is False else scopes
    same = memory.same_text(content_key(title, body), exclude, seen)
    if same is not None:
        return {"duplicate_of": same, "score": 1.0, "match": "exact"}
    threshold = dedup_threshold(memory.cfg.embedder)
    near = nearest(memory, title, body, exclude, seen)
    if near is not None and near[1] >= threshold:
        return {"duplicate_of": near[0], "score": round(near[1], 4), "match": "near"}
    return None


def nearest(
    memory: Memory,
    title: str,
    body: str,
    exclude: set[str] = frozenset(),
    scopes: tuple[str, ...] | None = None,
) -> tuple[str, float] | None:
    """The active KB entry most similar to this text (cosine of the first chunk's dense
    vector against every stored chunk), or None. The dedup decision and its calibration
    (experiments/dedup-threshold) both use exactly this."""
    hits = memory.index.similar(
        Document("new", title, body),
        limit=1,
        flt=Filter(statuses=("active",), sources=memory.search_sources(False), scopes=scopes),
        exclude=exclude,
    )
    return hits[0] if hits else None
