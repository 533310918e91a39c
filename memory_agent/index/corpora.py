"""Read-only corpora: Markdown from the user's project repositories, listed in `repos.json`.

    [{"label": "agent-infra", "path": "/home/me/src/agent-infra",
      "include": ["docs/**", "*.md"], "exclude": ["docs/archive/**"], "scope": "global"}]

`scope` (default `global`: a corpus exists to be searched from anywhere) may be `project` (the
project the corpus's folder is in, by its identity), a project's short name or an identity:
then its documents are found only from that project (or with `scope: all`).

Ids are `<label>/<relative path>`, so two repositories' README.md stay apart. Only `.md` files;
hidden folders, `.git`, `node_modules`, `outputs`, build and cache folders are never read. One
rule (`ragcore.PathRule`, gitignore semantics) decides both what a scan reads and which ids
`memory_get` serves. A corpus whose root
is missing or unreadable is reported as unavailable and its indexed entries are kept (never
silently dropped); entries of a corpus can never be superseded or archived.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memory_agent.errors import CorpusError
from memory_agent.intake.projects import GLOBAL, identify
from ragcore import Document, PathRule, load_markdown

__all__ = ["Corpus", "CorpusError", "corpus_files", "load_corpora", "load_corpus_document"]

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RESERVED_LABELS = {"kb", "episodes"}


@dataclass(frozen=True)
class Corpus:
    label: str
    path: Path
    include: tuple[str, ...] = ("*.md",)
    exclude: tuple[str, ...] = ()
    scope: str = GLOBAL
    rule: PathRule = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule", PathRule(self.include, self.exclude))

    def contains(self, rel: str) -> bool:
        """True for a path the corpus serves: what a scan of it would read, nothing else."""
        return self.rule.matches(rel)

    def resolve(self, rel: str) -> Path | None:
        """The file of `rel` if a scan of the corpus would read it (regular, inside the root)."""
        return self.rule.resolve(self.path, rel)

    @property
    def available(self) -> bool:
        return self.path.is_dir() and os.access(self.path, os.R_OK | os.X_OK)


def load_corpora(repos_file: Path) -> list[Corpus]:
    """Parse repos.json; a missing file means no corpora."""
    if not repos_file.is_file():
        return []
    try:
        rows = json.loads(repos_file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{repos_file}: not valid JSON ({exc}); see repos.example.json") from exc
    if not isinstance(rows, list):
        raise CorpusError(f"{repos_file}: must be a JSON list of {{label, path}} objects")
    corpora, seen = [], set()
    for i, row in enumerate(rows):
        where = f"{repos_file} entry {i}"
        if not isinstance(row, dict) or "label" not in row or "path" not in row:
            raise CorpusError(f'{where}: needs "label" and "path"')
        label = row["label"]
        if not isinstance(label, str) or not LABEL_RE.match(label) or label in RESERVED_LABELS:
            raise CorpusError(
                f"{where}: label {label!r} must be letters, digits, '.', '_' or '-' "
                f"(and not {', '.join(sorted(RESERVED_LABELS))})"
            )
        if label in seen:
            raise CorpusError(f"{where}: label {label!r} is used twice; labels keep ids apart")
        seen.add(label)
        include = row.get("include") or ["*.md"]
        exclude = row.get("exclude") or []
        if not all(isinstance(p, str) for p in [*include, *exclude]):
            raise CorpusError(f"{where}: include and exclude are lists of glob patterns")
        path = Path(os.path.expanduser(str(row["path"])))
        scope = row.get("scope", GLOBAL)
        if not isinstance(scope, str) or not scope.strip():
            raise CorpusError(
                f"{where}: scope must be global, project, a project's name or its identity"
            )
        if scope == "project":  # the repository the corpus lives in
            project = identify(path)
            scope = project.identity if project is not None else GLOBAL
        corpora.append(Corpus(label, path, tuple(include), tuple(exclude), scope.strip()))
    return corpora


def corpus_files(corpus: Corpus) -> Iterator[tuple[str, Path]]:
    """(relative path, absolute path) of every Markdown file the corpus serves."""
    return corpus.rule.scan(corpus.path)


def load_corpus_document(corpus: Corpus, rel: str, full: Path) -> Document:
    """One corpus file as a read-only document (id `<label>/<rel>`); raises `DocumentError`."""
    doc = load_markdown(full, f"{corpus.label}/{rel}", source=corpus.label)
    meta = {k: v for k, v in doc.meta.items() if k in ("tags", "type", "created")}
    meta["status"] = "active"
    if corpus.scope != GLOBAL:
        meta["scope"] = corpus.scope
    if not isinstance(meta.get("type"), str):
        meta["type"] = "note"
    return Document(doc.id, doc.title, doc.body, meta, doc.source, doc.path)
