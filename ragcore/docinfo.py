"""What the index holds about one document (`DocInfo`): its manifest entry, the metadata the
filters and the ranking read, and the entities it names."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["DocInfo"]


@dataclass(frozen=True)
class DocInfo:
    """What the index holds about one document."""

    id: str
    title: str
    source: str
    path: str | None
    writable: bool
    links: list[str]
    meta: dict[str, Any]  # type, tags, status, created, ... as the document's frontmatter says
    hash: str = ""
    chunks: int = 0
    stamp: str | None = None
    entities: tuple[str, ...] = ()  # names it mentions (ragcore.entities), derived at indexing

    @property
    def status(self) -> str:
        return str(self.meta.get("status") or "active")

    @property
    def type(self) -> str:
        return str(self.meta.get("type") or "note")

    @property
    def scope(self) -> str:
        """`global`, or the project (a name or an identity) the document belongs to."""
        return str(self.meta.get("scope") or "global")

    @property
    def tags(self) -> list[str]:
        tags = self.meta.get("tags") or []
        return [tags] if isinstance(tags, str) else [str(t) for t in tags]

    def payload(self) -> dict[str, Any]:
        """The document as a flat dict: doc_id, title, source, path, writable, links and the
        metadata (status and type always present)."""
        out: dict[str, Any] = dict(self.meta)
        out.update(
            doc_id=self.id,
            title=self.title,
            source=self.source,
            path=self.path,
            writable=self.writable,
            links=list(self.links),
            status=self.status,
            type=self.type,
            scope=self.scope,
            tags=self.tags,
        )
        return out

    def as_info(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "path": self.path,
            "writable": self.writable,
            "links": self.links,
            "meta": self.meta,
            "entities": list(self.entities),
        }

    def as_row(self) -> list[Any]:
        """The fields but `entities` in order, as JSON values (a saved read model stores these;
        the entities go into a name table)."""
        return [
            self.id,
            self.title,
            self.source,
            self.path,
            self.writable,
            self.links,
            self.meta,
            self.hash,
            self.chunks,
            self.stamp,
        ]

    @classmethod
    def from_row(cls, row: list[Any], entities: tuple[str, ...]) -> DocInfo:
        """The inverse of `as_row`. Fills the instance's fields directly: at 100,000 documents
        the frozen dataclass's `__init__` (a checked `object.__setattr__` per field) is half
        of a saved read model's open."""
        info = object.__new__(cls)
        values = info.__dict__
        values.update(zip(_ROW_FIELDS, row, strict=True))
        values["entities"] = entities
        return info


_ROW_FIELDS = tuple(f.name for f in fields(DocInfo) if f.name != "entities")
