"""The read side of the tools: search and get (history: `memory_agent.recall.history`). Each
takes the `Memory` it reads from.

Search is relevance from ragcore, then the dynamics of `memory_agent.recall.ranking` on top; it
returns, with its hits, the channel that ranked each one best (for the usage log). A search
reads one `Index.snapshot()` from start to end and takes no lock: writes in flight never make
it wait, and it sees each of them whole or not at all.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_agent import limits
from memory_agent.capture.episodes import EPISODES
from memory_agent.clock import parse_time
from memory_agent.errors import Invalid, NotFound, NotReady
from memory_agent.kb.entries import ENTRY_TYPES, MAX_LINKS_READ
from memory_agent.kb.files import read_kb_entry
from memory_agent.kb.kbs import kb_of_source, split_id
from memory_agent.kb.scopes import search_scopes
from memory_agent.recall import policy
from memory_agent.recall.edges import neighbours_of
from memory_agent.recall.ranking import Ranked, _ts, rerank
from memory_agent.recall.similarity import check_min_score, covers, judge, similarities
from memory_agent.recall.stages import in_two_stages
from ragcore import (
    DocumentError,
    Embedding,
    Filter,
    Index,
    SearchConfig,
    extract_entities,
    snippets_of,
    wikilinks,
)
from ragcore import search as relevance

if TYPE_CHECKING:
    from memory_agent.index.memory import Memory

__all__ = [
    "product_searcher",
    "Found",
    "check_search",
    "default_filter",
    "get",
    "rank",
    "run_search",
    "similarities",
    "search",
    "standing_at",
]


@dataclass
class Found:
    """A search's reply and, per hit, the channel that ranked it best."""

    reply: dict[str, Any]
    channels: dict[str, str]


def check_search(query: Any, limit: Any, types: Any, tags: Any, as_of: Any) -> float | None:
    """Refuse bad search arguments (naming the bound); the as_of cutoff, if any."""
    if not isinstance(query, str) or not query.strip():
        raise Invalid("query: empty", "say what you are looking for, e.g. 'how do we release'")
    limits.check_text("query", query, limits.MAX_QUERY)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise Invalid(f"limit: {limit!r} is not a whole number", "pass 1 to 50")
    if not 1 <= limit <= limits.MAX_LIMIT:
        raise Invalid(
            f"limit: {limit} is out of range", f"pass a number from 1 to {limits.MAX_LIMIT}"
        )
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise Invalid("types: must be a list of types", f"use {', '.join(ENTRY_TYPES)}")
        unknown = [t for t in types if t not in ENTRY_TYPES]
        if unknown:
            raise Invalid(
                f"types: {', '.join(map(repr, unknown))} "
                f"{'is not a type' if len(unknown) == 1 else 'are not types'}",
                f"use any of {', '.join(ENTRY_TYPES)}",
            )
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise Invalid("tags: must be a list of words", "pass tags like [git, testing]")
        if len(tags) > limits.MAX_TAGS:
            raise Invalid(
                f"tags: {len(tags)} tags is over the limit of {limits.MAX_TAGS}",
                "filter by fewer tags",
            )
    return as_of_cutoff(as_of) if as_of else None


def as_of_cutoff(as_of: str) -> float:
    """The end of the day `as_of` (YYYY-MM-DD, UTC) as a timestamp."""
    try:
        start = parse_time(str(as_of), date_only=True)
    except ValueError as exc:
        raise Invalid(f"as_of: {as_of!r} is not a date", "use YYYY-MM-DD, e.g. 2026-06-30") from exc
    if start >= parse_time(dt.date.max):  # its end is past the last day a datetime can hold
        raise Invalid(
            f"as_of: {as_of} is past the last date the memory can answer for "
            f"({dt.date.max - dt.timedelta(days=1)})",
            "pass an earlier date, or leave as_of out for the memory as it stands now",
        )
    return start + 86400.0 - 0.001


def standing_at(index: Index, cutoff: float) -> tuple[str, ...]:
    """Ids of the documents that existed and were neither superseded nor archived at `cutoff`."""
    keep = []
    for info in index.docs():
        created = _ts(info.meta.get("created"))
        ended = [
            t
            for t in (_ts(info.meta.get("superseded_at")), _ts(info.meta.get("archived_at")))
            if t is not None
        ]
        if created is not None and created > cutoff:
            continue
        if ended and min(ended) <= cutoff:
            continue
        keep.append(info.id)
    return tuple(sorted(keep))


def rank(
    index: Index,
    query: str,
    flt: Filter,
    *,
    limit: int,
    stats: dict[str, Any],
    now: float,
    graph: dict[str, list[tuple[str, str]]],
    explain: bool = False,
    use_dense: bool = True,
    config: SearchConfig | None = None,
    embedding: Embedding | None = None,
) -> Found:
    """ragcore's relevance, then the memory's dynamics (`memory_agent.recall.ranking`): the
    path every search takes - the tools, the CLI and `memory-agent eval`. Each hit also says
    its `similarity` (`similarities`): relevance is relative to the best hit, it is not."""
    if use_dense and embedding is None:  # embedded here once: the similarities need it too
        embedding = index.embedder.embed_query(query.strip())
    result = relevance(
        index,
        query,
        limit=max(limit * 3, 30),
        flt=flt,
        config=config or SearchConfig(),
        use_dense=use_dense,
        snippets=False,  # read below for the hits shown (a third of the candidates at most)
        query_embedding=embedding,
    )
    shown_chunk = {h.doc_id: h.chunk_id for h in result.hits}
    candidates = [
        Ranked(h.doc_id, h.score, h.payload, h.snippet, h.explain() if explain else None)
        for h in result.hits
    ]
    channels = {
        h.doc_id: min(h.channels, key=lambda n: h.channels[n].rank)
        for h in result.hits
        if h.channels
    }
    if policy.QUERY_ENTITY_SCALE > 0.0:  # hits naming what the query names
        named = set(extract_entities(query))
        for c in candidates if named else ():
            info = index.doc(c.doc_id)
            if info is not None and named.intersection(info.entities):
                c.signals["entities"] = policy.QUERY_ENTITY_SCALE * c.relevance

    pulled: set[str] = set()

    def lookup(doc_id: str):
        """A linked document's payload; its snippet is read later, only if it is shown."""
        info = index.doc(doc_id)
        if info is None:
            return None
        pulled.add(doc_id)
        return info.payload(), ""

    ranked = rerank(
        candidates,
        stats=stats,
        now=now,
        neighbours=neighbours_of(index, graph),
        lookup=lookup,
        allowed=flt.matches,
    )[:limit]
    found = snippets_of(index, [shown_chunk[r.doc_id] for r in ranked if r.doc_id in shown_chunk])
    for r in ranked:
        if r.doc_id in shown_chunk:
            r.snippet = found.get(shown_chunk[r.doc_id], "")
        elif r.doc_id in pulled and not r.snippet:
            text = " ".join((index.preview(r.doc_id) or r.payload.get("title", "")).split())
            r.snippet = text if len(text) <= 240 else text[:239] + "…"
    similar = similarities(index, query, embedding, [r.doc_id for r in ranked], result.hits)
    hits = []
    for r in ranked:
        p = r.payload
        hit = {
            "id": r.doc_id,
            "title": p.get("title", ""),
            "type": p.get("type", "note"),
            "status": p.get("status", "active"),
            "score": round(r.score, 4),
            "snippet": r.snippet,
            "source": p.get("source"),
            "kb": kb_of_source(p.get("source")),
            "writable": bool(p.get("writable")),
            "scope": str(p.get("scope") or "global"),
            "similarity": similar.get(r.doc_id),
        }
        if explain:
            s = stats.get(r.doc_id)
            hit["why"] = {
                **(r.why or {"fused": 0.0, "channels": {}}),
                "relevance": round(r.relevance, 6),
                "signals": {k: round(v, 6) for k, v in r.signals.items()},
                "state": r.state,
                "recall_count": s.recall_count if s else 0,
                "importance": s.importance if s else None,
            }
            if r.via:
                hit["why"]["via"] = r.via  # how the links signal reached it
            if graph.get(r.doc_id):
                edges = graph[r.doc_id][:MAX_LINKS_READ]  # incoming ones are many at a hub
                hit["why"]["edges"] = [{"kind": k, "id": o} for o, k in edges]
        hits.append(hit)
    out: dict[str, Any] = {"hits": hits, "generation": result.generation}
    if result.degraded:
        out["degraded"] = result.degraded
    return Found(out, {h["id"]: channels.get(h["id"], "links") for h in hits})


def default_filter(
    types=None, tags=None, include_archived=False, doc_ids=None, sources=None, scopes=None
) -> Filter:
    """The filter of a search: active entries (and archived ones if asked) of `sources` (None:
    every source) in `scopes` (None: every scope; `memory_agent.kb.scopes.search_scopes`)."""
    return Filter(
        types=tuple(types) if types else None,
        tags=tuple(tags) if tags else None,
        statuses=None
        if doc_ids is not None
        else (("active", "archived") if include_archived else ("active",)),
        sources=tuple(sources) if sources is not None else None,
        scopes=tuple(scopes) if scopes is not None else None,
        doc_ids=doc_ids,
    )


def product_searcher(clock_setting: str = ""):
    """The search a tool call makes - the default filter (active entries, every source), then
    the ranking with empty usage stats - as a `ragcore.evaluate` searcher over a benchmark's
    index (`memory-agent eval`). `clock_setting`: the `clock` setting ("": the real time)."""
    from memory_agent.clock import Clock
    from memory_agent.index.links import link_graph

    now = Clock.from_setting(clock_setting).now()
    graphs: dict[int, dict] = {}

    def searcher(index, query: str, limit: int) -> list[str]:
        graph = graphs.get(index.revision)
        if graph is None:
            graph = graphs[index.revision] = link_graph(index)
        found = rank(index, query, default_filter(), limit=limit, stats={}, now=now, graph=graph)
        return [h["id"] for h in found.reply["hits"]]

    return searcher


def run_search(
    memory: Memory,
    query: str,
    *,
    limit: int = 8,
    types: list[str] | None = None,
    tags: list[str] | None = None,
    include_readonly: bool = True,
    include_archived: bool = False,
    include_episodes: bool = False,
    explain: bool = False,
    as_of: str | None = None,
    use_dense: bool = True,
    scope: str | None = None,
    project: str | None = None,
    kb: str | None = None,
    ranker: Executor | None = None,
    min_score: float | None = None,
) -> Found:
    """`as_of` ("YYYY-MM-DD") answers from the entries as they stood at the end of that day:
    created by then, and not yet superseded or archived then (the lifecycle is judged by its
    dates, not the status). `scope` (None: "project") and `project` (the session's project
    identity, None outside one): which scopes it reads (`kb.scopes.search_scopes`). `kb`: one.
    `min_score`: hits whose `similarity` is below it are left out (absolute, unlike `score`).
    When nothing in the project's scope reaches it (or the embedder's injection floor), the
    reply's `elsewhere` names the other projects whose entries do - "more in other projects".

    `ranker` (the daemon's): the search in two stages (`recall.stages`), after this thread has
    refreshed the index."""
    cutoff = check_search(query, limit, types, tags, as_of)
    min_score = check_min_score(min_score)
    scopes = search_scopes(scope, project, memory.kb_dir)
    with memory.session():
        if use_dense or memory.follows:  # (a follower's refresh embeds nothing: it replays)
            memory.refresh_for_read()  # skipped while a write is in flight: it applies the changes
        elif not memory.index.exists():
            raise NotReady(
                "the first index of this home is not built yet (the model is loading, or the "
                "first build - after `init` or a first sync - is still embedding the entries)",
                "retry in a few seconds (a first build of many entries takes minutes; "
                "`memory-agent status` shows when it is done)",
            )
        sources = memory.search_sources(include_readonly, include_episodes)
        sources = (memory.kbs.get(kb).source,) if kb else sources  # pushed down as a source

        def ranked(embedding: Embedding | None, scopes: Any = scopes) -> Found:
            index = memory.index.snapshot()  # one state for the whole search; no lock
            doc_ids = standing_at(index, cutoff) if cutoff is not None else None
            flt = default_filter(types, tags, include_archived, doc_ids, sources, scopes)
            return rank(
                index,
                query,
                flt,
                limit=limit,
                stats=memory.stats,
                now=memory.clock(),
                graph=memory.link_graph(index),
                explain=explain,
                use_dense=use_dense,
                embedding=embedding,
            )

        found = in_two_stages(memory, query, ranked, ranker, use_dense)
        judge(
            found.reply,
            min_score=min_score,
            embedder=str(memory.cfg.embedder),
            covered=covers(memory.index, query),
            dense=use_dense,
            scopes=scopes if scope in (None, "project") else None,
            elsewhere=lambda: in_two_stages(memory, query, lambda e: ranked(e, None), ranker).reply[
                "hits"
            ],
        )
        return found


def search(memory: Memory, query: str, **kwargs: Any) -> dict[str, Any]:
    """`run_search`'s reply alone (for callers that log no usage: the CLI without a daemon,
    experiments, tests)."""
    return run_search(memory, query, **kwargs).reply


def _episode(memory: Memory, entry_id: str) -> dict[str, Any]:
    """An episode, read from the journal (the truth of L0/L1)."""
    from memory_agent.capture.episodes import load_session
    from memory_agent.intake.journal import sessions

    _, session, n = (entry_id.split("/") + ["", ""])[:3]
    paths = sessions(memory.place.journal_dir).get(session, [])
    for episode in load_session(paths, session) if paths else []:
        if str(episode.n) == n:
            doc = episode.to_document(paths[-1])
            return {
                "id": entry_id,
                "title": doc.title,
                "type": "episode",
                "status": "active",
                "tags": [],
                "body": doc.body,
                "path": str(paths[-1]),
                "writable": False,
                "supersedes": [],
                "superseded_by": None,
                "created": doc.meta["created"],
                "scope": str(doc.meta.get("scope") or _indexed_scope(memory, entry_id)),
            }
    raise NotFound(f"no episode with id {entry_id!r}")


def _indexed_scope(memory: Memory, doc_id: str) -> str:
    """The scope the index gave a document (an episode journaled before the hook recorded its
    project is resolved from its `cwd` at indexing)."""
    info = memory.index.snapshot().doc(doc_id) if memory.index.exists() else None
    return info.scope if info is not None else "global"


def get(memory: Memory, entry_id: str) -> dict[str, Any]:
    """An entry read from disk (the truth), KB or read-only corpus."""
    from memory_agent.index.corpora import load_corpus_document

    memory.require_home()
    limits.check_text("id", entry_id, limits.MAX_ID, required=True, one_line=True)
    path: Path | None = memory.find_path(entry_id) if "/" not in entry_id else None
    if path is not None:
        entry = read_kb_entry(path)  # the scans' rule: a misplaced file is not an entry
        place = memory.kbs.get(split_id(entry_id)[0])
        links = {**(entry.extra.get("links") or {}), "wikilink": wikilinks(entry.body)}
        return {
            "id": place.qualify(entry.id),
            "kb": place.name,
            "title": entry.title,
            "type": entry.type,
            "status": entry.status,
            "tags": entry.tags,
            "body": entry.body,
            "path": str(path),
            "writable": place.writable,
            "supersedes": place.qualify_ids(entry.extra.get("supersedes", [])),
            "superseded_by": place.qualify_ids(entry.extra.get("superseded_by")),
            "created": entry.created,
            "scope": entry.scope,
            "links": {k: place.qualify_ids(list(v)) for k, v in links.items() if v},
            **{
                k: entry.extra[k]
                for k in ("superseded_at", "archived_at", "archive_reason")
                if k in entry.extra
            },
        }
    if "/" not in entry_id:
        raise NotFound(f"no entry with id {entry_id!r}")
    if entry_id.startswith(EPISODES + "/"):
        return _episode(memory, entry_id)
    corpus, rel, full = memory.scanner.corpus_file(entry_id)
    try:
        doc = load_corpus_document(corpus, rel, full)
    except DocumentError as exc:
        raise NotFound(f"{entry_id}: {exc}") from exc
    created = doc.meta.get("created")
    return {
        "id": entry_id,
        "title": doc.title,
        "type": doc.meta["type"],
        "status": "active",
        "tags": doc.meta.get("tags") or [],
        "body": doc.body,
        "path": str(full),
        "writable": False,
        "supersedes": [],
        "superseded_by": None,
        "created": None if created is None else str(created),
        "scope": str(doc.meta.get("scope") or "global"),
    }
