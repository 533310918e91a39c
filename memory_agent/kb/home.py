"""A home: the folders of one memory on disk, creating (or adopting) them, and the demo KB.

    <home>/config.toml  kb/ (git)  index/  cache/  events/  journal/  run/

Everything in a home may be private (notes, project facts, captured turns), so a home is
created owner-only: folders 0700; the files memory-agent writes are 0600.

The demo knowledge base ships with dates in 2026; copied into a new home they are moved to
the install time (its newest entry two days before `now`, its oldest 40 days before), keeping
their order and spacing, so a fresh demo home has a realistic spread of ages and nothing that
has gone dormant yet.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_agent import config as config_mod
from memory_agent.clock import Clock, iso, parse_time
from memory_agent.errors import NotReady
from memory_agent.kb.gitrepo import KBRepo

__all__ = ["DEMO_KB", "Home", "demo_entries"]

DEMO_KB = Path(__file__).parents[1] / "demo_kb"
SUBDIRS = ("kb", "index", "cache", "events", "journal", "run")
_DATE_LINE = re.compile(r"^(created|updated|superseded_at|archived_at): (\S+)$", re.M)
DEMO_NEWEST_AGE_DAYS = 2.0
DEMO_OLDEST_AGE_DAYS = 40.0


@dataclass(frozen=True)
class Home:
    root: Path
    repos: str = ""  # the `repos` setting: the corpora list (empty: <home>/repos.json)

    @classmethod
    def of(cls, cfg: config_mod.Config) -> Home:
        return cls(cfg.home_dir, str(cfg.repos or ""))

    @property
    def kb_dir(self) -> Path:
        return self.root / "kb"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def events_dir(self) -> Path:
        return self.root / "events"

    @property
    def journal_dir(self) -> Path:
        return self.root / "journal"

    @property
    def repos_file(self) -> Path:
        return Path(self.repos).expanduser() if self.repos else self.root / "repos.json"

    def exists(self) -> bool:
        return (self.kb_dir / ".git").exists()

    def require(self) -> None:
        """Raise `NotReady` (naming `memory-agent init`) unless the home has a KB repository."""
        if not self.exists():
            raise NotReady(
                f"no knowledge base at {self.kb_dir}",
                "run `memory-agent init` (or point MEMORY_AGENT_HOME / --home at your home)",
            )
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def create(self, *, demo: bool = False, clock: Clock | None = None) -> dict[str, Any]:
        """Create the folders and the KB repository (an existing one is adopted, never
        rewritten), and optionally add the demo entries in one commit."""
        old = os.umask(0o077)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            tightened = tighten(self.root, 0o700) + tighten(self.root / "config.toml", 0o600)
            for sub in SUBDIRS:
                (self.root / sub).mkdir(mode=0o700, exist_ok=True)
            repo, created = KBRepo.init(self.kb_dir)
            added: list[Path] = []
            if demo:
                for rel, text in demo_entries((clock or Clock()).now()).items():
                    dest = self.kb_dir / rel
                    if not dest.exists():
                        dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                        dest.write_text(text, encoding="utf-8")
                        added.append(dest)
        finally:
            os.umask(old)
        commit = repo.commit_paths(added, "Add the demo knowledge base") if added else repo.head()
        return {
            "home": str(self.root),
            "kb": str(self.kb_dir),
            "created_repo": created,
            "demo_entries_added": len(added),
            "commit": commit,
            "tightened": tightened,
        }


def tighten(path: Path, mode: int) -> list[str]:
    """Take group and other permissions off `path` (an existing home adopted by `init` may be
    0755, its config.toml 0644); `["<path>: 0755 -> 0700"]` if it changed, else `[]`."""
    try:
        current = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return []
    if not current & 0o077:
        return []
    path.chmod(current & mode)
    return [f"{path}: {current:04o} -> {current & mode:04o}"]


def demo_entries(now: float) -> dict[str, str]:
    """The demo entries ({relative path: text}) with their dates moved to `now`."""
    texts = {
        str(p.relative_to(DEMO_KB)): p.read_text(encoding="utf-8")
        for p in sorted(DEMO_KB.rglob("*.md"))
    }
    stamps = [
        parse_time(m.group(2))
        for t in texts.values()
        for m in _DATE_LINE.finditer(t[: t.index("\n---", 3)])
    ]
    oldest, newest = min(stamps), max(stamps)
    span = max(newest - oldest, 1.0)
    day = 86400.0
    scale = (DEMO_OLDEST_AGE_DAYS - DEMO_NEWEST_AGE_DAYS) * day / span
    end = now - DEMO_NEWEST_AGE_DAYS * day

    def move(match: re.Match[str]) -> str:
        when = end - (newest - parse_time(match.group(2))) * scale
        return f"{match.group(1)}: {iso(when)}"

    out = {}
    for rel, text in texts.items():
        front_end = text.index("\n---", 3)  # the frontmatter's closing line
        out[rel] = _DATE_LINE.sub(move, text[:front_end]) + text[front_end:]
    return out
