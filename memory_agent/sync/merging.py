"""Merging one replayed file into upstream's tree by what it means (a sync's replay,
`memory_agent.sync.remote`). Deterministic, nothing lost, no conflict marker ever written:

- the same change on both sides, or a file only this side changed: taken as is;
- the same new id created on both sides with different content (in one type folder or in
  two: `fact/x.md` and `note/x.md`): both kept, this side's under a new id (`<id>-2`...), and
  every later link of this side's to it rewritten; reported;
- supersede and supersede of one entry: both successors stay active and the old entry's
  `superseded_by` lists both - a fork, reported for a person to resolve;
- supersede and archive of one entry: it ends superseded, the archive's reason and time kept
  in its lifecycle fields; reported;
- hand edits of one entry's text on both sides: upstream's text stays in place and this side's
  is kept as a variant, `kb/variants/<id>.<machine>.md`, which the index does not serve
  (`status` lists it);
- the project map (`projects.yaml`): both sides' names kept;
- a file that is not UTF-8 text on any side (a PNG, a note saved as UTF-16): carried as bytes,
  never decoded - taken as is when only this side changed it, else upstream's stays and this
  side's is kept as a variant (`kb/variants/<name>.<machine><suffix>`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from memory_agent.errors import Invalid
from memory_agent.kb.entries import (
    Entry,
    ValidationError,
    make_id,
    parse_entry,
    render_entry,
)
from memory_agent.kb.files import entry_of, entry_places, name_taken, renamed_place
from memory_agent.kb.scopes import HEADER, MAP_BOUNDS, MAP_FILE
from ragcore import load_yaml

__all__ = ["VARIANTS", "Merge"]

VARIANTS = "variants"  # kb/variants/: a side's text kept, not served
CONTENT = ("title", "type", "body", "tags", "links", "scope", "source", "episodes")
RANK = {"active": 0, "archived": 1, "superseded": 2}


def _content(e: Entry) -> tuple:
    return (
        e.title,
        e.type,
        e.body.strip(),
        sorted(e.tags),
        e.extra.get("links"),
        e.scope,
        e.extra.get("source"),
        e.extra.get("episodes"),
    )


def _utf8(data: bytes | None) -> str | None:
    """`data` as text when it is UTF-8 (None when it is not, or absent)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _as_list(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


class Merge:
    def __init__(self, tree: Path, machine: str):
        self.tree = tree
        self.machine = re.sub(r"[^a-z0-9-]+", "-", machine.lower()).strip("-") or "machine"
        self.renames: dict[str, str] = {}  # this side's id -> the id it is replayed under
        self.forks: list[dict[str, Any]] = []
        self.variants: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []

    def renamed_report(self) -> list[dict[str, str]]:
        return [{"id": old, "replayed_as": new} for old, new in self.renames.items()]

    def order(self, listed: list[str]) -> list[tuple[str, str]]:
        """(status, path) of a replayed commit's files (`git diff-tree -z --name-status`'s
        fields) in the order they are applied: deletions, then the additions that may be
        twins (their id is in upstream's tree), then the other additions, then the rest - a
        move between type folders is not a twin of the file it moves, and a twin is renamed
        before any other file of the commit that names it (a new successor, a link) is
        written or merged."""

        def rank(pair: tuple[str, str]) -> int:
            status, name = pair
            if status == "A":
                twin = self._taken_elsewhere(name)
                return 1 if twin else 2
            return 0 if status == "D" else 3

        return sorted(zip(listed[0::2], listed[1::2], strict=True), key=rank)

    # -- one file of one replayed commit ------------------------------------------------------
    def apply_bytes(self, name: str, before: bytes | None, after: bytes | None) -> list[str]:
        """`apply` for a file as git holds it: UTF-8 text on every side (this side's before
        and after, upstream's now) is merged by meaning; anything else is carried as bytes."""
        name = self._placed(name, before is not None)
        path = self._unlinked(self._renamed(name, None))
        theirs = path.read_bytes() if path.is_file() else None
        sides = (before, after, theirs)
        texts = [_utf8(data) for data in sides]
        if all(t is not None or d is None for t, d in zip(texts, sides, strict=True)):
            return self.apply(name, texts[0], texts[1])
        return self._apply_raw(self._renamed(name, None), before, after, theirs)

    def _apply_raw(
        self, name: str, before: bytes | None, after: bytes | None, theirs: bytes | None
    ) -> list[str]:
        """This side's change of a file that is not text, applied byte for byte."""
        if after == theirs:
            return []
        if after is None:  # deleted on this side: only if upstream still has what it deleted
            if theirs == before and theirs is not None:
                self._unlinked(name).unlink()
                return [name]
            return []
        if theirs is None or theirs == before:
            self._write(name, after)
            return [name]
        return self._variant(name, after, "both sides changed it")

    def apply(self, name: str, before: str | None, after: str | None) -> list[str]:
        """Apply this side's change of `name` (`before` -> `after`; None: absent) to the tree;
        the paths (relative to the tree) it wrote."""
        name = self._placed(name, before is not None)
        name, before, after = self._renamed(name, before), self._relink(before), self._relink(after)
        path = self._unlinked(name)
        theirs = _utf8(path.read_bytes()) if path.is_file() else None  # (bytes kept: \r\n)
        if after == theirs:
            return []
        if after is None:  # deleted on this side: only if upstream still has what it deleted
            if theirs == before and path.exists():
                path.unlink()
                return [name]
            return []
        if before is None and theirs is None and self._taken_elsewhere(name):
            try:  # the same new id under another type folder upstream: a twin all the same
                return self._rename(name, after, parse_entry(after, name))
            except ValidationError:
                return self._variant(name, after, "its id is taken in another type folder")
        if theirs is None or theirs == before:
            self._write(name, after)
            return [name]
        if name == MAP_FILE:
            return self._merge_map(theirs, after)
        if not self._is_entry(name):
            return self._variant(name, after, "both sides changed it")
        try:
            ours = parse_entry(after, name)
            upstream = parse_entry(theirs, name)
        except ValidationError:
            return self._variant(name, after, "both sides changed it; one side is not valid")
        if before is None:  # the same new id on both sides
            return self._rename(name, after, ours)
        try:
            base = parse_entry(before, name)
        except ValidationError:
            base = None
        same_text = _content(ours) == _content(upstream)
        if (
            not same_text
            and base is not None
            and _content(base)
            not in (
                _content(ours),
                _content(upstream),
            )
        ):
            return self._variant(name, after, "both sides edited the text")
        text_from = upstream if (base is None or _content(upstream) != _content(base)) else ours
        merged = self._lifecycle(text_from, ours, upstream)
        self._write(name, render_entry(merged))
        return [name]

    # -- helpers ------------------------------------------------------------------------------
    def _is_entry(self, name: str) -> bool:
        return entry_of(name) is not None

    def _placed(self, name: str, existed: bool) -> str:
        """Where the tree holds an entry this side changed or removed (`existed`): its own
        place, or - moved upstream by a fan-out (ADR 0031) - the other layout's place."""
        found = entry_of(name)
        if not existed or found is None or os.path.lexists(self.tree / name):
            return name
        for place in entry_places(self.tree, *found):
            if place.is_file() and not place.is_symlink():
                return place.relative_to(self.tree).as_posix()
        return name

    def _taken_elsewhere(self, name: str) -> bool:
        """Whether the entry file `name` (not in the tree) has its id in another place (another
        type folder, or the other layout: `kb.files.entry_places`)."""
        found = entry_of(name)
        return found is not None and name_taken(self.tree, found[1])

    def _unlinked(self, name: str) -> Path:
        """The tree's path of `name`, refused (`Invalid`) when it or a folder on the way is a
        symbolic link upstream brought in: never read, written or removed through one (it
        may point anywhere on this machine)."""
        at = self.tree
        for part in name.split("/"):
            at = at / part
            if at.is_symlink():
                link = str(at.relative_to(self.tree))
                raise Invalid(
                    f"sync: upstream's kb/{link} is a symbolic link, and this machine's commits "
                    f"write kb/{name} through it; a link in the KB is never followed, so "
                    "nothing was pulled or pushed (every local commit is kept)",
                    f"replace the link in the shared repository by a folder or file (`git rm "
                    f"{link}`, commit and push, in any clone of it), then `memory-agent sync`",
                )
        return at

    def _write(self, name: str, data: str | bytes) -> None:
        path = self._unlinked(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    def _renamed(self, name: str, text: str | None) -> str:
        if not self._is_entry(name):
            return name
        old = entry_of(name)[1]  # type: ignore[index]  # (an entry: `_is_entry`)
        return renamed_place(name, self.renames[old]) if old in self.renames else name

    def _relink(self, text: str | None) -> str | None:
        """This side's text with the ids it renamed rewritten (its id, its links, its
        supersede fields, its [[wikilinks]])."""
        if text is None or not self.renames:
            return text
        for old, new in self.renames.items():
            text = re.sub(rf"(?<![\w-]){re.escape(old)}(?![\w-])", new, text)
        return text

    def _rename(self, name: str, text: str, ours: Entry) -> list[str]:
        new_id = make_id(ours.id, lambda i: name_taken(self.tree, i) or i == ours.id)
        old = ours.id
        self.renames[old] = new_id
        new_name = renamed_place(name, new_id)
        self._write(new_name, self._relink(text) or "")  # its id (and links to it) rewritten
        self.notes.append({"id": old, "replayed_as": new_id})
        return [new_name]

    def _variant(self, name: str, text: str | bytes, why: str) -> list[str]:
        stem, suffix = Path(name).stem, Path(name).suffix  # (`x.md`: x, .md)
        variant = f"{VARIANTS}/{stem}.{self.machine}{suffix}"
        n = 2
        while (self.tree / variant).exists():
            variant = f"{VARIANTS}/{stem}.{self.machine}-{n}{suffix}"
            n += 1
        self._write(variant, text)
        self.variants.append({"path": name, "variant": variant, "why": why})
        return [variant]

    def _merge_map(self, theirs: str, ours: str) -> list[str]:
        def names(text: str) -> dict[str, str] | None:
            try:
                data = load_yaml(text, **MAP_BOUNDS) or {}
            except (yaml.YAMLError, ValueError):  # (ValueError: over a bound, an alias)
                return None
            if not isinstance(data, dict) or not all(
                isinstance(v, (str, int, float)) for v in data.values()
            ):
                return None
            return {str(k): str(v) for k, v in data.items()}

        merged, mine = names(theirs), names(ours)
        if merged is None or mine is None:  # not a map of names: both kept, a person decides
            return self._variant(MAP_FILE, ours, "both sides changed it; one side is not valid")
        for name, identity in mine.items():
            if merged.get(name, identity) == identity:
                merged[name] = identity
            else:  # one name, two projects: upstream keeps it, this side's is kept aside
                self.variants.append(
                    {
                        "path": MAP_FILE,
                        "variant": MAP_FILE,
                        "why": f"name {name} maps to two projects",
                    }
                )
        lines = [
            yaml.safe_dump({k: v}, allow_unicode=True, width=1000).strip()
            for k, v in sorted(merged.items())
        ]
        self._write(MAP_FILE, HEADER + "".join(line + "\n" for line in lines))
        return [MAP_FILE]

    def _lifecycle(self, text_from: Entry, ours: Entry, upstream: Entry) -> Entry:
        """`text_from`'s text with both sides' lifecycle: supersede + supersede is a fork,
        supersede + archive ends superseded with the archive kept."""
        merged = Entry(
            text_from.id,
            text_from.title,
            text_from.type,
            upstream.status,
            upstream.created,
            text_from.body,
            list(text_from.tags),
            dict(text_from.extra),
        )
        a, b = upstream, ours
        for key in (
            "superseded_by",
            "superseded_at",
            "archived_at",
            "archive_reason",
            "supersedes",
        ):
            merged.extra.pop(key, None)
        successors = sorted(
            set(_as_list(a.extra.get("superseded_by")))
            | set(_as_list(b.extra.get("superseded_by")))
        )
        supersedes = sorted(
            set(_as_list(a.extra.get("supersedes"))) | set(_as_list(b.extra.get("supersedes")))
        )
        if supersedes:
            merged.extra["supersedes"] = supersedes
        merged.status = max((a.status, b.status), key=lambda s: RANK.get(s, 0))
        if successors:
            merged.status = "superseded"
            merged.extra["superseded_by"] = successors[0] if len(successors) == 1 else successors
            merged.extra["superseded_at"] = min(
                str(x) for x in (a.extra.get("superseded_at"), b.extra.get("superseded_at")) if x
            )
            if len(successors) > 1:
                self.forks.append({"id": merged.id, "successors": successors})
        archived = [e for e in (a, b) if e.extra.get("archived_at")]
        if archived:
            merged.extra["archived_at"] = archived[0].extra["archived_at"]
            merged.extra["archive_reason"] = archived[0].extra.get("archive_reason", "")
            if successors:
                self.notes.append({"id": merged.id, "superseded_and_archived": True})
        return merged
