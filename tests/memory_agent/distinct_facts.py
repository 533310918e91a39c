"""Eighty distinct realistic entries: the demo KB's active entries plus the hand-written
"related" entries of the dedup calibration. Their nearest-neighbour similarity stays below the
near-duplicate threshold (experiments/dedup-threshold), so dedup must let all of them through."""

import json
from functools import cache
from pathlib import Path

from memory_agent.index.memory import DEMO_KB
from memory_agent.kb.entries import read_entry
from memory_agent.kb.files import kb_files

REWORDINGS = (
    Path(__file__).resolve().parents[2] / "experiments" / "dedup-threshold" / "rewordings.jsonl"
)


@cache
def facts() -> list[tuple[str, str]]:
    out = [(e.title, e.body) for e in map(read_entry, kb_files(DEMO_KB)[0]) if e.status == "active"]
    for line in REWORDINGS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["kind"] == "related":
            out.append((row["title"], row["body"]))
    return out


def fact(worker: int, n: int) -> tuple[str, str]:
    return facts()[worker * 10 + n]
