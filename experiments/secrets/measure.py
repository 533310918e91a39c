"""The push check's miss and false-positive rates on the corpora of experiments/secrets, now and
as it was (the eager redactor as a refusal, read from the commit before issue 32/33's change).

    .venv/bin/python experiments/secrets/measure.py [--seed 7] [--base 02ce5a6] [--json] [--tiny]
    .venv/bin/python experiments/secrets/measure.py --held-out --seed 11   # the held-out run

Prints, for each check, the positives it missed and the ordinary notes it refused, and the
leaks of the eager redactor (a 12-character piece of a secret left after `redact`).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from corpus import (  # noqa: E402
    held_out_notes,
    in_prose,
    leaked,
    ordinary_notes,
    secret_shapes,
    tokens,
    variants,
)

from memory_agent.intake.redact import redact  # noqa: E402
from memory_agent.intake.secrets import found  # noqa: E402

BASE = "02ce5a6"  # main before the change (the push check as issue 33 found it)


def old_check(base: str):
    """`redact(text) != text` with the redactor of `base` (standard library only)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{base}:memory_agent/intake/redact.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("old_redact")
    exec(compile(source, "old_redact.py", "exec"), module.__dict__)  # noqa: S102
    return lambda text: module.redact(text) != text


def corpora(seed: int, tiny: bool, held_out: bool = False):
    rng = random.Random(seed)
    positives = []
    for name, token in tokens(rng).items():
        positives.append((f"token {name}", token))
        positives.append((f"token {name} in prose", in_prose(name, token)))
    shapes = secret_shapes(rng)
    for shape in shapes:
        for variant, text, secrets in variants(shape):
            positives.append((f"{shape.name} ({variant})", text, secrets))
    negatives = held_out_notes() if held_out else ordinary_notes()
    if tiny:
        positives, negatives = positives[::10], negatives[::5]
    return positives, negatives


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--base", default=BASE, help="the commit whose check is 'before'")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="a tenth of the corpus (the test suite)")
    ap.add_argument(
        "--held-out",
        action="store_true",
        help="the notes written after the tuning (`held_out_notes`); use another --seed too",
    )
    args = ap.parse_args(argv)
    positives, negatives = corpora(args.seed, args.tiny, args.held_out)
    checks = {"now": lambda text: bool(found(text))}
    try:
        checks["before"] = old_check(args.base)
    except subprocess.CalledProcessError:
        print(f"(no commit {args.base} here: the 'before' check is left out)", file=sys.stderr)
    report = {"positives": len(positives), "negatives": len(negatives)}
    for name, check in checks.items():
        missed = [p[0] for p in positives if not check(p[1])]
        refused = [n for n, text in negatives if check(text)]
        report[name] = {
            "missed": len(missed),
            "miss rate": round(len(missed) / len(positives), 3),
            "refused": len(refused),
            "false-positive rate": round(len(refused) / len(negatives), 3),
            "missed items": missed,
            "refused notes": refused,
        }
    leaks = [p[0] for p in positives if len(p) == 3 and leaked(redact(p[1]), p[2])]
    report["capture leaks"] = {"variants": sum(len(p) == 3 for p in positives), "leaked": leaks}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{report['positives']} positives, {report['negatives']} ordinary notes")
    for name in checks:
        r = report[name]
        print(
            f"{name:7s} missed {r['missed']} ({r['miss rate']:.1%}), refused {r['refused']} "
            f"notes ({r['false-positive rate']:.1%})"
        )
        for item in r["missed items"]:
            print(f"        missed: {item}")
        for item in r["refused notes"]:
            print(f"        refused: {item}")
    c = report["capture leaks"]
    print(f"capture (eager redaction): {len(c['leaked'])} of {c['variants']} variants leak a piece")
    for item in c["leaked"]:
        print(f"        leaked: {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
