"""The ranking policy: every constant of how the memory ranks what it recalls, in one place,
each one explained. Constants and pure functions only, read by `recall.ranking`, `recall.edges`,
`recall.events` and `recall.gc`. (What the memory accepts - the dedup thresholds - is the write
path's: `memory_agent.write.dedup`.)

Search (ragcore) gives each entry a relevance score in [0, 1] (the fused score: 1 for the best
match of the query, lower for weaker ones). On top of it the memory adds small signals learned
from use and from the lifecycle. They are sized against that scale: together they can reorder
entries of about the same relevance, never lift an unrelated entry over a relevant one.

    final = relevance + reinforcement + importance + recency - dormancy + links
"""

from __future__ import annotations

import math

# -- reinforcement: an entry recalled often was useful often ---------------------------------
# bonus = REINFORCEMENT_SCALE * ln(1 + recall_count), at most REINFORCEMENT_CAP. The log makes
# the first recalls count most; the cap (reached at about 13 recalls) keeps a popular entry from
# beating a directly relevant one: a relevance gap above 0.04 always wins. Measured in
# experiments/reinforcement: 0.015 / 0.04 keeps the warm gain of 0.025 / 0.08 and halves the
# damage when other queries' answers are hot (leave-one-out, 20 recalls: 3 queries worse, not 6).
REINFORCEMENT_SCALE = 0.015
REINFORCEMENT_CAP = 0.04
# Only hits a search returned in its top 3 count as recalled (the rest were shown, not used).
RECALL_COUNTS_UP_TO_RANK = 3

# -- importance: someone said "this matters" (memory_set_importance, 1-10) -------------------
# bonus = IMPORTANCE_SCALE * importance: 0.01 at 1, 0.10 at 10. Any importance scores above the
# same entry cold; 10 can lift an entry over one about 0.1 more relevant, not over a clear match.
IMPORTANCE_SCALE = 0.01

# -- recency and decay: knowledge nobody touches fades, by type ------------------------------
# Idle time = now - the latest of created, updated, last recalled, last opened. A recency bonus
# of RECENCY_WEIGHT * 0.5 ** (idle / half-life) favours fresh entries a little. An entry idle
# longer than its type's dormancy threshold is `dormant`: ranked lower by DORMANT_PENALTY, never
# deleted. `memory-agent gc` proposes archiving entries idle past ARCHIVE_AFTER_DAYS.
RECENCY_WEIGHT = 0.03
DORMANT_PENALTY = 0.05
FAST, SLOW, EPISODIC = "fast", "slow", "episodic"
# Session context and notes move fast; decisions, principles and domain knowledge move slowly;
# captured episodes (what happened in one turn) fade fastest. Unformatted (fmt: skip): eleven
# types in three lines, not eleven.
TYPE_PACE = {
    "note": FAST, "preference": SLOW, "correction": SLOW, "pitfall": SLOW, "process": SLOW,
    "guideline": SLOW, "decision": SLOW, "principle": SLOW, "model": SLOW, "fact": SLOW,
    "episode": EPISODIC,
}  # fmt: skip
HALF_LIFE_DAYS = {FAST: 30.0, SLOW: 90.0, EPISODIC: 14.0}
DORMANT_AFTER_DAYS = {FAST: 45.0, SLOW: 90.0, EPISODIC: 30.0}
# Entries recalled this often stay active twice as long (they proved their worth).
PROVEN_RECALLS = 10
ARCHIVE_AFTER_DAYS = {FAST: 120.0, SLOW: 365.0, EPISODIC: 60.0}  # gc archives KB entries only

# -- links: neighbours of strong hits, up to two hops ---------------------------------------------
# For each of the LINK_SOURCES best hits with relevance >= LINK_MIN_SCORE, every neighbour gets
# LINK_SCALE * edge weight * the hit's relevance; a neighbour of a neighbour (hop 2) gets that
# again times its own edge weight and HOP_DECAY. A neighbour that does not match the query
# is never lifted past the hit it came from (a link adds context; it does not reorder strong
# hits: measured in experiments/reinforcement, an uncapped bonus cost 0.008 cold MRR); one that
# matches is capped too unless CAP_MATCHING is off. Authored links outrank lifecycle edges,
# which outrank inferred ones (an entity shared by two entries). `contradicts` is shown in
# explain and memory_get, and never boosts. Values: experiments/multihop, chosen on the LoCoMo,
# SciFact and CMRC 2018 dev splits and reported on them (no held-out split); LINK_SCALE 0.2
# scored higher on LoCoMo but lowered the demo KB's cold MRR (experiments/reinforcement).
LINK_SOURCES = 3
LINK_MIN_SCORE = 0.5
LINK_SCALE = 0.08
MAX_HOPS = 2
HOP_DECAY = 0.5
HOP_FRONTIER = 20  # nodes expanded at hop 2, strongest first
MAX_PULLED = 40  # entries a search may pull in that it did not find itself
CAP_MATCHING = True
# Unformatted (fmt: skip): the comments stay aligned in a column.
EDGE_WEIGHTS = {
    "references": 1.0,    # authored, in the frontmatter's links:
    "wikilink": 1.0,      # authored, [[target]] in the body
    "derived_from": 0.9,
    "contained_in": 0.8,
    "supersedes": 0.7,    # a lifecycle edge: a link to a superseded entry leads to its successor
    "entity": 0.5,        # inferred: both name the same rare entity (x its rarity, 0..1)
    "contradicts": 0.0,   # shown, never boosts
}  # fmt: skip
# An entity links entries only while it is rare: named by at most ENTITY_MAX_DOCS entries (and
# at least 2); each entry follows at most ENTITY_NEIGHBOURS such edges, rarest entity first.
# A candidate naming an entity the query names gets QUERY_ENTITY_SCALE x its relevance: off,
# it helped LoCoMo's multi-hop by 0.003 and cost SciFact (experiments/multihop).
QUERY_ENTITY_SCALE = 0.0
ENTITY_MAX_DOCS = 50
ENTITY_NEIGHBOURS = 20


def pace(entry_type: str) -> str:
    return TYPE_PACE.get(entry_type, SLOW)


def reinforcement_bonus(recall_count: int) -> float:
    return min(REINFORCEMENT_CAP, REINFORCEMENT_SCALE * math.log1p(max(0, recall_count)))


def importance_bonus(importance: int | None) -> float:
    return IMPORTANCE_SCALE * importance if importance else 0.0


def recency_bonus(idle_days: float, entry_type: str) -> float:
    return RECENCY_WEIGHT * 0.5 ** (max(0.0, idle_days) / HALF_LIFE_DAYS[pace(entry_type)])


def decay_state(idle_days: float, entry_type: str, recall_count: int) -> str:
    limit = DORMANT_AFTER_DAYS[pace(entry_type)]
    if recall_count >= PROVEN_RECALLS:
        limit *= 2
    return "dormant" if idle_days > limit else "active"


def should_archive(idle_days: float, entry_type: str, recall_count: int) -> bool:
    limit = ARCHIVE_AFTER_DAYS[pace(entry_type)]
    if recall_count >= PROVEN_RECALLS:
        limit *= 2
    return idle_days > limit


# -- injection: nothing relevant, nothing injected --------------------------------------------
# Relevance is relative (the best hit of any query scores about 1), so a prompt the memory knows
# nothing about still got its "best" entries injected. A hit is injected only if its absolute
# similarity to the prompt (`recall.similarity.similarities`: its cosine, or its share of the
# query's words, whichever says more) is at least the embedder's floor. Calibrated in experiments/injection-floor
# (MiniLM; tuned on the LoCoMo dev conversations and the demo KB's labelled queries, checked on
# the held-out conversations). An embedder without a value here gets no absolute floor (BGE-M3:
# its cosines sit higher, and no weights were on the measuring machine to calibrate it).
INJECT_FLOORS: dict[str, float] = {"minilm": 0.25}
# A hit's similarity is the larger of its cosine and this times the share of the query's words
# (weighted by rarity) it holds (`recall.similarity`): a full lexical match counts as a cosine
# of 0.5 - an exact error text or name the embedder does not see as close. Chosen with the
# floor, in the experiment's second round (its README).
LEXICAL_SHARE_WEIGHT = 0.5


def inject_floor(embedder: str, covered: bool = True) -> float | None:
    """The floor for a query (None: none applies - an embedder without a calibrated value, or
    a query in a language it was not trained for (`covered` False), whose cosines carry
    little: MiniLM's on Chinese)."""
    return INJECT_FLOORS.get(embedder) if covered else None
