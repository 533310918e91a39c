"""Precision and recall of the gate's instruction test on hand-labelled captured lines (see
README.md beside this file).

.venv/bin/python experiments/gate-instructions/measure.py [--tiny] [--show-held-out] [--catalogues]

`dev.jsonl` is what the rule was tuned on; `held_out.jsonl` was written before the rule changed
and `evasions.jsonl` after, to pass it; both are reported separately (their wrong lines only
with --show-held-out, not while tuning). --catalogues: the share of the installed tools' own
messages flagged.
"""

import argparse
import gettext
import json
from pathlib import Path

from memory_agent.capture.lessons import looks_like_instruction

HERE = Path(__file__).parent
LOCALE = Path("/usr/share/locale/zh_CN/LC_MESSAGES")
CATALOGUES = (
    "git",
    "apt",
    "libapt-pkg6.0",
    "dpkg",
    "make",
    "coreutils",
    "gnupg2",
    "initdb-15",
    "libpq5-15",
)


def measure(rows: list[dict]) -> dict:
    tp = fp = fn = tn = 0
    wrong = []
    for row in rows:
        flagged = looks_like_instruction(row["text"])
        instruction = row["label"] == "instruction"
        tp += flagged and instruction
        fp += flagged and not instruction
        fn += instruction and not flagged
        tn += not instruction and not flagged
        if flagged != instruction:
            wrong.append(("missed" if instruction else "flagged", row["text"]))
    return {
        "n": len(rows),
        "instructions": tp + fn,
        "benign": fp + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "wrong": wrong,
    }


def ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f} ({part}/{whole})" if whole else "-"


def catalogue_lines(name: str) -> list[str]:
    """Each message of an installed tool's zh_CN catalogue, in English and in Chinese."""
    path = LOCALE / f"{name}.mo"
    if not path.exists():
        return []
    with open(path, "rb") as fh:
        catalog = gettext.GNUTranslations(fh)._catalog  # noqa: SLF001 - gettext's own table
    out = []
    for key, value in catalog.items():
        key = key[1] if isinstance(key, tuple) else key  # plural forms: (msgid, n)
        if key:  # "" is the catalogue's header
            out += [str(key), str(value)]
    return [line for line in dict.fromkeys(out) if line.strip()]


def catalogues(tiny: bool) -> None:
    print("\n| catalogue (zh_CN .mo) | messages (English + Chinese) | flagged |")
    print("|---|---|---|")
    flagged = []
    for name in CATALOGUES:
        lines = catalogue_lines(name)[: 50 if tiny else None]
        if not lines:
            print(f"| {name} | not installed | |")
            continue
        hits = [line for line in lines if looks_like_instruction(line)]
        flagged += [(name, line) for line in hits]
        print(f"| {name} | {len(lines)} | {len(hits)} ({len(hits) / len(lines):.2%}) |")
    print("\nflagged catalogue messages:")
    for name, line in flagged:
        print(f"  {name}: {' '.join(line.split())[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny", action="store_true", help="the first rows of each file")
    parser.add_argument("--show-held-out", action="store_true", help="their wrong lines too")
    parser.add_argument("--catalogues", action="store_true", help="installed tools' messages")
    args = parser.parse_args()
    print("| set | lines (instr / benign) | precision | recall | benign flagged |")
    print("|---|---|---|---|---|")
    results = {}
    for name in ("dev", "held_out", "evasions"):
        rows = [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text().splitlines()]
        if args.tiny:
            rows = [r for r in rows if r["label"] == "benign"][:3] + [
                r for r in rows if r["label"] == "instruction"
            ][:3]
        results[name] = r = measure(rows)
        print(
            f"| {name} | {r['n']} ({r['instructions']} / {r['benign']}) | "
            f"{ratio(r['tp'], r['tp'] + r['fp'])} | {ratio(r['tp'], r['instructions'])} | "
            f"{ratio(r['fp'], r['benign'])} |"
        )
    for name, r in results.items():
        if name != "dev" and not args.show_held_out:
            continue
        print(f"\n{name}: wrong lines")
        for kind, text in r["wrong"]:
            print(f"  {kind}: {text}")
    if args.catalogues or args.tiny:
        catalogues(args.tiny)


if __name__ == "__main__":
    main()
