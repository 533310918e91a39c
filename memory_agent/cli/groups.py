"""The commands by job, as `memory-agent --help` lists them: a person looking for how to add
an entry or sync two machines finds it under its job, not in one flat list of thirty (with
the regulation app's `web` among them). Every command is in exactly one group."""

from __future__ import annotations

__all__ = ["GROUPS", "grouped"]

GROUPS = (
    ("start here", ("init", "connect", "status", "doctor", "model")),
    (
        "entries",
        (
            "add",
            "search",
            "get",
            "supersede",
            "archive",
            "resolve",
            "history",
            "importance",
            "import",
            "project",
        ),
    ),
    ("beyond this machine", ("remote", "sync", "kb", "secrets")),
    ("what the memory learns from sessions", ("proposals", "accept", "reject", "gate", "gc")),
    ("look and look after", ("ui", "rebuild", "scrub", "stop", "eval")),
    ("what agents and hooks run (rarely typed)", ("proxy", "hook", "daemon", "reader")),
    ("not the memory", ("web",)),
)


def grouped(helps: dict[str, str]) -> str:
    """The commands under their groups, each with its one-line help."""
    listed = [n for _, names in GROUPS for n in names]
    assert sorted(listed) == sorted(helps), "every command in exactly one group of GROUPS"
    width = max(len(n) for n in helps) + 2
    lines = []
    for title, names in GROUPS:
        lines.append(f"{title}:")
        lines += [f"  {n:<{width}}{helps[n]}" for n in names]
        lines.append("")
    return "\n".join(lines)
