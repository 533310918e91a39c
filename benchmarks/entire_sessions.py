"""Claude Code transcripts out of an Entire CLI checkpoints branch, one file per session.

    .venv/bin/python benchmarks/entire_sessions.py GIT_DIR OUT_DIR [--branch entire/checkpoints/v1]

The Entire CLI (github.com/entireio/cli, MIT) stores the agent sessions behind a repository's
commits on the branch `entire/checkpoints/v1`: `<xx>/<checkpoint>/<n>/full.jsonl` is the
whole transcript of one session as it was at that checkpoint, `<n>/metadata.json` names its
`session_id`, `agent` and `created_at`. A session is checkpointed again as it goes on, so the
same session appears in several checkpoints, each transcript a longer copy of the one before.

For each session this writes the transcript of its latest checkpoint to `OUT_DIR/<session
id>.jsonl` - the latest one whose blob the clone holds: a partial clone may lack the largest
files, and then an earlier checkpoint's (shorter) transcript stands in, and the session is
counted `truncated`; a session with no transcript at all is counted `missing`. Only what
`memory-agent import` recognises as a Claude Code transcript is kept (Gemini CLI sessions,
say, are counted `other_format`). `OUT_DIR/manifest.json` records the counts and, per session,
the checkpoint used. Nothing is changed in GIT_DIR; the transcripts stay out of any commit of
this project (they are the Entire repository's data: the converter is what this project
keeps).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], input=data, capture_output=True, check=True
    ).stdout


def blobs(git_dir: Path, specs: list[str]) -> list[bytes | None]:
    """The contents of `rev:path` specs (None for one the clone does not hold)."""
    out = git(git_dir, "cat-file", "--batch", data="".join(s + "\n" for s in specs).encode())
    found: list[bytes | None] = []
    pos = 0
    for _ in specs:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) < 3 or header[1] != b"blob":
            found.append(None)
            pos = end + 1
            continue
        size = int(header[2])
        found.append(out[end + 1 : end + 1 + size])
        pos = end + 1 + size + 1
    return found


def present(git_dir: Path, specs: list[str]) -> set[str]:
    """Which `rev:path` specs the clone holds the blob of."""
    out = git(git_dir, "cat-file", "--batch-check", data="".join(s + "\n" for s in specs).encode())
    return {
        spec
        for spec, line in zip(specs, out.decode().splitlines(), strict=True)
        if not line.endswith("missing") and " blob " in line
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="the repository's git directory (or .git)")
    parser.add_argument("out", type=Path, help="the folder to write the transcripts to")
    parser.add_argument("--branch", default="entire/checkpoints/v1")
    args = parser.parse_args()
    from memory_agent.capture.session_sources import detect

    branch = args.branch
    names = git(args.git_dir, "ls-tree", "-r", "--name-only", branch).decode().splitlines()
    metas = [n for n in names if n.count("/") == 3 and n.endswith("/metadata.json")]
    by_session: dict[str, list[tuple[str, str, str]]] = {}
    for path, raw in zip(metas, blobs(args.git_dir, [f"{branch}:{m}" for m in metas]), strict=True):
        meta = json.loads(raw or b"{}")
        if not meta.get("session_id"):
            continue
        folder = path.rsplit("/", 1)[0]
        by_session.setdefault(meta["session_id"], []).append(
            (str(meta.get("created_at") or ""), folder, str(meta.get("agent")))
        )
    transcripts = [f"{branch}:{f}/full.jsonl" for cps in by_session.values() for _, f, _ in cps]
    held = present(args.git_dir, transcripts)
    args.out.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter()
    sessions = {}
    for session_id, checkpoints in sorted(by_session.items()):
        checkpoints.sort()
        usable = [c for c in checkpoints if f"{branch}:{c[1]}/full.jsonl" in held]
        if not usable:
            counts["missing"] += 1
            continue
        created, folder, agent = usable[-1]
        target = args.out / f"{session_id}.jsonl"
        target.write_bytes(blobs(args.git_dir, [f"{branch}:{folder}/full.jsonl"])[0] or b"")
        if detect(target) != "claude-code":
            target.unlink()
            counts["other_format"] += 1
            continue
        truncated = usable[-1] is not checkpoints[-1]
        counts["truncated" if truncated else "complete"] += 1
        sessions[session_id] = {
            "checkpoint": folder,
            "created_at": created,
            "agent": agent,
            "truncated": truncated,
            "bytes": target.stat().st_size,
        }
    head = git(args.git_dir, "rev-parse", branch).decode().strip()
    manifest = {"branch": branch, "commit": head, "counts": dict(counts), "sessions": sessions}
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    total = sum(s["bytes"] for s in sessions.values())
    print(
        f"{len(sessions)} transcripts ({total / 1e6:.1f} MB) from {branch} at {head[:12]}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )


if __name__ == "__main__":
    main()
