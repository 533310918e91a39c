"""Markdown documents: loading with frontmatter, heading-aware chunking, [[wikilinks]], CJK-safe text.

A `Document` is one Markdown note (an id, a title, a body and its frontmatter). `chunk_document`
cuts it into `Chunk`s along its headings, each at most `max_chars` long, with ids
`<doc id>#<n>` that stay the same as long as the text does. `load_markdown` refuses, with a
`DocumentError` that names the file and the reason, anything that is not UTF-8 text of a sane
size; `scan_markdown` walks a folder and reports such files instead of stopping.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragcore.errors import DocumentError

__all__ = [
    "DEFAULT_EXCLUDES",
    "Chunk",
    "Document",
    "PathRule",
    "Skipped",
    "chunk_document",
    "load_markdown",
    "normalize_text",
    "scan_markdown",
    "wikilinks",
]

MAX_FILE_BYTES = 1_000_000
DEFAULT_MAX_CHARS = 1500

# Folders never worth indexing: VCS data, dependencies, build output, caches, generated output.
# Unformatted (fmt: skip): a word list, packed, instead of one name a line.
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", "node_modules", "outputs", "output", "build", "dist", "target",
    "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".cache", ".idea", ".vscode", ".next", "site-packages",
)  # fmt: skip

_CONTROL = dict.fromkeys(c for c in range(32) if c not in (9, 10))
_CONTROL[127] = None
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*")


def normalize_text(text: str) -> str:
    """Clean text for storage and display: NFC (composed characters, so the same word has one
    spelling), no control characters (tabs and newlines stay), CRLF to LF, no trailing spaces
    or blank lines at either end; indentation and inner spaces exactly as written.
    Chinese text and full-width punctuation are left exactly as written; the folding that
    matching needs (NFKC, lower case) is the tokenizer's job (`fold_text`)."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = text.translate(_CONTROL)
    # Leading and inner spaces stay: they are code indentation and Markdown structure.
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def fold_text(text: str) -> str:
    """Text for matching: NFKC (full-width Ａ１ become A1, compatibility forms unfold) and lower
    case. CJK ideographs are unchanged by NFKC."""
    return unicodedata.normalize("NFKC", text).lower()


def wikilinks(text: str) -> list[str]:
    """Targets of `[[target]]`, `[[target|label]]` and `[[target#heading]]`, in order, once each."""
    return list(dict.fromkeys(m.group(1).strip() for m in _WIKILINK.finditer(text)))


@dataclass(frozen=True)
class Document:
    """One Markdown note. `meta` is its frontmatter (minus title); `source` names its corpus.
    `stamp` is an opaque note of where the text came from (a scanner puts the file's stat
    there); the index keeps it so a later scan can skip unchanged files. It is not content."""

    id: str
    title: str
    body: str
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    path: str | None = None
    stamp: str | None = field(default=None, compare=False)

    @property
    def content_hash(self) -> str:
        """Changes whenever anything the index stores about this document changes."""
        payload = json.dumps(
            [self.id, self.title, self.body, self.meta, self.source, self.path],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def links(self) -> list[str]:
        return wikilinks(self.body)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: `id` is `<doc id>#<n>`; `text` is what gets embedded and indexed
    (the document title, the heading path, then the piece's own text)."""

    id: str
    doc_id: str
    n: int
    heading: str
    body: str
    text: str


def _sections(body: str) -> list[tuple[list[str], str]]:
    """Split a Markdown body into (heading path, text) sections; headings in code fences count
    as text."""
    sections: list[tuple[list[str], str]] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text or not sections:
            sections.append(([h for _, h in path], text))
        lines.clear()

    for line in body.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            flush()
            level = len(match.group(1))
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, match.group(2))]
            continue
        lines.append(line)
    flush()
    return [(p, t) for p, t in sections if t]


def _split_long(text: str, max_chars: int) -> list[str]:
    """Cut a text over `max_chars` at paragraph breaks, then sentence ends, then hard."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        if len(para) <= max_chars:
            pieces.append(para)
            continue
        sentences = [s for s in _SENTENCE_END.split(para) if s]
        for sentence in sentences:
            while len(sentence) > max_chars:
                pieces.append(sentence[:max_chars])
                sentence = sentence[max_chars:]
            pieces.append(sentence)
    # Greedily pack the pieces back together up to the cap.
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + 1 + len(piece) <= max_chars:
            sep = "\n\n" if "\n" in piece or packed[-1].endswith((".", "。")) else " "
            packed[-1] = packed[-1] + sep + piece
        else:
            packed.append(piece)
    return packed


def chunk_document(doc: Document, max_chars: int = DEFAULT_MAX_CHARS) -> list[Chunk]:
    """Heading-aware chunks of at most `max_chars` body characters each.

    Each section (the text under one heading) is a chunk; a long section is cut at paragraph
    and sentence boundaries; short neighbouring sections under the same parent are packed
    together. A document with an empty body still gets one chunk (its title), so every
    document is findable.
    """
    if max_chars < 50:
        raise ValueError("max_chars must be at least 50")
    groups: list[tuple[str, str]] = []
    for path, text in _sections(doc.body):
        heading = " > ".join(path)
        parent = " > ".join(path[:-1])
        for piece in _split_long(text, max_chars):
            if groups:
                prev_heading, prev_text = groups[-1]
                prev_parent = prev_heading.rsplit(" > ", 1)[0] if " > " in prev_heading else ""
                # A short section joins a short neighbour under the same parent heading; its
                # own heading stays in the text so nothing is lost.
                label = f"{path[-1]}\n" if path and heading != prev_heading else ""
                merged = f"{prev_text}\n\n{label}{piece}"
                if prev_parent == parent and len(merged) <= max_chars // 2:
                    groups[-1] = (prev_heading, merged)
                    continue
            groups.append((heading, piece))
    if not groups:
        groups = [("", "")]
    chunks = []
    for n, (heading, body) in enumerate(groups):
        head = doc.title
        if heading and heading != doc.title:
            head = f"{doc.title}\n{heading}" if doc.title else heading
        text = f"{head}\n{body}".strip() if body else head
        chunks.append(Chunk(f"{doc.id}#{n}", doc.id, n, heading, body, text))
    return chunks


def _first_heading(body: str) -> str | None:
    for line in body.split("\n"):
        m = _HEADING.match(line)
        if m and len(m.group(1)) == 1:
            return m.group(2)
        if line.strip():
            return None
    return None


def load_markdown(
    path: str | Path,
    doc_id: str,
    *,
    source: str = "",
    max_bytes: int = MAX_FILE_BYTES,
) -> Document:
    """Read one Markdown file. Raises `DocumentError` for files that are too large, binary,
    not UTF-8, or whose frontmatter is not valid YAML."""
    import yaml

    from ragcore.front_matter import parse_front_matter

    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise DocumentError(f"{path}: {size} bytes is over the {max_bytes}-byte limit; skipped")
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if b"\x00" in raw:
        raise DocumentError(f"{path}: binary file (contains NUL bytes); skipped")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{path}: not UTF-8 (byte {exc.start}); convert it with iconv -t UTF-8"
        ) from exc
    try:
        meta, content = parse_front_matter(text)  # (bounded: no alias bomb)
    except (yaml.YAMLError, ValueError) as exc:
        raise DocumentError(
            f"{path}: broken frontmatter ({exc}); fix the YAML between the --- lines"
        ) from exc
    body = normalize_text(content)
    title = meta.pop("title", None) or _first_heading(body) or path.stem
    return Document(
        id=doc_id,
        title=normalize_text(str(title)),
        body=body,
        meta=meta,
        source=source,
        path=str(path),
    )


@dataclass(frozen=True)
class Skipped:
    """A file a scan passed over, and why."""

    path: str
    reason: str


class PathRule:
    """Which files of a folder are documents: one rule for scanning a folder and for checking
    a single path (so a search can never return an id that a lookup refuses).

    A path qualifies when it is a clean relative POSIX path (no empty, `.` or `..` part) of a
    `.md` file, no folder on the way is hidden (`.name`) or one of `exclude_dirs`, it matches
    `include` and does not match `exclude`. Patterns have gitignore semantics (`pathspec`):
    `*.md` matches at any depth, `docs/*.md` only directly under `docs/`, `docs/**` everything
    below it, a pattern naming a folder covers everything inside it.

    On disk (`resolve`), a document must also be a regular file whose real path stays inside
    the root: a symbolic link that leads outside is refused.
    """

    def __init__(
        self,
        include: Sequence[str] = ("*.md",),
        exclude: Sequence[str] = (),
        exclude_dirs: Sequence[str] = DEFAULT_EXCLUDES,
    ):
        import pathspec

        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.exclude_dirs = frozenset(exclude_dirs)
        self._include = pathspec.GitIgnoreSpec.from_lines(self.include) if self.include else None
        self._exclude = pathspec.GitIgnoreSpec.from_lines(self.exclude)

    def matches(self, rel: str) -> bool:
        parts = rel.split("/")
        if not parts[-1].lower().endswith(".md") or any(p in ("", ".", "..") for p in parts):
            return False
        if any(p in self.exclude_dirs or p.startswith(".") for p in parts[:-1]):
            return False
        if self._include is not None and not self._include.match_file(rel):
            return False
        return not self._exclude.match_file(rel)

    def _prune(self, rel_dir: str) -> bool:
        """True when no file below the folder `rel_dir` can match (a shortcut for scans)."""
        name = rel_dir.rsplit("/", 1)[-1]
        return (
            name in self.exclude_dirs
            or name.startswith(".")
            or self._exclude.match_file(rel_dir + "/")
        )

    def resolve(self, root: str | Path, rel: str) -> Path | None:
        """The file behind `rel` if it is a document of `root`: the rule matches, it is a
        regular file, and its real path is inside the root. Else None."""
        if not self.matches(rel):
            return None
        root = Path(root).resolve()
        full = root / rel
        try:
            real = full.resolve()
            if not real.is_relative_to(root) or not real.is_file():
                return None
        except OSError:
            return None
        return full

    def folders(self, root: str | Path) -> Iterator[Path]:
        """Every folder under `root` (itself included) a scan descends into."""
        root = Path(root).resolve()
        for dirpath, dirnames, _ in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir + "/"
            dirnames[:] = sorted(d for d in dirnames if not self._prune(rel_dir + d))
            yield Path(dirpath)

    def scan(self, root: str | Path) -> Iterator[tuple[str, Path]]:
        """(relative path, absolute path) of every document under `root`, sorted."""
        root = Path(root).resolve()
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir + "/"
            dirnames[:] = sorted(d for d in dirnames if not self._prune(rel_dir + d))
            for name in sorted(filenames):
                rel = rel_dir + name
                if self.matches(rel) and self.resolve(root, rel) is not None:
                    yield rel, Path(dirpath) / name


def scan_markdown(
    root: str | Path,
    *,
    include: Sequence[str] = ("*.md",),
    exclude: Sequence[str] = (),
    exclude_dirs: Sequence[str] = DEFAULT_EXCLUDES,
) -> Iterator[tuple[str, Path]]:
    """Yield (relative path, absolute path) of the `.md` files under `root` that `PathRule`
    admits, sorted; symlinks that leave the root are skipped."""
    return PathRule(include, exclude, exclude_dirs).scan(root)
