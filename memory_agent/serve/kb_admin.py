"""The daemon's calls about the KBs of a home (docs/adr/0017-team-kb.md): list, add and remove
one (`memory_agent.sync.clones` does the git), a round of sync of every KB or of one, and each
KB's remote state. `Service` calls these with its memory, its rounds (`KbRemotes`) and its
write lock."""

from __future__ import annotations

import threading
from typing import Any

from memory_agent.errors import MemoryAgentError, NotFound, describe
from memory_agent.index.memory import Memory
from memory_agent.kb.kbs import KbPlace
from memory_agent.serve.remote_runs import KbRemotes, RemoteRuns
from memory_agent.sync import clones
from memory_agent.sync.transport import shown

__all__ = ["add", "listing", "remote_status", "remove", "sync"]


def _gone(place: KbPlace) -> NotFound | None:
    """The error of a KB whose clone is gone from the home (deleted by hand, a disk not
    mounted): its rounds and its status say so, and the other KBs go on."""
    if place.personal or (place.dir / ".git").exists():
        return None
    return NotFound(
        f"the clone {place.dir} is not there (deleted or moved by hand?)",
        f"put it back, or `memory-agent kb remove {place.name}` (its entries leave the index) "
        f"and `memory-agent kb add {place.name} URL` to clone it again",
    )


def _round(runs: RemoteRuns, name: str) -> dict[str, Any]:
    """A round now, its report with what the rounds since the person last looked did
    (`since_last_look`: the daemon's own rounds too; `memory_agent.sync.rounds`), now seen."""
    report = {**runs.run_now(), "kb": name}
    report["since_last_look"] = runs.syncer.look(mark=True)
    return report


def sync(memory: Memory, remote: KbRemotes, kb: str | None) -> dict[str, Any]:
    """`kb`: that KB's round alone. None: the personal KB's report (if it has a remote), and
    under `kbs` a round of every other KB with a remote; an error in one is raised once all
    have run, naming the KB."""
    if kb:
        place = memory.kbs.get(kb)  # `not_found` naming `kb list`
        if (gone := _gone(place)) is not None:
            raise gone
        return _round(remote.runs(place.name), place.name)
    reply: dict[str, Any] = {}
    failed: MemoryAgentError | None = None
    others = []
    every = remote.all()
    for place, runs in every:
        if place.personal:
            if runs.syncer.url() is not None or len(every) == 1:
                reply = _round(runs, place.name)  # no remote: not_ready, as before
            continue
        try:
            if (gone := _gone(place)) is not None:
                raise gone
            if runs.syncer.url() is None:
                continue
            others.append(_round(runs, place.name))
        except MemoryAgentError as exc:
            others.append({"kb": place.name, "error": describe(exc).as_json()})
            if failed is None:
                exc.message = f"kb {place.name}: {exc.message}"
                failed = exc
    if others:
        reply["kbs"] = others
    if failed is not None:
        raise failed
    return reply


def _status(runs: RemoteRuns, look: bool) -> dict[str, Any]:
    """One KB's remote state and what its rounds did since a person last looked (`look`: a
    person looks now - `memory-agent remote`)."""
    reply = runs.syncer.status()
    if reply.get("remote") is None:
        return reply
    reply["since_last_look"] = runs.syncer.look(mark=look)  # never waits for a round
    return reply


def remote_status(remote: KbRemotes, look: bool = False) -> dict[str, Any]:
    """The personal KB's remote state, and every other KB's under `kbs`."""
    reply = _status(remote.runs(), look)
    others = [
        {"kb": p.name, "remote": None, "error": describe(gone).as_json()}
        if (gone := _gone(p)) is not None
        else {"kb": p.name, **_status(runs, look)}
        for p, runs in remote.all()
        if not p.personal
    ]
    return {**reply, "kbs": others} if others else reply


def _counts(memory: Memory) -> dict[str, int]:
    counts: dict[str, int] = {}
    if memory.index.exists():
        for info in memory.index.snapshot().docs():
            counts[info.source] = counts.get(info.source, 0) + 1
    return counts


def listing(memory: Memory, remote: KbRemotes) -> dict[str, Any]:
    counts, rows = _counts(memory), []
    for place, runs in remote.all():
        url = runs.syncer.url() if place.dir.is_dir() else None
        rows.append(
            {
                **place.as_json(),
                "entries": counts.get(place.source, 0),
                "remote": shown(url) if url else None,
            }
        )
    return {"kbs": rows}


def add(
    memory: Memory, remote: KbRemotes, lock: Any, name: Any, url: Any, writable: bool
) -> dict[str, Any]:
    """`memory-agent kb add NAME URL`: clone (no lock held), list it, index its entries, and
    a first round of sync (an empty remote gets this home's first commit, pushed)."""
    place = clones.add_kb(memory.kbs, name, url, writable)
    with lock, memory.session():
        memory.scanner.request_full()  # the scan that sees the new KB
        memory.refresh(force=True)
    runs = remote.runs(place.name)
    try:
        synced = runs.run_now()  # a read-only KB only pulls
    except MemoryAgentError as exc:  # added all the same: `memory-agent sync` retries
        synced = {"error": describe(exc).as_json()}
    return {
        **place.as_json(),
        "remote": shown(runs.syncer.url()),
        "sync": synced,
        "entries": _counts(memory).get(place.source, 0),
    }


def remove(memory: Memory, remote: KbRemotes, lock: Any, name: Any) -> dict[str, Any]:
    """`memory-agent kb remove NAME`: refused while it holds unpushed work; the clone is moved
    aside, never deleted; its entries leave the index; its rounds stop."""
    place = memory.kbs.get(name) if isinstance(name, str) and name else None
    rounds = (
        remote.runs(place.name).between_rounds()
        if place is not None and not place.personal
        else threading.Lock()
    )
    with rounds, lock:  # no round of its sync runs while the clone moves
        reply = clones.remove_kb(memory.kbs, name, memory.clock)
        with memory.session():
            memory.scanner.request_full()  # its entries leave the index
            memory.refresh(force=True)
    remote.all()  # stops its rounds
    return reply
