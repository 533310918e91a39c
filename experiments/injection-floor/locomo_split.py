"""LoCoMo in the bench format, both splits, with the adversarial questions kept apart.

    .venv/bin/python experiments/injection-floor/locomo_split.py SNAPSHOT_ZIP OUT_DIR [--check DEV]

SNAPSHOT_ZIP is `data/locomo10.zip` of snap-research/locomo at e76cdff4 (the file
../shared/bench/locomo/SOURCE.md names). The conversion follows that SOURCE.md: one document per
dialogue turn (`<conv>_<dia_id>`, `:` -> `-`), the title "speaker, date-time (session n, turn
D..)", the text "speaker: utterance" plus "[shared a photo: caption]"; a query per QA item, its
evidence the relevant turns. Conversations sorted by sample id; the first six are dev, the last
four held out.

LoCoMo marks an adversarial question with `category: 5` and an `adversarial_answer` key in
place of `answer`: a question whose premise is false for that speaker (asked about the other
one), so the conversation does not answer it. SOURCE.md's conversion drops them; here they go
to `adversarial.jsonl` of each split ({"qid", "query", "adversarial_answer", "evidence"}),
evidence being the turns the false premise was taken from.

`--check DEV`: the dev split written here must equal ../shared/bench/locomo (corpus, queries,
qrels): the held-out split then is the one the team's evaluation holds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from pathlib import Path

CATEGORY = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain"}
BROKEN = {("conv-42", "D10:19"), ("conv-47", "D4:36")}


def turn_id(conv: str, dia: str) -> str:
    return f"{conv}_{dia.replace(':', '-')}"


def evidence_of(conv: str, refs: list[str], turns: set[str]) -> list[str]:
    out = []
    for ref in refs:
        for part in re.split(r"[;,]\s*|\s+", str(ref).strip()):
            if part == "D:11:26":
                part = "D11:26"
            if not re.fullmatch(r"D\d+:\d+", part) or (conv, part) in BROKEN:
                continue
            doc = turn_id(conv, part)
            if doc in turns and doc not in out:
                out.append(doc)
    return out


def convert(zip_path: Path, out: Path) -> dict[str, dict[str, int]]:
    with zipfile.ZipFile(zip_path) as z:
        numbered = {}
        for name in z.namelist():
            found = re.search(r"/(\d+)\.json$", name)
            if found:
                numbered[int(found.group(1))] = name
        convs = [(f"conv-{n}", json.loads(z.read(numbered[n]))) for n in sorted(numbered)]
    counts = {}
    for split, part in (("dev", convs[:6]), ("heldout", convs[6:])):
        folder = out / split
        folder.mkdir(parents=True, exist_ok=True)
        corpus, queries, qrels, adversarial = [], [], [], []
        for conv, data in part:
            turns = set()
            n = 1
            while f"session_{n}" in data:
                when = data.get(f"session_{n}_date_time", "")
                for t in data[f"session_{n}"]:
                    doc = turn_id(conv, t["dia_id"])
                    text = f"{t['speaker']}: {t['text'].strip()}"
                    if t.get("blip_caption"):
                        text += f" [shared a photo: {t['blip_caption']}]"
                    title = f"{t['speaker']}, {when} (session {n}, turn {t['dia_id']})"
                    corpus.append({"id": doc, "title": title, "text": text})
                    turns.add(doc)
                n += 1
            for q, item in enumerate(data["qa"]):  # numbered over every QA item
                evidence = evidence_of(conv, item.get("evidence") or [], turns)
                if item.get("category") == 5:
                    adversarial.append(
                        {
                            "qid": f"{conv}_adv{len(adversarial):03d}",
                            "query": item["question"].strip(),
                            "adversarial_answer": item.get("adversarial_answer"),
                            "evidence": evidence,
                        }
                    )
                    continue
                qid = f"{conv}_q{q:03d}"
                if not evidence:
                    continue
                queries.append(
                    {
                        "qid": qid,
                        "query": item["question"].strip(),
                        "answer": str(item.get("answer")),
                        "category": CATEGORY[item["category"]],
                    }
                )
                qrels += [f"{qid}\t{d}\t1" for d in evidence]
        for name, items in (
            ("corpus.jsonl", corpus),
            ("queries.jsonl", queries),
            ("adversarial.jsonl", adversarial),
        ):
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items)
            (folder / name).write_text(text, encoding="utf-8")
        (folder / "qrels.tsv").write_text("".join(x + "\n" for x in qrels), encoding="utf-8")
        counts[split] = {
            "docs": len(corpus),
            "queries": len(queries),
            "qrels": len(qrels),
            "adversarial": len(adversarial),
        }
    return counts


def tiny_zip(folder: Path) -> Path:
    """A LoCoMo-shaped snapshot of ten two-turn conversations (the smallest real conversion)."""
    path = folder / "locomo10.zip"
    with zipfile.ZipFile(path, "w") as z:
        for n in range(1, 11):
            turns = [
                {"speaker": "Ann", "dia_id": "D1:1", "text": f"I adopted dog number {n}."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a dog"},
            ]
            qa = [
                {
                    "question": "Which dog did Ann adopt?",
                    "answer": n,
                    "evidence": ["D1:1"],
                    "category": 4,
                },
                {
                    "question": "Which dog did Bo adopt?",
                    "adversarial_answer": n,
                    "evidence": ["D1:1"],
                    "category": 5,
                },
            ]
            data = {"session_1": turns, "session_1_date_time": "1 May 2023", "qa": qa}
            z.writestr(f"data/multimodal_dialog/locomo10_v2/{n}.json", json.dumps(data))
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("zip", type=Path, nargs="?")
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--check", type=Path, help="the shared dev split to compare with")
    ap.add_argument("--tiny", action="store_true", help="convert a tiny LoCoMo-shaped snapshot")
    args = ap.parse_args()
    if args.tiny:
        import tempfile

        work = Path(tempfile.mkdtemp(prefix="locomo-split-"))
        args.zip, args.out = tiny_zip(work), work / "out"
    elif args.zip is None or args.out is None:
        ap.error("SNAPSHOT_ZIP and OUT_DIR are needed (or --tiny)")
    counts = convert(args.zip, args.out)
    print(json.dumps(counts))
    if args.check:
        for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
            mine = (args.out / "dev" / name).read_text(encoding="utf-8")
            theirs = (args.check / name).read_text(encoding="utf-8")
            if mine != theirs:
                a, b = mine.splitlines(), theirs.splitlines()
                diff = next(
                    (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                    min(len(a), len(b)),
                )
                print(
                    f"{name}: differs at line {diff + 1}:\n  mine   {a[diff : diff + 1]}\n  shared {b[diff : diff + 1]}"
                )
                return 1
            print(f"{name}: identical to {args.check / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
