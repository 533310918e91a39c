"""What people already wrote, read as entries to import: `CLAUDE.md`, `AGENTS.md`, Cursor's
`.cursor/rules/*.md[c]`, Claude Code's auto-memory folder (`~/.claude/projects/<p>/memory/`) and
a folder of Markdown notes (an Obsidian vault). `memory-agent import` reads them here, the
gateway writes them (`Gateway.import_entries`, planned by `memory_agent.write.import_plan`).

**Files.** A PATH is a file or a folder. A folder is read for every `.md` and `.mdc` file
below it, in name order; folders below it whose name starts with a dot (`.obsidian`, `.git`,
`.trash`), `node_modules` and links to folders are not entered (a hidden folder given as the
PATH itself, such as `.cursor/rules`, is read). In Claude Code's auto-memory folder the index
file `MEMORY.md` (one line per memory, pointing at the other files) is skipped: the files it
points at are imported themselves.

**Entries.** A document is split at its second-level headings (`## `, outside fenced code):
each section is one entry, titled by its heading, its body everything up to the next `## `
(`###` and deeper stay inside). Text before the first `## ` (below the `# ` title) is one
entry titled by the document's title; a document without `## ` is one entry, titled by its
frontmatter `title` (or `name`), else its first `# ` heading, else its file name. Sections
with no text are skipped. Bodies are kept as written: `[[wikilinks]]` stay as they are.

**Frontmatter** is kept: `tags` become the entry's tags (a leading `#` dropped, other
characters a tag cannot hold turned into `-`); `type`, when it is one of the entry types, is
the type (Claude Code's `type: feedback` is a `guideline`); `title`/`name` titles a one-entry
document; every other key (`description`, `globs`, `aliases`, ...) is kept as a fenced YAML
block at the end of each entry's body, so nothing the note said about itself is lost.

**Types** are inferred conservatively, from headings only, never from the body: a section
whose heading (else the document's title) names one of these words as a whole word is typed
so, anything else is a `note`:

    pitfall     pitfalls, gotchas, caveats, known issues, common mistakes, footguns
    guideline   conventions, guidelines, code style, style guide, coding standards,
                best practices, rules
    decision    decisions, architecture decisions, ADR
    preference  preferences
    process     workflow, procedure, runbook, release process

**Origin.** Each entry records where it came from in `source:` as
`import:<file>#<heading>` (`import:<file>` for a one-entry document or the text before the
first section; a heading used twice in a file gets ` (2)`). `<file>` is
`<project identity>/<path in the repository>` for a file in a git repository (so every clone
and worktree names it alike), else its absolute path with the home folder written `~`. The
gateway matches a new import against it: the same origin with the same text is unchanged, with
other text it is superseded (docs/adr/0015-import.md).

**Secrets** are redacted as capture redacts them (`memory_agent.intake.redact.redact`), in
`clean_sections`, which the write path runs whatever its caller.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memory_agent import limits
from memory_agent.capture.session_sources import AIDER_HISTORY
from memory_agent.errors import Invalid
from memory_agent.intake.projects import identify
from memory_agent.intake.redact import redact
from memory_agent.kb.entries import ENTRY_TYPES, TAG_RE
from ragcore import FrontMatterRefused, load_yaml

__all__ = [
    "MAX_SECTIONS",
    "ORIGIN_PREFIX",
    "Section",
    "clean_sections",
    "infer_type",
    "read_sources",
    "split_document",
]

ORIGIN_PREFIX = "import:"
MAX_SECTIONS = 5_000  # entries one import may bring (import a large vault folder by folder)
MAX_ORIGIN = 1_000  # characters of an origin
SUFFIXES = (".md", ".mdc")
NOT_ENTERED = ("node_modules",)
_H2 = re.compile(r"^ {0,3}##[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_H1 = re.compile(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
TYPE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "pitfall",
        (
            "pitfalls",
            "pitfall",
            "gotchas",
            "gotcha",
            "caveats",
            "caveat",
            "known issues",
            "common mistakes",
            "footguns",
            "footgun",
        ),
    ),
    (
        "guideline",
        (
            "conventions",
            "convention",
            "guidelines",
            "guideline",
            "code style",
            "style guide",
            "coding standards",
            "best practices",
            "rules",
        ),
    ),
    ("decision", ("decisions", "decision", "architecture decisions", "adr", "adrs")),
    ("preference", ("preferences", "preference")),
    ("process", ("workflow", "workflows", "procedure", "procedures", "runbook", "release process")),
)
AUTO_MEMORY = (".claude", "projects", "memory")  # .claude/projects/<project>/memory
DECLARED_TYPES = {"feedback": "guideline"}  # Claude Code's auto-memory `type:` values


@dataclass
class Section:
    """One entry to import: its title, body, type, tags, and where it came from."""

    title: str
    body: str
    origin: str
    type: str = "note"
    tags: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# -- reading files --------------------------------------------------------------------------
def read_sources(paths: list[str]) -> tuple[list[Section], list[dict[str, str]]]:
    """The sections of every file under `paths` (files or folders), and the files or sections
    skipped, each with its reason. `Invalid` when a path does not exist."""
    sections: list[Section] = []
    skipped: list[dict[str, str]] = []
    places: dict[str, tuple[str | None, str | None]] = {}
    for raw in paths:
        path = Path(os.path.expanduser(raw)).absolute()
        if not path.exists():
            raise Invalid(f"{raw}: no such file or folder", "give a Markdown file or a folder")
        for file in _files(path, skipped):
            try:
                text = file.read_bytes().decode("utf-8-sig")
            except UnicodeDecodeError:
                skipped.append({"file": str(file), "reason": "not UTF-8 text"})
                continue
            except OSError as exc:
                skipped.append({"file": str(file), "reason": exc.strerror or str(exc)})
                continue
            place = _place(file, places)
            try:
                parts = split_document(text, _stem(file), place)
            except FrontMatterRefused as exc:  # (an alias bomb: never expanded)
                skipped.append({"file": str(file), "reason": f"front matter not read: {exc}"})
                continue
            for item in parts:
                if isinstance(item, Section):
                    sections.append(item)
                else:
                    skipped.append({"file": str(file), **item})
    return sections, skipped


def _stem(file: Path) -> str:
    return file.name[: -len(file.suffix)] if file.suffix in SUFFIXES else file.name


def _files(path: Path, skipped: list[dict[str, str]]) -> list[Path]:
    if path.is_file():
        return [path]
    found = []
    for folder, dirs, files in os.walk(path):  # links to folders are not followed
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in NOT_ENTERED)
        for name in sorted(files):
            if not name.endswith(SUFFIXES) or name == AIDER_HISTORY:
                continue  # Aider's chat history is a past session, not notes
            file = Path(folder) / name
            if name == "MEMORY.md" and _auto_memory(Path(folder)):
                skipped.append(
                    {
                        "file": str(file),
                        "reason": "Claude Code's index of the memory "
                        "files (they are imported themselves)",
                    }
                )
                continue
            found.append(file)
    return found


def _auto_memory(folder: Path) -> bool:
    """Claude Code's auto-memory folder: `.claude/projects/<project>/memory`."""
    parts = folder.parts
    return len(parts) >= 4 and (parts[-4], parts[-3], parts[-1]) == AUTO_MEMORY


def _place(file: Path, known: dict[str, tuple[str | None, str | None]]) -> str:
    """How an origin names `file`: `<project identity>/<path in the repository>` inside a git
    repository, else its absolute path with the home folder as `~`."""
    folder = str(file.parent)
    if folder not in known:
        project = identify(folder)
        top = None
        if project is not None:
            try:
                out = subprocess.run(
                    ["git", "-C", folder, "rev-parse", "--show-toplevel"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                    env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
                )
                top = out.stdout.strip() if out.returncode == 0 else None
            except (OSError, subprocess.SubprocessError):
                top = None
        known[folder] = (project.identity if project else None, top)
    identity, top = known[folder]
    if identity and top:
        rel = os.path.relpath(os.path.realpath(file), os.path.realpath(top))
        if not rel.startswith(".."):
            return f"{identity.rstrip('/')}/{Path(rel).as_posix()}"
    home = os.path.expanduser("~")
    text = str(file)
    if home not in ("", "/", "~") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home) :]
    return text


# -- one document to sections ---------------------------------------------------------------
def split_document(text: str, name: str, place: str) -> list[Section | dict[str, str]]:
    """The sections of one document (`name`: its file name without `.md`; `place`: how its
    origin names it), and a `{heading, reason}` for each section left out.
    `FrontMatterRefused` when its front matter is an alias bomb or over a bound
    (`ragcore.load_yaml`)."""
    meta, body = _frontmatter(text)
    tags = _tags(meta.get("tags"))
    declared = meta.get("type")
    declared = DECLARED_TYPES.get(declared, declared) if isinstance(declared, str) else None
    declared = declared if declared in ENTRY_TYPES else None
    kept = {k: v for k, v in meta.items() if k not in ("tags", "type", "title", "name")}
    tail = ""
    if kept:
        dumped = yaml.safe_dump(kept, allow_unicode=True, sort_keys=False, width=1000)
        tail = f"\n\n```yaml\n# frontmatter of {name}\n{dumped.strip()}\n```"
    h1, preamble, parts = _split(body)
    title = next((str(meta[k]).strip() for k in ("title", "name") if meta.get(k)), "")
    title = _one_line(title or h1 or name)
    out: list[Section | dict[str, str]] = []
    seen: dict[str, int] = {}
    pieces = [(None, preamble)] + parts
    for heading, text_ in pieces:
        if not text_.strip():
            if heading is not None:
                out.append({"heading": heading, "reason": "empty section"})
            continue
        if heading is None:
            origin, entry_title = f"{ORIGIN_PREFIX}{place}", title
        else:
            n = seen[heading] = seen.get(heading, 0) + 1
            label = heading if n == 1 else f"{heading} ({n})"
            origin, entry_title = f"{ORIGIN_PREFIX}{place}#{label}", _one_line(heading)
        kind = declared or infer_type(heading or "", title)
        out.append(Section(entry_title or name, text_.strip() + tail, origin, kind, list(tags)))
    return out


def _frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """(frontmatter, body); a file whose frontmatter is not YAML keeps it in its body. Read
    within bounds (`ragcore.load_yaml`): `FrontMatterRefused` for an alias or a block over a
    bound."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            try:
                meta = load_yaml("".join(lines[1:i]), first_line=2) or {}
            except yaml.YAMLError:
                return {}, text
            if not isinstance(meta, dict):
                return {}, text
            return {str(k): _plain(v) for k, v in meta.items()}, "".join(lines[i + 1 :])
    return {}, text


def _plain(value: Any) -> Any:
    """A frontmatter value YAML can write back (dates as ISO text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[,\s]+", value)
    if not isinstance(value, list):
        return []
    tags = []
    for raw in value:
        tag = re.sub(r"[^\w.+-]+", "-", str(raw).strip().lstrip("#")).strip("-")[:40]
        if tag and TAG_RE.match(tag) and tag not in tags:
            tags.append(tag)
    return tags[: limits.MAX_TAGS]


def _split(body: str) -> tuple[str, str, list[tuple[str, str]]]:
    """(the first `# ` heading, the text before the first `## `, [(heading, text)])."""
    h1 = ""
    preamble: list[str] = []
    parts: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in body.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
        elif opened:
            fence = opened.group(1)
        else:
            h2 = _H2.match(line)
            if h2 and h2.group(1).strip():
                parts.append((h2.group(1).strip(), []))
                continue
            top = _H1.match(line)
            if top and not h1 and not parts and not "".join(preamble).strip():
                h1 = top.group(1).strip()
                continue
        (parts[-1][1] if parts else preamble).append(line)
    return h1, "\n".join(preamble), [(h, "\n".join(lines)) for h, lines in parts]


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= limits.MAX_TITLE:
        return text
    return text[: limits.MAX_TITLE - 1].rsplit(" ", 1)[0] + "…"


def infer_type(heading: str, doc_title: str = "") -> str:
    """The type a heading names (else the document's title), or `note`: see the module's
    docstring for the words. Whole words only: "Rules of thumb" is a guideline, "Ruler" no."""
    for text in (heading, doc_title):
        words = " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "
        for kind, names in TYPE_WORDS:
            if any(f" {name} " in words for name in names):
                return kind
    return "note"


# -- what the write path accepts ------------------------------------------------------------
def clean_sections(items: Any) -> list[Section]:
    """Sections as the write path takes them (from the wire or from `read_sources`), checked
    and with their secrets redacted. `Invalid`, naming the item, for a malformed one."""
    if not isinstance(items, list):
        raise Invalid("sections: must be a list", "send what `read_sources` returns")
    if len(items) > MAX_SECTIONS:
        raise Invalid(
            f"sections: {len(items):,} entries is over the limit of {MAX_SECTIONS:,} per import",
            "import the folder in parts (one sub-folder at a time)",
        )
    out = []
    for n, item in enumerate(items):
        if isinstance(item, Section):
            item = item.as_json()
        if not isinstance(item, dict):
            raise Invalid(f"sections[{n}]: must be an object", "send what `read_sources` returns")
        origin, title, body = item.get("origin"), item.get("title"), item.get("body")
        limits.check_text(f"sections[{n}].origin", origin, MAX_ORIGIN, required=True, one_line=True)
        if not str(origin).startswith(ORIGIN_PREFIX):
            raise Invalid(f"sections[{n}].origin: must start with {ORIGIN_PREFIX}")
        for key, value in (("title", title), ("body", body)):
            if not isinstance(value, str):
                raise Invalid(f"sections[{n}].{key}: must be text")
        kind = item.get("type") or "note"
        tags = item.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise Invalid(f"sections[{n}].tags: must be a list of words")
        out.append(Section(redact(title), redact(body), redact(origin), kind, list(tags)))
    return out
