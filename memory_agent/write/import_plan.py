"""What an import writes: each section checked against the KB and against the rest of the batch,
before anything is written (`Gateway.import_entries` runs it with the home lock held).

For each section, in order (the first decision that applies):

- **unchanged**: an active entry came from the same origin (its `source:`) with the same
  title, body, type and tags, or one with the same text was superseded or archived since (an
  import never brings back what was retired) - nothing to write;
- **duplicate**: the same normalised text as an earlier section of this import, or an entry
  of the KB (`write.dedup.find_duplicate`, as `memory_add`: exact, or near at the embedder's
  threshold, among the entries its scope sees; the entry it replaces is left out), or a near
  duplicate of an earlier section of this import (the cosine of their first chunks' vectors, the
  same measure and threshold) - nothing written, the reply names what it duplicates;
- **supersede**: an active entry came from the same origin with other text - a new entry
  supersedes it (the old one marked `superseded`), both files in the import's commit. The new
  entry keeps the old one's scope unless the import names one (as `memory_supersede`);
- **new**: a new entry, in the import's scope, its id made from its project, file and heading
  (`alpha-claude-md-pitfalls`);
- **skipped**: refused by the entry checks (a body over the limit, ...), with the reason.

An entry from an origin that no longer appears in an imported file is left as it is and
listed as `gone` (archive it by hand if it should go).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_agent.errors import Invalid
from memory_agent.kb.entries import Entry, content_key, entry_path, make_id, render_entry
from memory_agent.kb.files import fanned_out, name_taken
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.scopes import MAP_FILE, resolve
from memory_agent.write.checks import check_committed, check_target, load_writable, new_entry
from memory_agent.write.dedup import dedup_threshold, find_duplicate
from memory_agent.write.imports import ORIGIN_PREFIX, Section
from ragcore import Document, chunk_document

if TYPE_CHECKING:
    from memory_agent.index.memory import Memory

__all__ = ["Action", "ImportPlan", "id_seed", "plan_import"]

# A reply lists every action, what changes the KB first: a preview shows every write it
# would make, and the unchanged rows come last (the CLI counts them unless asked to list them)
ORDER = ("new", "supersede", "duplicate", "skipped", "unchanged")


@dataclass
class Action:
    """What one section comes to: `kind` is new, supersede, unchanged, duplicate or skipped."""

    kind: str
    section: Section
    entry: Entry | None = None  # the entry written (new, supersede)
    old_id: str | None = None  # the entry it replaces, or leaves unchanged
    duplicate: dict[str, Any] | None = None
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.kind,
            "title": self.section.title,
            "type": self.section.type,
            "origin": self.section.origin,
        }
        if self.entry is not None:
            out["id"] = self.entry.id
            out["scope"] = self.entry.scope
        if self.old_id is not None:
            out["old_id" if self.kind == "supersede" else "id"] = self.old_id
        if self.duplicate is not None:
            out.update(self.duplicate)
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass
class ImportPlan:
    actions: list[Action] = field(default_factory=list)
    files: dict[Path, str] = field(default_factory=dict)
    scope: str = "global"
    gone: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("new", "supersede", "unchanged", "duplicate", "skipped"), 0)
        for action in self.actions:
            counts[action.kind] += 1
        return counts

    def reply(self, status: str) -> dict[str, Any]:
        written = [a for a in self.actions if a.entry is not None]
        return {
            "status": status,
            "scope": self.scope,
            "counts": self.counts(),
            "ids": [a.entry.id for a in written if a.entry is not None],
            "superseded": [a.old_id for a in written if a.old_id is not None],
            "entries": [
                a.as_json() for a in sorted(self.actions, key=lambda a: ORDER.index(a.kind))
            ],
            "gone": self.gone,
        }

    def message(self, label: str) -> str:
        counts = self.counts()
        head = f"memory: import {label}: {counts['new']} new, {counts['supersede']} superseded"
        lines = []
        for action in self.actions:
            if action.entry is None:
                continue
            was = f" (supersedes {action.old_id})" if action.old_id else ""
            lines.append(f"- {action.entry.id}{was} <- {action.section.origin}")
        if len(lines) > 50:
            lines = lines[:50] + [f"- ... and {len(lines) - 50} more"]
        return head + "\n\n" + "\n".join(lines)


def imported_entries(memory: Memory) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The KB entries that came from an import: origin -> id of the active one, and origin ->
    {content key: id} of those superseded or archived since."""
    active: dict[str, str] = {}
    retired: dict[str, dict[str, str]] = {}
    for info in memory.index.docs():
        origin = info.meta.get("source")
        if info.source != "kb" or not isinstance(origin, str):
            continue
        if not origin.startswith(ORIGIN_PREFIX):
            continue
        if info.status != "active":
            retired.setdefault(origin, {})[str(info.meta.get("key"))] = info.id
        elif origin not in active or info.id < active[origin]:
            active[origin] = info.id
    return active, retired


def _file_of(origin: str) -> str:
    return origin.partition("#")[0]


def id_seed(section: Section, scope: str) -> str:
    """What an imported entry's id is made from: its project (a scope other than global),
    its file and its heading - `alpha-claude-md-pitfalls`, not a third `pitfalls-3` that says
    nothing of where it came from. (The title stays the heading.)"""
    file = _file_of(section.origin).removeprefix(ORIGIN_PREFIX).rstrip("/").rsplit("/", 1)[-1]
    parts = [scope] if scope != "global" else []
    parts.append(file)
    if section.title.strip().lower() != Path(file).stem.lower():
        parts.append(section.title)
    return " ".join(parts)


def plan_import(
    memory: Memory, repo: KBRepo, sections: list[Section], scope: str | None, project: str | None
) -> ImportPlan:
    """Decide each section (the module's docstring) and the files the import writes."""
    name, new_map = resolve(scope, project, memory.kb_dir)
    plan = ImportPlan(scope=name)
    existing, retired = imported_entries(memory)
    kb = memory.kb_dir
    fanned = fanned_out(kb)
    batch_keys: dict[str, str] = {}  # content key -> id written by this import
    vectors: list[tuple[str, np.ndarray]] = []
    threshold = dedup_threshold(memory.cfg.embedder)
    used: set[str] = set()
    uses_new_scope = False
    for section in sections:
        old_id = existing.get(section.origin)
        key = content_key(section.title, section.body)
        old: Entry | None = None
        old_path: Path | None = None
        if old_id is not None:
            old_path, old = load_writable(memory, old_id)
            before = (content_key(old.title, old.body), old.type, sorted(old.tags))
            if before == (key, section.type, sorted(section.tags)):
                plan.actions.append(Action("unchanged", section, old_id=old_id))
                continue
        if old_id is None and key in retired.get(section.origin, {}):
            plan.actions.append(Action("unchanged", section, old_id=retired[section.origin][key]))
            continue  # superseded or archived since: the same text is not brought back
        where = old.scope if old is not None and scope is None else name
        if key in batch_keys:
            plan.actions.append(
                Action(
                    "duplicate",
                    section,
                    duplicate={
                        "duplicate_of": batch_keys[key],
                        "match": "exact",
                        "score": 1.0,
                        "within": "this import",
                    },
                )
            )
            continue
        duplicate = find_duplicate(
            memory, section.title, section.body, {old_id} if old_id else set(), where
        )
        if duplicate is not None:
            plan.actions.append(Action("duplicate", section, duplicate=duplicate))
            continue
        vector = _vector(memory, section)
        near = max(((float(vector @ v), i) for i, v in vectors), default=None)
        if near is not None and near[0] >= threshold:
            plan.actions.append(
                Action(
                    "duplicate",
                    section,
                    duplicate={
                        "duplicate_of": near[1],
                        "match": "near",
                        "score": round(near[0], 4),
                        "within": "this import",
                    },
                )
            )
            continue
        extra: dict[str, Any] = {"source": section.origin}
        if where != "global":
            extra["scope"] = where
        if old is not None:
            extra["supersedes"] = [old.id]
        try:
            entry = new_entry(
                memory, section.title, section.body, section.type, section.tags, **extra
            )
        except Invalid as exc:
            plan.actions.append(Action("skipped", section, reason=exc.message))
            continue
        entry.id = make_id(id_seed(section, where), lambda i: i in used or name_taken(kb, i))
        used.add(entry.id)
        path = entry_path(kb, entry.type, entry.id, fanned)
        check_target(kb, path)
        plan.files[path] = render_entry(entry)
        if old is not None and old_path is not None:
            check_target(kb, old_path)
            check_committed(repo, old_path)
            old.status = "superseded"
            old.extra.update(superseded_by=entry.id, superseded_at=entry.created)
            plan.files[old_path] = render_entry(old)
        uses_new_scope |= where == name
        batch_keys[key] = entry.id
        vectors.append((entry.id, vector))
        plan.actions.append(Action("supersede" if old else "new", section, entry, old_id))
    if new_map is not None and uses_new_scope:  # the project's first entries: its name too
        check_committed(repo, kb / MAP_FILE)
        plan.files[kb / MAP_FILE] = new_map
    files = {_file_of(s.origin) for s in sections}
    origins = {s.origin for s in sections}
    plan.gone = sorted(i for o, i in existing.items() if _file_of(o) in files and o not in origins)
    return plan


def _vector(memory: Memory, section: Section) -> np.ndarray:
    """The first chunk's dense vector, normalised (the measure `write.dedup.nearest` uses)."""
    doc = Document("new", section.title, section.body)
    chunk = chunk_document(doc, int(memory.cfg.max_chars))[0]
    vector = np.asarray(memory.embedder.embed_documents([chunk.text])[0].dense, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector
