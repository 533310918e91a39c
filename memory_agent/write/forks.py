"""Resolving a fork: an entry two machines superseded, which a sync's merge left with two
successors (`superseded_by: [a, b]`, `memory_agent.sync.merging`), brought back to one - by a
person (`memory-agent resolve`, the browser's button) or an agent (`memory_resolve_fork`),
through the gateway's transaction like every write: a preview first, then one commit.

- **keep**: the old entry's `superseded_by` names the kept successor alone; every other
  successor still active is archived, its reason naming the fork and the one kept.
- **merge**: a new entry (the text written from both) supersedes every active successor; the
  old entry's `superseded_by` names it, and its `supersedes` lists the old entry and those
  successors - so a link to any of them leads to it, and `history` shows every branch.

Nothing is deleted: the dropped successor stays, archived or superseded, and the commit syncs
like any write (the other machine's `remote` then shows no fork). `fork_hint` tells a
supersede that met the other successor's text (a duplicate) that this is a fork to resolve.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_agent import limits
from memory_agent.clock import iso
from memory_agent.errors import Conflict, Invalid, NotFound
from memory_agent.kb.entries import Entry, content_key, entry_path, render_entry
from memory_agent.kb.files import fanned_out, read_kb_entry
from memory_agent.write.checks import (
    check_committed,
    check_target,
    clean_tags,
    load_writable,
    new_entry,
)
from memory_agent.write.dedup import find_duplicate

__all__ = ["fork_hint", "resolve_fork", "successors_of"]

TOOL = "memory_resolve_fork"


def successors_of(entry: Entry) -> list[str]:
    """The ids an entry's `superseded_by` names (one, or a fork's several), as the file holds
    them."""
    later = entry.extra.get("superseded_by")
    if later in (None, ""):
        return []
    return [str(x) for x in later] if isinstance(later, list) else [str(later)]


def fork_hint(gateway: Any, old: Entry, other: str) -> str | None:
    """When `old` and `other` (ids of one KB) are two successors of one fork: the command that
    resolves it (a supersede of one with the other's text is a duplicate, never a fix)."""
    place = gateway.place
    for parent in old.extra.get("supersedes") or []:
        path = gateway.memory.find_path(place.qualify(str(parent)))
        if path is None:
            continue
        try:
            entry = read_kb_entry(path)
        except Invalid:
            continue
        later = successors_of(entry)
        if len(later) > 1 and old.id in later and place.local(other) in later:
            name = place.qualify(entry.id)
            return (
                f"{place.qualify(old.id)} and {other} are the two successors of a fork of {name}: "
                f"resolve it with `memory-agent resolve {name} --keep {other}` (or --merge; the "
                "tool memory_resolve_fork)"
            )
    return None


def _check_request(keep: Any, title: Any, body: Any, reason: Any) -> str | None:
    merging = title is not None or body is not None
    if (keep is None) == (not merging):
        raise Invalid(
            "resolve: give either keep (the successor to keep) or title and body (a new entry "
            "merging both), not " + ("both" if merging else "neither"),
            "keep=<one successor's id>, or title=... body=... for a merge",
        )
    if keep is not None:
        limits.check_text("keep", keep, limits.MAX_ID, required=True, one_line=True)
    if reason is None:
        return None
    limits.check_text("reason", reason, limits.MAX_REASON)
    reason = " ".join(str(reason).split())
    limits.check_text("reason", reason, limits.MAX_REASON, one_line=True)
    return reason or None


def resolve_fork(
    gateway: Any,
    seen: Callable[[str], tuple[str, ...] | None],
    entry_id: str,
    keep: str | None = None,
    title: str | None = None,
    body: str | None = None,
    reason: str | None = None,
    confirm: bool = False,
    request_id: str | None = None,
) -> dict[str, Any]:
    """Resolve the fork of `entry_id` (the module's docstring); a preview unless `confirm`.
    `gateway`: the KB's (`Gateway`, which calls this with the write lock held, inside
    `memory.session()`); `seen(scope)`: the scopes a new entry in `scope` is compared with."""
    memory, place, writes = gateway.memory, gateway.place, gateway.writes
    reason = _check_request(keep, title, body, reason)
    args = {"id": entry_id, "keep": keep, "title": title, "body": body, "reason": reason}
    if confirm:
        replay, request = writes.begin(request_id, TOOL, args)
        if replay is not None:
            return replay
    else:
        request = {}
        memory.refresh(force=True)
    old_path, old = load_writable(memory, entry_id)
    later = successors_of(old)
    if len(later) < 2:
        state = f"superseded by {place.qualify(later[0])} alone" if later else old.status
        raise Conflict(
            f"{place.qualify(old.id)} is not a fork (it is {state}): nothing to resolve",
            "a fork is an entry two machines superseded; `memory-agent remote` lists them",
        )
    successors: dict[str, tuple[Path, Entry]] = {}
    for sid in later:
        path = memory.find_path(place.qualify(sid))
        if path is None:
            raise NotFound(
                f"{place.qualify(sid)}, a successor of {place.qualify(old.id)}, is not in the "
                "knowledge base here",
                "run `memory-agent sync` (the other machine's commit may not be here yet)",
            )
        successors[sid] = (path, read_kb_entry(path))
    when = writes.when(TOOL, args, confirm)
    files: dict[Path, str] = {}
    name = place.qualify
    if keep is not None:
        kept = place.local(keep)
        if kept not in successors:
            raise Invalid(
                f"keep: {keep} is not a successor of {name(old.id)}",
                f"keep one of {', '.join(name(s) for s in later)}",
            )
        if successors[kept][1].status == "archived":
            raise Conflict(
                f"{name(kept)} is archived ({successors[kept][1].extra.get('archive_reason')})",
                "keep the other successor, or merge both into a new entry",
            )
        why = f"fork of {old.id} resolved: {kept} kept" + (f" ({reason})" if reason else "")
        archived = []
        for sid, (path, entry) in successors.items():
            if sid == kept or entry.status != "active":
                continue
            entry.status = "archived"
            entry.extra.update(archived_at=iso(when), archive_reason=why)
            files[path] = render_entry(entry)
            archived.append(sid)
        old.extra["superseded_by"] = kept
        message = f"memory: resolve the fork of {old.id}: keep {kept}" + (
            f", archive {', '.join(archived)}" if archived else ""
        )
        reply: dict[str, Any] = {
            "id": name(old.id),
            "kept": name(kept),
            "archived": [name(s) for s in archived],
            "superseded": [],
        }
    else:
        active = [s for s, (_, e) in successors.items() if e.status == "active"]
        if not active:
            raise Conflict(
                f"no successor of {name(old.id)} is active: nothing to merge",
                f"keep one of {', '.join(name(s) for s in later)}",
            )
        for sid in active:
            entry = successors[sid][1]
            if isinstance(title, str) and isinstance(body, str):
                if content_key(title, body) == content_key(entry.title, entry.body):
                    raise Invalid(
                        f"the merged text is the text of {name(sid)} itself: nothing to merge",
                        f"keep it instead (keep={name(sid)}, `--keep {name(sid)}`)",
                    )
        first = successors[active[0]][1]
        tags: list[str] = []
        for sid in active:
            tags += [t for t in successors[sid][1].tags if t not in tags]
        new = new_entry(
            memory,
            title,
            body,
            first.type,
            clean_tags(tags[: limits.MAX_TAGS]),
            when,
            kb_dir=gateway.kb_dir,
            supersedes=[old.id, *active],
            **({"scope": first.scope} if first.scope != "global" else {}),
        )
        for sid in active:
            path, entry = successors[sid]
            entry.status = "superseded"
            entry.extra.update(superseded_by=new.id, superseded_at=new.created)
            files[path] = render_entry(entry)
        old.extra["superseded_by"] = new.id
        kb = gateway.kb_dir
        files[entry_path(kb, new.type, new.id, fanned_out(kb))] = render_entry(new)
        message = f"memory: resolve the fork of {old.id}: merge {', '.join(active)} into {new.id}"
        reply = {
            "id": name(old.id),
            "merged_into": name(new.id),
            "archived": [],
            "superseded": [name(s) for s in active],
        }
    files[old_path] = render_entry(old)
    for path in files:
        check_target(gateway.kb_dir, path)
        if path.exists():
            check_committed(gateway.repo, path)
    if not confirm:
        return {
            **reply,
            "status": "preview",
            "preview": {str(p): text for p, text in files.items()},
            "next": "call again with confirm=true to write these files in one commit",
        }
    if keep is None:
        exclude = {name(old.id), *reply["superseded"]}
        scope = first.scope
        duplicate = find_duplicate(memory, new.title, new.body, exclude, scope, scopes=seen(scope))
        if duplicate is not None:
            found = {"status": "duplicate", **reply, **duplicate}
            found["next"] = (
                f"{duplicate['duplicate_of']} already says this: keep a successor, or write "
                "the merge in other words"
            )
            writes.remember(request, found)
            return found
    return writes.apply(files, message, request, {**reply, "status": "resolved"})
