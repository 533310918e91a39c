"""Secrets that must never be stored (`GH`, `AWS_SECRET`), and every byte stored under a folder as
text, gzipped files unpacked (`stored`)."""

from __future__ import annotations

import gzip
from pathlib import Path

GH = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def stored(home_or_folder: Path) -> str:
    """Every byte under a folder as text, gzipped files unpacked (what `grep -r` plus
    `zgrep` would see)."""
    out = []
    for path in sorted(Path(home_or_folder).rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        out.append(data.decode("utf-8", "replace"))
    return "\n".join(out)
