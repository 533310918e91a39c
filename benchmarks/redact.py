"""Redaction time (`memory_agent.intake.redact`) on 10 KB and 1 MB inputs of several shapes.

    .venv/bin/python benchmarks/redact.py [--sizes 10000,1000000] [--repeat 3] [--json]
    REDACT_ROOT=/path/to/another/checkout .venv/bin/python benchmarks/redact.py   # its code

Shapes: plain prose (with a few secrets), one long token-like run (hex: what made the old
patterns backtrack), JSON (a tool response with secret keys, read on its structure), a shell
log (commands with flags, URLs, `KEY=value` lines), an adversarial run of `token=`, and one
`mysql` followed by a run of `-p` flags (each `-p` once looked 500 characters back); and the
encoded runs redaction decodes since issue 32: one long base64 run of random bytes (decoded,
not text), base64 of prose wrapped at 76 columns as `base64` prints it (decoded, text, read
by every rule), base64 lines each holding a secret, and Markdown notes hard-wrapped at 72
columns (every line joined in the folded view). For
each shape and size it prints the best of `--repeat` runs, in milliseconds and MB/s; the
journal redacts about 64 K characters of a record plus what it keeps (`journal.REDACT_BUDGET`),
so the 1 MB rows are the worst case of `memory-agent scrub` and of a daemon, not of a hook.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ.get("REDACT_ROOT") or str(Path(__file__).resolve().parent.parent))

from memory_agent.intake.redact import redact  # noqa: E402


def shapes(size: int) -> dict[str, str]:
    rng = random.Random(17)
    words = (
        "the build failed because the config was not loaded when the worker started "
        "and the retry loop ran out of attempts before the cache warmed up"
    ).split()
    prose = []
    while sum(map(len, prose)) < size:
        prose.append(" ".join(rng.choice(words) for _ in range(14)) + ".")
        if rng.random() < 0.02:
            prose.append("export GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a")
    record = {
        "stdout": "ok " * 20,
        "env": {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG"},
        "config": {"db": {"password": "hunter2hunter2", "host": "db.internal"}},
        "items": [{"name": f"item-{i}", "value": i} for i in range(8)],
    }
    records = []
    while sum(len(json.dumps(r)) for r in records) < size:
        records.append(record)
    log_lines = [
        "$ curl -u ci:Hunt3rPassw0rd https://api.example.com/v1/items?page=2",
        "$ mysql -uroot -pR00tPassw0rd -h db shop < dump.sql",
        "DATABASE_URL=postgres://app:s3cret@db.internal:5432/app",
        "Step 4/9 : RUN pip install --no-cache-dir -r requirements.txt",
        "error: could not connect with password Tr0ub4dor&3 (user ci)",
    ]
    log = []
    while sum(map(len, log)) < size:
        log.append(rng.choice(log_lines))
    import base64

    random_bytes = bytes(rng.getrandbits(8) for _ in range(size * 3 // 4))
    wrapped = base64.encodebytes(" ".join(prose).encode()).decode()
    blob = base64.b64encode(b"aws_secret_access_key=q8Zr2LmW4xTn7VbK9pQsD3fH6jL1nR5tV8yB2cE4")
    notes = []
    while sum(map(len, notes)) < size:
        line = " ".join(rng.choice(words) for _ in range(12))
        notes.append(line[:72])
    return {
        "prose": " ".join(prose)[:size],
        "token-like run (hex)": ("0123456789abcdef" * (size // 16 + 1))[:size],
        "JSON (secret keys)": json.dumps(records),
        "shell log": "\n".join(log)[:size],
        "adversarial token=": ("token=" * (size // 6 + 1))[:size],
        "mysql -pQ -pQ ...": ("mysql " + "-pQ " * (size // 4 + 1))[:size],
        "base64 run (random)": base64.b64encode(random_bytes).decode()[:size],
        "base64 of prose (76 col)": wrapped[:size],
        "base64 with secrets": ((blob.decode() + "\n") * (size // (len(blob) + 1) + 1))[:size],
        "notes wrapped at 72": "\n".join(notes)[:size],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,1000000", help="input sizes in characters")
    parser.add_argument("--repeat", type=int, default=3, help="runs per input (best is kept)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for name, text in shapes(size).items():
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                redact(text)
                best = min(best, time.perf_counter() - t)
            rows.append(
                {
                    "shape": name,
                    "chars": len(text),
                    "ms": round(best * 1000, 2),
                    "mb_per_s": round(len(text) / best / 1e6, 2),
                }
            )
    if args.json:
        print(json.dumps({"rows": rows}))
        return 0
    print(f"{'shape':26s} {'chars':>9s} {'ms':>9s} {'MB/s':>7s}")
    for r in rows:
        print(f"{r['shape']:26s} {r['chars']:9d} {r['ms']:9.2f} {r['mb_per_s']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
