"""Scopes in the knowledge base: the map from a project's short name to its identity.

An entry's `scope:` is `global` (also when absent) or a short name, such as `alpha`; the one
file `kb/projects.yaml` maps each name to the project's full identity
(`memory_agent.intake.projects`), so the KB carries it wherever it goes:

    # memory-agent: the projects entries are scoped to (`scope: <name>` -> identity)
    alpha: github.com/acme/alpha
    notes: /home/me/notes

A name is given the first time an entry is written into a project (the last part of its
identity, then `<owner>-<name>`, then `<name>-2`...) and written in the same commit as that
entry. A name is never reused for another identity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from memory_agent.errors import Invalid
from memory_agent.intake.projects import GLOBAL, short_name
from ragcore import load_yaml

__all__ = ["MAP_FILE", "ScopeMap", "check_scope", "project_named", "resolve", "search_scopes"]

MAP_FILE = "projects.yaml"
HEADER = "# memory-agent: the projects entries are scoped to (`scope: <name>` -> identity)\n"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,58}[a-z0-9]$|^[a-z0-9]$")
KEYWORDS = ("project", "all")  # what `scope` on a search means besides a name
# The map is read by the bounded YAML reader (`ragcore.load_yaml`: no alias, no bomb), with
# room for thousands of projects.
MAP_BOUNDS = {"max_bytes": 1_000_000, "max_nodes": 200_000, "max_seconds": 20.0}


def check_scope(value: object) -> str | None:
    """The problem with an entry's `scope:` value, or None."""
    if value == GLOBAL:
        return None
    if not isinstance(value, str) or not NAME_RE.match(value) or value in KEYWORDS:
        return (
            f"scope: {value!r} is not a scope; use global or a project's short name from "
            f"kb/{MAP_FILE}, such as alpha"
        )
    return None


_READ: dict[Path, tuple[tuple[int, int, int], dict[str, str]]] = {}  # file -> (stat, names)


@dataclass
class ScopeMap:
    """The names in `kb/projects.yaml` (name -> identity), as read."""

    names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, kb_dir: Path) -> ScopeMap:
        """The map as the file holds it now (a copy: callers may add to it). Every search
        asks: the parsed map is kept while the file's stat is unchanged."""
        path = kb_dir / MAP_FILE
        try:
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        cached = _READ.get(path)
        if cached is not None and stamp is not None and cached[0] == stamp:
            return cls(dict(cached[1]))
        found = cls._parse(path, kb_dir)
        if stamp is not None:
            _READ[path] = (stamp, dict(found.names))
        return found

    @classmethod
    def _parse(cls, path: Path, kb_dir: Path) -> ScopeMap:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except (OSError, UnicodeDecodeError) as exc:
            raise Invalid(f"{path} cannot be read ({exc})", f"fix or restore {path}") from exc
        try:
            data = load_yaml(text, **MAP_BOUNDS) or {}
        except (yaml.YAMLError, ValueError) as exc:  # (ValueError: over a bound, an alias)
            raise Invalid(
                f"{path} is not valid YAML ({exc})",
                f"fix it by hand (one `name: identity` a line) or `git -C {kb_dir} checkout -- "
                f"{MAP_FILE}`",
            ) from exc
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and check_scope(k) is None
            for k, v in data.items()
        ):
            raise Invalid(
                f"{path} must map short names to project identities, one `name: identity` a line",
                f"fix it by hand or `git -C {kb_dir} checkout -- {MAP_FILE}`",
            )
        return cls(dict(data))

    def name_of(self, identity: str) -> str | None:
        for name, known in self.names.items():
            if known == identity:
                return name
        return None

    def identity_of(self, name: str) -> str | None:
        return self.names.get(name)

    def allocate(self, identity: str) -> str:
        """The name for `identity`: its own if it has one, else a new one (added here)."""
        name = self.name_of(identity)
        if name is not None:
            return name
        base = short_name(identity)
        parts = [p for p in re.split(r"[/\\]+", identity) if p]
        candidates = [base]
        if len(parts) >= 2:
            candidates.append(short_name(f"{parts[-2]}-{parts[-1]}"))
        candidates += [f"{base}-{n}" for n in range(2, 1000)]
        name = next(c for c in candidates if c not in self.names and check_scope(c) is None)
        self.names[name] = identity
        return name

    def render(self) -> str:
        lines = [
            yaml.safe_dump({k: v}, allow_unicode=True, width=1000).strip()
            for k, v in sorted(self.names.items())
        ]
        return HEADER + "".join(line + "\n" for line in lines)


def resolve(value: str | None, identity: str | None, kb_dir: Path) -> tuple[str, str | None]:
    """The scope an entry is written into: (`global` or a name, the map file's new text if the
    name is new). `value`: None or "project" (the session's project, `identity`; global
    outside one), "global", a name from the map, or a project identity."""
    if value is not None and not isinstance(value, str):
        raise Invalid(f"scope: {value!r} is not text", "pass project, global or a project name")
    if value in (None, "", "project"):
        if identity is None:
            return GLOBAL, None
        value = identity
    if value == GLOBAL:
        return GLOBAL, None
    known = ScopeMap.read(kb_dir)
    if value in known.names:
        return value, None
    if "/" in value or "\\" in value:  # an identity: named by its first entry, once
        name = known.name_of(value)
        if name is not None:
            return name, None
        name = known.allocate(value)
        return name, known.render()
    names = ", ".join(sorted(known.names)) or "none yet"
    raise Invalid(
        f"scope: {value!r} is not a project this memory knows (names: {names})",
        "pass project (this session's), global, one of the names, or a project's identity "
        "such as github.com/acme/alpha (`memory-agent project` prints this one's)",
    )


def search_scopes(value: str | None, identity: str | None, kb_dir: Path) -> tuple[str, ...] | None:
    """The scopes a search reads (None: all). `value`: None or "project" - the session's
    project (`identity`) and global; "global" alone; "all"; or a project (a name from the
    map, or an identity) and global. A project is matched by its name (entries) and its
    identity (episodes, corpora)."""
    if value is not None and not isinstance(value, str):
        raise Invalid(f"scope: {value!r} is not text", "pass project, global, all or a name")
    if value == "all":
        return None
    if value == GLOBAL:
        return (GLOBAL,)
    known = ScopeMap.read(kb_dir)
    if value in (None, "", "project"):
        if identity is None:
            return (GLOBAL,)
        name = known.name_of(identity)
        return (GLOBAL, identity) + ((name,) if name else ())
    if value in known.names:
        return (GLOBAL, value, known.names[value])
    if "/" in value or "\\" in value:
        name = known.name_of(value)
        return (GLOBAL, value) + ((name,) if name else ())
    names = ", ".join(sorted(known.names)) or "none yet"
    raise Invalid(
        f"scope: {value!r} is not a project this memory knows (names: {names})",
        "pass project (this session's and global), global, all, one of the names, or a "
        "project's identity such as github.com/acme/alpha",
    )


def project_named(where: str | None, kb_dir: Path, projects) -> str | None:
    """The identity of the project a call is made from. `where`: a directory (its project,
    by `projects.of`; None outside a repository), a name from the map, or an identity."""
    import os

    if not where:
        return None
    if os.path.isabs(where) and os.path.isdir(where):
        found = projects.of(where)
        return found.identity if found is not None else None
    if GLOBAL == where:
        return None
    known = ScopeMap.read(kb_dir)
    if where in known.names:
        return known.names[where]
    if "/" in where or "\\" in where:
        return where
    names = ", ".join(sorted(known.names)) or "none yet"
    raise Invalid(
        f"project: {where!r} is neither a folder nor a project this memory knows (names: {names})",
        "name a folder inside the project's repository, a name, or an identity such as "
        "github.com/acme/alpha",
    )
