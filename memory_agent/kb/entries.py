"""Knowledge-base entries: the schema, validation, ids, and reading and writing entry files.

An entry is `kb/<type>/<id>.md`: YAML frontmatter, then a Markdown body.

    ---
    id: qdrant-local-mode-single-process
    title: Qdrant local mode allows one process per path
    type: pitfall
    status: active
    created: 2026-05-02T10:15:00Z
    tags: [search, qdrant]
    ---
    The client takes an exclusive file lock ...

Required: id, title, type, status, created. Lifecycle: supersedes, superseded_by (one id, or a
list of ids when two machines superseded one entry: a fork a sync leaves), superseded_at,
archived_at, archive_reason. Optional: scope (`global` when absent, or a project's short name
from `kb/projects.yaml`: `memory_agent.kb.scopes`), tags, links, source, episodes, updated. `validate` returns every problem
at once, each naming the field, what is wrong and how to fix it; `ValidationError` carries them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memory_agent.clock import parse_time
from memory_agent.errors import Invalid
from memory_agent.kb.scopes import check_scope
from memory_agent.limits import MAX_BODY, MAX_TITLE, not_one_line
from ragcore import Document, FrontMatterRefused, normalize_text, parse_front_matter

__all__ = [
    "ENTRY_TYPES",
    "LINK_KINDS",
    "MAX_LINKS_READ",
    "STATUSES",
    "Entry",
    "InvalidFile",
    "ValidationError",
    "check_id",
    "check_links",
    "content_key",
    "entry_path",
    "make_id",
    "parse_entry",
    "read_entry",
    "render_entry",
    "validate",
]

ENTRY_TYPES = (
    "principle",
    "correction",
    "decision",
    "guideline",
    "pitfall",
    "process",
    "model",
    "fact",
    "preference",
    "note",
)
STATUSES = ("active", "superseded", "archived")
REQUIRED = ("id", "title", "type", "status", "created")
LIFECYCLE = ("supersedes", "superseded_by", "superseded_at", "archived_at", "archive_reason")
OPTIONAL = ("scope", "tags", "links", "source", "updated", "episodes")
KEY_ORDER = REQUIRED + ("scope", "tags", "links") + LIFECYCLE + ("source", "episodes", "updated")
# Typed links an author writes in the frontmatter (`links: {derived_from: [id], ...}`), besides
# the [[wikilinks]] of the body; their weights in the ranking are in memory_agent.recall.policy.
LINK_KINDS = ("references", "derived_from", "contained_in", "contradicts")
# The links of one entry that are read (its typed links in frontmatter order, then its body's
# [[wikilinks]], each target once): the gateway takes at most 20 per kind, but a hand-written
# file can hold thousands, and every one would be an edge the ranking walks on each search.
MAX_LINKS_READ = 100
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,78}[a-z0-9]$")
TAG_RE = re.compile(r"^[\w][\w.+-]{0,39}$")


class ValidationError(Invalid):
    """An entry that must not be written (or a file that is not a valid entry). `problems`
    lists every field problem found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid entry: " + "; ".join(problems), "correct the fields named above")


class InvalidFile(ValidationError):
    """A file in the KB that is not a valid entry (bad frontmatter written by hand): the
    caller's request was fine, the file is not - code `document`, the fix names the file."""

    code = "document"

    def __init__(self, problems: list[str], path: Path):
        super().__init__(problems)
        self.message = f"{path} is not a valid entry: " + "; ".join(problems)
        self.args = (self.message,)
        self.fix = f"fix {path} by hand (or `git -C {path.parent.parent} checkout -- {path}`)"


def _is_time(value: Any) -> bool:
    """Whether a frontmatter date (text, or a date YAML read) is a time `clock.parse_time`
    reads."""
    try:
        parse_time(value)
    except ValueError:
        return False
    return True


def make_id(title: str, taken: Any = frozenset()) -> str:
    """A file-name-safe slug from a title, unique against `taken`.

    ASCII letters and digits survive; accents are stripped; other scripts (Chinese) give no
    letters, so such a title becomes `entry-<hash>`; `-2`, `-3`... resolve clashes. `taken` is a
    set of ids or a predicate."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")[:60].strip("-")
    if len(slug) < 3:
        slug = "entry-" + hashlib.sha256(title.encode("utf-8")).hexdigest()[:10]
    is_taken = taken if callable(taken) else taken.__contains__
    candidate, n = slug, 2
    while is_taken(candidate):
        candidate = f"{slug}-{n}"
        n += 1
    return candidate


def check_id(value: Any, field_name: str = "id") -> str | None:
    """The problem with an id, or None. Refuses anything that could leave the KB."""
    if not isinstance(value, str) or not value:
        return f"{field_name}: missing; give a slug such as 'use-uv-for-locking'"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return f"{field_name}: contains control characters; use a-z, 0-9 and '-'"
    if "/" in value or "\\" in value or value.startswith(".") or ".." in value:
        return (
            f"{field_name}: {value!r} is a path, not an id; ids may not contain '/', '\\\\' "
            "or '..' — use a slug such as 'use-uv-for-locking'"
        )
    if not ID_RE.match(value):
        return (
            f"{field_name}: {value!r} is not a slug; use 3-80 characters of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit"
        )
    return None


@dataclass
class Entry:
    """One knowledge-base entry: frontmatter fields plus body."""

    id: str
    title: str
    type: str
    status: str
    created: str
    body: str
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # lifecycle and optional fields

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "type": self.type,
            "status": self.status,
            "created": self.created,
        }
        if self.tags:
            meta["tags"] = list(self.tags)
        meta.update(self.extra)
        return {k: meta[k] for k in KEY_ORDER if k in meta}

    @property
    def scope(self) -> str:
        """`global`, or the short name of the project the entry belongs to."""
        return str(self.extra.get("scope") or "global")

    def to_document(self, path: str | None = None) -> Document:
        meta = {k: v for k, v in self.meta.items() if k not in ("id", "title")}
        meta["key"] = content_key(self.title, self.body)  # for exact-duplicate detection
        return Document(
            id=self.id, title=self.title, body=self.body, meta=meta, source="kb", path=path
        )


def content_key(title: str, body: str) -> str:
    """Normalised text of an entry, for exact-duplicate detection."""
    text = " ".join(normalize_text(f"{title}\n{body}").lower().split())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate(meta: dict[str, Any], body: str) -> list[str]:
    """Every problem with an entry's frontmatter and body; empty when it may be written."""
    problems = []
    unknown = sorted(set(meta) - set(REQUIRED) - set(LIFECYCLE) - set(OPTIONAL))
    if unknown:
        problems.append(
            f"{', '.join(unknown)}: unknown field(s); allowed are "
            f"{', '.join(REQUIRED + LIFECYCLE + OPTIONAL)}"
        )
    for key in REQUIRED:
        if meta.get(key) in (None, ""):
            problems.append(f"{key}: missing; it is required")
    if meta.get("id") not in (None, ""):
        problem = check_id(meta["id"])
        if problem:
            problems.append(problem)
    title = meta.get("title")
    if title not in (None, ""):
        if not isinstance(title, str):
            problems.append("title: must be text")
        elif len(title) > MAX_TITLE or any(not_one_line(c) for c in title):
            problems.append(
                f"title: must be one line of at most {MAX_TITLE} characters, without "
                "control characters"
            )
    if meta.get("type") not in (None, "") and meta["type"] not in ENTRY_TYPES:
        problems.append(
            f"type: {meta['type']!r} is not a type; use one of {', '.join(ENTRY_TYPES)}"
        )
    if meta.get("status") not in (None, "") and meta["status"] not in STATUSES:
        problems.append(
            f"status: {meta['status']!r} is not a status; use one of {', '.join(STATUSES)}"
        )
    for key in ("created", "updated", "superseded_at", "archived_at"):
        if meta.get(key) not in (None, "") and not _is_time(meta[key]):
            problems.append(
                f"{key}: {meta[key]!r} is not a date; use ISO 8601 like 2026-11-30T09:00:00Z"
            )
    if meta.get("scope") is not None:
        problem = check_scope(meta["scope"])
        if problem:
            problems.append(problem)
    tags = meta.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            problems.append("tags: must be a list of words, like [git, testing]")
        else:
            bad = [t for t in tags if not TAG_RE.match(t)]
            if bad:
                problems.append(f"tags: {bad} are not tags; use short words without spaces")
    supersedes = meta.get("supersedes")
    if supersedes is not None:
        if not isinstance(supersedes, list) or not supersedes:
            problems.append("supersedes: must be a list of entry ids, like [old-entry-id]")
        else:
            problems += [p for p in (check_id(s, "supersedes") for s in supersedes) if p]
    problems += check_links(meta.get("links"), meta.get("id"))
    episodes = meta.get("episodes")
    if episodes is not None and (
        not isinstance(episodes, list)
        or not all(isinstance(e, str) and e.startswith("episodes/") for e in episodes)
    ):
        problems.append("episodes: must be a list of episode ids, like [episodes/<session>/3]")
    if meta.get("source") not in (None, "") and not isinstance(meta["source"], str):
        problems.append("source: must be text, such as auto")
    successors = meta.get("superseded_by")
    if successors not in (None, ""):  # one id, or a list when two machines superseded it
        for successor in successors if isinstance(successors, list) else [successors]:
            problem = check_id(successor, "superseded_by")
            if problem:
                problems.append(problem)
    status = meta.get("status")
    if status == "superseded" and not (meta.get("superseded_by") and meta.get("superseded_at")):
        problems.append(
            "status: superseded entries need superseded_by and superseded_at; "
            "use memory-agent supersede instead of editing the status"
        )
    if status == "archived" and not (meta.get("archived_at") and meta.get("archive_reason")):
        problems.append(
            "status: archived entries need archived_at and archive_reason; "
            "use memory-agent archive instead of editing the status"
        )
    if not isinstance(body, str) or not body.strip():
        problems.append("body: empty; say what should be remembered")
    elif len(body) > MAX_BODY:
        problems.append(f"body: {len(body)} characters is over the {MAX_BODY} limit; split it")
    elif "\x00" in body:
        problems.append("body: contains NUL bytes; only text can be stored")
    return problems


def read_links(typed: Any, wikilinks: Any) -> list[tuple[str, str]]:
    """(target, kind) of an entry's links as the ranking reads them: the body's [[wikilinks]],
    then the typed links, each pair once, at most MAX_LINKS_READ (the rest is not read)."""
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    pairs = [(t, "wikilink") for t in wikilinks or ()]
    if isinstance(typed, dict):
        pairs += [(t, kind) for kind, ts in typed.items() if isinstance(ts, list) for t in ts]
    for target, kind in pairs:
        pair = (str(target), str(kind))
        if pair not in seen:
            seen.add(pair)
            out.append(pair)
            if len(out) >= MAX_LINKS_READ:
                break
    return out


def check_links(links: Any, own_id: Any = None) -> list[str]:
    """Problems with a `links` field: a mapping from a link kind to a list of entry ids."""
    if links is None:
        return []
    example = "links: {derived_from: [other-entry-id], contradicts: [another-id]}"
    if not isinstance(links, dict) or not links:
        return [f"links: must map a kind to a list of entry ids, like {example}"]
    problems = []
    for kind, targets in links.items():
        if kind not in LINK_KINDS:
            problems.append(
                f"links: {kind!r} is not a link kind; use one of {', '.join(LINK_KINDS)}"
            )
            continue
        if not isinstance(targets, list) or not targets:
            problems.append(f"links.{kind}: must be a list of entry ids, like [other-entry-id]")
            continue
        problems += [p for p in (check_id(t, f"links.{kind}") for t in targets) if p]
        if own_id is not None and own_id in targets:
            problems.append(f"links.{kind}: an entry cannot link to itself ({own_id})")
    return problems


def _yaml_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def render_entry(entry: Entry) -> str:
    """The file text of an entry: frontmatter in a fixed key order, one key a line (lists in
    flow style, `tags: [a, b]`), then the body."""
    lines = []
    for key, value in entry.meta.items():
        value = _yaml_value(value)
        if isinstance(value, list):
            text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=True, width=1000)
            lines.append(f"{key}: {text.strip()}")
        else:
            lines.append(
                yaml.safe_dump(
                    {key: value}, allow_unicode=True, default_flow_style=False, width=1000
                ).strip()
            )
    front = "\n".join(lines)
    return f"---\n{front}\n---\n{entry.body.strip()}\n"


def parse_entry(text: str, source: str = "<text>") -> Entry:
    """Parse and validate entry text. Raises ValidationError naming every problem."""
    try:
        metadata, content = parse_front_matter(text)  # (bounded: no alias bomb)
    except FrontMatterRefused as exc:
        raise ValidationError(
            [f"frontmatter: not read in {source}: {exc}; fix the block between the --- lines"]
        ) from exc
    except (yaml.YAMLError, ValueError) as exc:
        raise ValidationError(
            [
                f"frontmatter: not valid YAML in {source} ({exc}); "
                "fix the block between the --- lines"
            ]
        ) from exc
    meta = {k: _yaml_value(v) for k, v in metadata.items()}
    body = normalize_text(content)
    problems = validate(meta, body)
    if problems:
        raise ValidationError(problems)
    extra = {
        k: meta[k]
        for k in ("scope",) + LIFECYCLE + ("links", "source", "episodes", "updated")
        if k in meta
    }
    return Entry(
        id=meta["id"],
        title=str(meta["title"]),
        type=meta["type"],
        status=meta["status"],
        created=str(meta["created"]),
        body=body,
        tags=list(meta.get("tags") or []),
        extra=extra,
    )


def read_entry(path: Path) -> Entry:
    """The entry in a KB file; `InvalidFile` (code `document`) if the file is not one."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidFile([f"cannot read ({exc.strerror})"], path) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidFile(["not UTF-8; convert it with iconv -t UTF-8"], path) from exc
    try:
        return parse_entry(text, str(path))
    except ValidationError as exc:
        raise InvalidFile(exc.problems, path) from exc


def shard(entry_id: str) -> str:
    """The subfolder of `entry_id` in a fanned-out type folder (`kb.files`, ADR 0031): two hex
    digits, the same on every machine and version (the first of its SHA-256)."""
    return hashlib.sha256(entry_id.encode("utf-8")).hexdigest()[:2]


def entry_path(kb_dir: Path, entry_type: str, entry_id: str, fanned: bool = False) -> Path:
    """`kb/<type>/<id>.md`, or with `fanned` `kb/<type>/<xx>/<id>.md` (`shard`),
    checked to stay inside the KB."""
    if entry_type not in ENTRY_TYPES:
        raise ValidationError(
            [f"type: {entry_type!r} is not a type; use one of {', '.join(ENTRY_TYPES)}"]
        )
    problem = check_id(entry_id)
    if problem:
        raise ValidationError([problem])
    # The id is a slug (no '/', no '..'): the path stays inside the KB by construction. Links
    # on the way are the gateway's to refuse, naming them.
    if fanned:
        return kb_dir / entry_type / shard(entry_id) / f"{entry_id}.md"
    return kb_dir / entry_type / f"{entry_id}.md"
