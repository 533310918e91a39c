"""What a write checks before anything is written, apart from git's state and dedup: the
request's fields, the entry a lifecycle write changes, and the files it will write.

- Fields: tags (words, each once, bounded), typed links (well formed, every target an entry
  of the KB), a new entry's title, body and type (present, bounded, one of ENTRY_TYPES; the
  whole entry validated as its file will hold it). `Invalid`, naming the field.
- The entry to supersede or archive: a KB entry (`NotFound`), not an episode or a corpus file
  (`ReadOnly`).
- The files: `kb/<type>/<name>.md`, a regular file (or absent) in a real folder inside the
  KB, never through a symbolic link (`Invalid`, naming the path); a file that holds an
  uncommitted edit is never changed (`Conflict`, with the git command that commits or reverts
  it); no file or message adds what the push check would refuse (`SecretFound`, naming the
  file, the line, the finding's fingerprint and the two ways out: docs/adr/0023).

The gateway (`memory_agent.write.gateway`) runs these; each raises and writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_agent import limits
from memory_agent.capture.episodes import EPISODES
from memory_agent.clock import iso
from memory_agent.errors import Conflict, Invalid, NotFound, ReadOnly
from memory_agent.intake.secrets import (
    ALLOW_FILE,
    SecretFound,
    allowed_in,
    describe,
    fingerprint,
    found,
    line_of,
    new_in,
    read_allowed,
    scannable,
)
from memory_agent.kb.entries import (
    ENTRY_TYPES,
    LINK_KINDS,
    Entry,
    check_links,
    make_id,
    validate,
)
from memory_agent.kb.files import name_taken, read_kb_entry
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.kbs import KbPlace, split_id

if TYPE_CHECKING:
    from memory_agent.index.memory import Memory

__all__ = [
    "check_committed",
    "check_secrets",
    "check_target",
    "clean_links",
    "clean_tags",
    "load_writable",
    "new_entry",
]


# -- the request's fields ------------------------------------------------------------------------
def clean_tags(tags: Any) -> list[str]:
    """Tags as the frontmatter will hold them: stripped, each once, bounded."""
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list):
        raise Invalid("tags: must be a list of words", "pass tags like [git, testing]")
    cleaned = list(dict.fromkeys(str(t).strip() for t in tags if str(t).strip()))
    for tag in cleaned:
        limits.check_text("tags", tag, limits.MAX_TAG, one_line=True)
    if len(cleaned) > limits.MAX_TAGS:
        raise Invalid(
            f"tags: {len(cleaned)} tags is over the limit of {limits.MAX_TAGS}",
            "keep the few that someone would filter by",
        )
    return cleaned


def clean_links(
    memory: Memory, links: Any, place: KbPlace | None = None
) -> dict[str, list[str]] | None:
    """Typed links as the frontmatter will hold them; refused (`invalid`, nothing written)
    when malformed or when a target is not an entry of the knowledge base. `place`: the KB
    written to; a target may name it (`team:x`, held as `x`) but not another KB."""
    if links in (None, {}):
        return None
    if place is not None and isinstance(links, dict):
        links = {
            k: [_in_kb(place, t) for t in v] if isinstance(v, list) else v for k, v in links.items()
        }
    problems = check_links(links)
    if problems:
        raise Invalid(
            "invalid links, nothing written: " + "; ".join(problems),
            f"pass links as {{kind: [entry-id, ...]}} with kinds {', '.join(LINK_KINDS)}",
        )
    missing = sorted(
        {
            t
            for targets in links.values()
            for t in targets
            if memory.find_path(place.qualify(t) if place is not None else t) is None
        }
    )
    if missing:
        raise Invalid(
            f"links: no entry with id {', '.join(missing)} in the knowledge base",
            "link only to existing entries (memory_search or memory_get finds their ids)",
        )
    return {kind: list(dict.fromkeys(targets)) for kind, targets in links.items()}


def _in_kb(place: KbPlace, target: Any) -> Any:
    """A link target as the files of `place` hold it; `Invalid` for an entry of another KB."""
    if not isinstance(target, str):
        return target
    name, local = split_id(target)
    if name != place.name:
        raise Invalid(
            f"links: {target} is an entry of the KB {name}, not of {place.name}; links join "
            "entries of one KB",
            f"link only to entries of {place.name} (their ids: {place.qualify('<id>')})",
        )
    return local


def new_entry(
    memory: Memory,
    title: Any,
    body: Any,
    entry_type: Any,
    tags: list[str],
    now: float | None = None,
    *,
    kb_dir: Path | None = None,
    **extra: Any,
) -> Entry:
    """A new active entry from a request's fields, with a fresh id (unique in `kb_dir`, the
    personal KB by default); `Invalid` (nothing written) when a field is missing, too long or
    not of its kind."""
    if not isinstance(title, str) or not title.strip():
        raise Invalid("title: missing", "give the entry a one-line title")
    if not isinstance(body, str):
        raise Invalid("body: must be text", "pass the entry's text as a string")
    limits.check_text("title", title.strip(), limits.MAX_TITLE, one_line=True)
    limits.check_text("body", body, limits.MAX_BODY)
    if entry_type not in ENTRY_TYPES:
        raise Invalid(f"type: {entry_type!r} is not a type", f"use one of {', '.join(ENTRY_TYPES)}")
    entry = Entry(
        id=make_id(
            title.strip(),
            lambda i: name_taken(kb_dir or memory.kb_dir, i),
        ),
        title=title.strip(),
        type=entry_type,
        status="active",
        created=iso(memory.clock() if now is None else now),
        body=body.strip(),
        tags=tags,
        extra=extra,
    )
    problems = validate(entry.meta, entry.body)
    if problems:
        raise Invalid(
            "invalid entry, nothing written: " + "; ".join(problems),
            "correct the fields named above and retry",
        )
    return entry


# -- the entry a lifecycle write changes --------------------------------------------------------
def load_writable(memory: Memory, entry_id: Any) -> tuple[Path, Entry]:
    """The file and entry a lifecycle write (supersede, archive) changes: `NotFound` unless
    `entry_id` is a KB entry; `ReadOnly` for an episode or a corpus file."""
    if not isinstance(entry_id, str) or not entry_id:
        raise Invalid("id: missing", "pass the id of an entry (memory_search shows ids)")
    limits.check_text("id", entry_id, limits.MAX_ID, one_line=True)
    if "/" in entry_id:
        label = entry_id.split("/", 1)[0]
        if label == EPISODES:
            raise ReadOnly(
                f"{entry_id} is an episode (a captured turn); episodes are read-only",
                "add what it taught with memory_add, or wait for the gate to promote it",
            )
        if any(c.label == label for c in memory.corpora()):
            raise ReadOnly(
                f"{entry_id} belongs to the read-only corpus {label!r}; corpus files are "
                "edited in their own repository, not through memory"
            )
    path = memory.find_path(entry_id) if "/" not in entry_id else None  # `team:x`: team's
    if path is None:
        raise NotFound(f"no entry with id {entry_id!r}")
    return path, read_kb_entry(path)  # a hand-broken file: InvalidFile, code `document`


# -- the files it writes ------------------------------------------------------------------------
def check_target(kb: Path, path: Path) -> None:
    """A file the gateway writes must be `kb/<type>/<name>.md` (or fanned out,
    `kb/<type>/<xx>/<name>.md`) in real folders inside the KB, and either absent or a regular
    file (never a link)."""
    folder = path.parent
    for p in (*([folder.parent] if folder.parent != kb else []), folder, path):
        if p.is_symlink():
            raise Invalid(
                f"{p} is a symbolic link; memory-agent never writes through links in kb/",
                f"replace {p} with the real {'folder' if p == folder else 'file'}",
            )
    if folder.exists() and not folder.is_dir():
        raise Invalid(f"{folder} is not a folder", f"move {folder} out of the way")
    if path.exists() and not path.is_file():
        raise Invalid(f"{path} is not a regular file", f"move {path} out of the way")
    if not path.resolve().is_relative_to(kb.resolve()):
        raise Invalid(f"{path} is outside the knowledge base {kb}")


def check_committed(repo: KBRepo, path: Path) -> None:
    """Refuse to change a file that holds someone's uncommitted work."""
    state = repo.state(path)
    if state is not None:
        rel = path.relative_to(repo.path)
        raise Conflict(
            f"kb/{rel} has uncommitted changes ({state}); memory-agent never commits or "
            "overwrites work that is not in git",
            f"commit it (git -C {repo.path} commit -- {rel}) or revert it "
            f"(git -C {repo.path} checkout -- {rel}), then retry",
        )


def check_secrets(kb: Path, files: dict[Path, str], message: str) -> None:
    """Refuse a write that adds what the push check (`sync.publish`) would refuse: a real-
    looking secret a file did not hold before, or one in the commit's message - so nothing
    that cannot be pushed is committed. The KB's allow-list, with what this write adds to it,
    releases a finding by its fingerprint."""
    allowed = read_allowed(kb) | allowed_in(files.get(kb / ALLOW_FILE))
    fix = (
        "leave the secret out and say where it is kept instead (a vault path, an environment "
        "variable's name); if it is not a secret, a person releases it with `memory-agent "
        "secrets allow {fp} --reason '...'` (README 'Secrets in the KB'), then write again"
    )
    for path, text in files.items():
        name = path.relative_to(kb).as_posix()
        try:
            before = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            before = None
        added = new_in(scannable(name, text), scannable(name, before), allowed)
        if added:
            raise SecretFound(
                f"kb/{name} would hold what looks like a secret at "
                f"line {line_of(added[0], text)} ({describe(added[0])}); nothing was written",
                fix.format(fp=fingerprint(added[0])),
            )
    hits = found(message, allowed)
    if hits:
        raise SecretFound(
            f"the commit message would hold what looks like a secret ({describe(hits[0])}); "
            "nothing was written",
            fix.format(fp=fingerprint(hits[0])),
        )
