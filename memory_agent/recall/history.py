"""`history`: how an entry came to be - every entry its supersede edges reach, oldest first.

A chain is a line most of the time (each entry superseded by one successor). Two machines that
superseded one entry make a fork (`superseded_by: [a, b]`, a sync's merge); resolving it keeps
one successor and archives the other, or merges both into a new entry
(`memory_agent.write.forks`). The history follows every branch: each entry the `supersedes` and
`superseded_by` fields of the KB's files connect, and the entries the index knows to supersede
one of them (within the KB its id names, at most `MAX_STEPS`), ordered by creation. A step off the line from the first entry to the current one
is marked `branch` (a fork's successors, a successor archived or merged away).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_agent import limits
from memory_agent.errors import NotFound
from memory_agent.kb.entries import Entry, read_entry
from memory_agent.kb.kbs import split_id

if TYPE_CHECKING:
    from memory_agent.index.memory import Memory

__all__ = ["MAX_STEPS", "history"]

MAX_STEPS = 200  # entries one history reads at most (a file each)


def _ids(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def history(memory: Memory, entry_id: str) -> dict[str, Any]:
    """The supersede graph through `entry_id`, oldest first, read from the files."""
    memory.require_home()
    limits.check_text("id", entry_id, limits.MAX_ID, required=True, one_line=True)
    if memory.find_path(entry_id) is None:
        raise NotFound(f"no entry with id {entry_id!r}")
    place = memory.kbs.get(split_id(entry_id)[0])  # the graph stays in the KB it names
    later = _successors_in_index(memory, place)  # a branch a resolved fork no longer names
    entries: dict[str, Entry] = {}
    todo = [place.local(entry_id)]
    while todo and len(entries) < MAX_STEPS:
        eid = todo.pop()
        if eid in entries:
            continue
        path: Path | None = memory.find_path(place.qualify(eid))
        if path is None:
            continue
        entry = read_entry(path)
        entries[eid] = entry
        todo += _ids(entry.extra.get("supersedes")) + _ids(entry.extra.get("superseded_by"))
        todo += later.get(eid, [])
    order = _oldest_first(entries)
    line = _main_line(entries, order)
    chain = []
    for entry in order:
        step: dict[str, Any] = {
            "id": place.qualify(entry.id),
            "title": entry.title,
            "type": entry.type,
            "status": entry.status,
            "created": entry.created,
        }
        before = [s for s in _ids(entry.extra.get("supersedes")) if s in entries]
        if before:
            step["supersedes"] = [place.qualify(s) for s in before]
        for key in ("superseded_by", "superseded_at", "archived_at", "archive_reason"):
            if key in entry.extra:
                step[key] = entry.extra[key]
        successors = [place.qualify(s) for s in _ids(entry.extra.get("superseded_by"))]
        if "superseded_by" in step:
            step["superseded_by"] = place.qualify_ids(step["superseded_by"])
        if entry.status == "superseded":
            step["reason"] = f"superseded by {', '.join(successors)}" + (
                " (a fork: two machines superseded it; resolve it with `memory-agent resolve "
                f"{place.qualify(entry.id)} --keep ID` or `--merge`)"
                if len(successors) > 1
                else ""
            )
        elif entry.status == "archived":
            step["reason"] = entry.extra.get("archive_reason")
        if entry.id not in line:
            step["branch"] = True
        chain.append(step)
    return {"id": entry_id, "chain": chain}


def _oldest_first(entries: dict[str, Entry]) -> list[Entry]:
    """By creation, but never before an entry it supersedes: two entries written in one second
    (or under one fixed clock) are ordered by their edges, not by their ids."""
    import heapq

    before = {
        eid: {s for s in _ids(e.extra.get("supersedes")) if s in entries and s != eid}
        for eid, e in entries.items()
    }
    for eid, e in entries.items():  # an edge one side of it names only
        for later in _ids(e.extra.get("superseded_by")):
            if later in before and later != eid:
                before[later].add(eid)
    key = {eid: (str(e.created), eid) for eid, e in entries.items()}
    ready = [key[eid] for eid, b in before.items() if not b]
    heapq.heapify(ready)
    order: list[Entry] = []
    while len(order) < len(entries):
        if not ready:  # a cycle a hand edit made: the oldest of what is left goes next
            rest = [eid for eid in entries if eid in before]
            ready = [min(key[eid] for eid in rest)]
            before[ready[0][1]] = set()
        _, eid = heapq.heappop(ready)
        if eid not in before:
            continue
        del before[eid]
        order.append(entries[eid])
        for other, b in before.items():
            if eid in b:
                b.discard(eid)
                if not b:
                    heapq.heappush(ready, key[other])
    return order


def _successors_in_index(memory: Memory, place: Any) -> dict[str, list[str]]:
    """Each id of the KB -> the ids whose `supersedes` names it, as the index holds them: the
    way to a successor the old entry's `superseded_by` no longer names (a fork resolved by
    keeping the other one)."""
    if not memory.index.exists():
        return {}
    out: dict[str, list[str]] = {}
    for info in memory.index.snapshot().docs():
        if info.source != place.source:
            continue
        for before in _ids(info.meta.get("supersedes")):
            out.setdefault(place.local(before), []).append(place.local(info.id))
    return out


def _main_line(entries: dict[str, Entry], order: list[Entry]) -> set[str]:
    """The ids from the oldest entry that supersedes nothing here, along `superseded_by`
    while it names one successor (a fork ends the line: neither branch is the line)."""
    roots = [e for e in order if not any(s in entries for s in _ids(e.extra.get("supersedes")))]
    current = roots[0] if roots else (order[0] if order else None)
    line: set[str] = set()
    while current is not None and current.id not in line:
        line.add(current.id)
        later = [s for s in _ids(current.extra.get("superseded_by")) if s in entries]
        current = entries[later[0]] if len(later) == 1 else None
    return line
