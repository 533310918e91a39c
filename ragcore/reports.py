"""What a build, a prepared generation and a refresh of the index report (`ragcore.index`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BuildReport", "Prepared", "RefreshReport"]


@dataclass
class BuildReport:
    generation: str
    documents: int
    chunks: int
    embedded: int
    seconds: float
    removed_generations: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    """A generation written and checked, not yet live."""

    generation: str
    documents: int
    chunks: int
    seconds: float


@dataclass
class RefreshReport:
    generation: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    chunks_embedded: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)
