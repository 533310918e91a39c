"""The knowledge bases of one home: the personal one (`<home>/kb`) and the others a person
added (`memory-agent kb add team URL`), each a git clone at `<home>/kbs/<name>/` with its own
remote (docs/adr/0017-team-kb.md).

    <home>/kbs.json   [{"name": "team", "writable": true}]   the registry (no URL: git has it)

Ids: an entry of the personal KB keeps its bare id (`use-uv`, also `personal:use-uv`); an entry
of another KB is `<name>:<id>` (`team:use-uv`) wherever the tools name it. The index's source
of a KB's documents is `kb` (personal) or `kb:<name>`: one keyword field that filters by KB,
pushed down to Qdrant like every other filter field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_agent.errors import ConfigError, Invalid, NotFound, ReadOnly
from ragcore import Document

__all__ = [
    "KB_SOURCE",
    "PERSONAL",
    "REGISTRY",
    "KbPlace",
    "Registry",
    "is_kb_source",
    "kb_of_source",
    "split_id",
]

KB_SOURCE = "kb"  # the index's source of the personal KB's documents
PERSONAL = "personal"
REGISTRY = "kbs.json"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}[a-z0-9]$|^[a-z0-9]$")
RESERVED = {PERSONAL, "kb", "kbs", "episodes", "all"}


def is_kb_source(source: Any) -> bool:
    """True for the source of a KB's documents (`kb`, `kb:<name>`), not a corpus or episodes."""
    return isinstance(source, str) and (source == KB_SOURCE or source.startswith(KB_SOURCE + ":"))


def kb_of_source(source: Any) -> str | None:
    """The KB name of a document's source (`personal`, `team`), None for a corpus or episode."""
    if source == KB_SOURCE:
        return PERSONAL
    if is_kb_source(source):
        return source.split(":", 1)[1]
    return None


def split_id(entry_id: str) -> tuple[str, str]:
    """(KB name, id inside it) of a tool's id: `team:x` -> (team, x); `x` and `personal:x`
    -> (personal, x). An id with a `/` (a corpus file, an episode) is left whole, personal."""
    if "/" in entry_id or ":" not in entry_id:
        return PERSONAL, entry_id
    name, _, rest = entry_id.partition(":")
    return name, rest


@dataclass(frozen=True)
class KbPlace:
    """One knowledge base of the home."""

    name: str
    dir: Path
    writable: bool = True
    run_dir: Path | None = None  # its own run files (intents, the remote's record)

    @property
    def personal(self) -> bool:
        return self.name == PERSONAL

    @property
    def source(self) -> str:
        return KB_SOURCE if self.personal else f"{KB_SOURCE}:{self.name}"

    def qualify(self, entry_id: str) -> str:
        """The id the tools and the index use for an entry of this KB (an id that names this
        KB already is kept)."""
        if self.personal or entry_id.startswith(f"{self.name}:"):
            return entry_id
        return f"{self.name}:{entry_id}"

    def local(self, entry_id: str) -> str:
        """The id inside this KB's files of a tool's id (which may name this KB)."""
        name, rest = split_id(entry_id)
        return rest if name == self.name else entry_id

    def qualify_ids(self, ids: Any) -> Any:
        """Ids as this KB's files hold them (one, a list, or None), as the tools name them."""
        if isinstance(ids, list):
            return [self.qualify(str(i)) for i in ids]
        return self.qualify(str(ids)) if ids else ids

    def indexed(self, doc: Document) -> Document:
        """An entry of this (non-personal) KB as the index holds it: id `<name>:<id>`, source
        `kb:<name>`, `supersedes`/`superseded_by` and typed links qualified the same way, and
        its scope - a name in this KB's own projects.yaml - as the project's identity, which
        every search from that project reads (docs/adr/0017-team-kb.md)."""
        from memory_agent.kb.scopes import ScopeMap

        meta = dict(doc.meta, kb=self.name)
        for key in ("supersedes", "superseded_by"):
            if meta.get(key):
                meta[key] = self.qualify_ids(meta[key])
        if isinstance(meta.get("links"), dict):
            meta["links"] = {
                k: self.qualify_ids(v) if isinstance(v, list) else v
                for k, v in meta["links"].items()
            }
        scope = meta.get("scope")
        if scope and scope != "global":
            meta["scope"] = ScopeMap.read(self.dir).identity_of(scope) or self.qualify(scope)
        return Document(
            self.qualify(doc.id), doc.title, doc.body, meta, self.source, doc.path, stamp=doc.stamp
        )

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.dir), "writable": self.writable}


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name) or name in RESERVED:
        raise Invalid(
            f"kb: {name!r} is not a name for a knowledge base",
            "use 1-32 characters of a-z, 0-9 and '-' (not "
            f"{', '.join(sorted(RESERVED))}), such as team",
        )
    return name


class Registry:
    """`<home>/kbs.json`, read again only when its stat changed."""

    def __init__(self, home: Path):
        self.home = home
        self.path = home / REGISTRY
        self._read_as: tuple[tuple[int, int] | None, list[dict[str, Any]]] = (None, [])

    @property
    def clones(self) -> Path:
        return self.home / "kbs"

    def stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _read(self) -> list[dict[str, Any]]:
        stamp = self.stamp()
        if stamp is None:
            return []
        seen, rows = self._read_as  # one assignment: threads see a stamp with its rows
        if stamp == seen:
            return rows
        try:
            rows = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{self.path}: not valid JSON ({exc})",
                "fix it by hand (a list of {name, writable}) or remove it and "
                "`memory-agent kb add` again",
            ) from exc
        if not isinstance(rows, list) or not all(
            isinstance(r, dict) and isinstance(r.get("name"), str) for r in rows
        ):
            raise ConfigError(f"{self.path}: must be a list of {{name, writable}} objects")
        self._read_as = (stamp, rows)
        return rows

    def place(self, row: dict[str, Any]) -> KbPlace:
        name = row["name"]
        return KbPlace(
            name,
            self.clones / name,
            bool(row.get("writable", True)),
            self.home / "run" / "kbs" / name,
        )

    def personal(self) -> KbPlace:
        return KbPlace(PERSONAL, self.home / "kb", True, self.home / "run")

    def others(self) -> list[KbPlace]:
        """The KBs a person added, in the order they were added."""
        return [
            self.place(r)
            for r in self._read()
            if NAME_RE.match(r["name"]) and r["name"] not in RESERVED  # a hand edit's slip
        ]

    def all(self) -> list[KbPlace]:
        return [self.personal(), *self.others()]

    def get(self, name: str | None) -> KbPlace:
        """The KB named `name` (None or `personal`: the personal one); `NotFound` naming
        `memory-agent kb list` for an unknown name."""
        if name in (None, "", PERSONAL):
            return self.personal()
        for place in self.others():
            if place.name == name:
                return place
        names = ", ".join(p.name for p in self.all())
        raise NotFound(
            f"kb: no knowledge base named {name!r} in this home (there are: {names})",
            "`memory-agent kb list` shows them; `memory-agent kb add NAME URL` adds one",
        )

    def writable(self, name: str | None) -> KbPlace:
        place = self.get(name)
        if not place.writable:
            raise ReadOnly(
                f"kb: {place.name} was added read-only; nothing is written to it",
                f"write to another KB (kb=personal), or `memory-agent kb remove {place.name}` "
                f"and `memory-agent kb add {place.name} URL` without --read-only",
            )
        return place

    def save(self, rows: list[dict[str, Any]]) -> None:
        from ragcore import atomic_write

        atomic_write(self.path, json.dumps(rows, indent=1) + "\n", mode=0o600)
        self._read_as = (None, [])

    def add(self, name: str, writable: bool) -> None:
        rows = [r for r in self._read() if r["name"] != name]
        self.save([*rows, {"name": name, "writable": writable}])

    def remove(self, name: str) -> None:
        self.save([r for r in self._read() if r["name"] != name])
