"""The injection's absolute floor, measured through the product's own injection (the README).

    .venv/bin/python experiments/injection-floor/run.py LOCOMO_DIR [--split dev|heldout]
        [--floors none,0.15,0.2,...] [--max-queries N] [--work DIR] [--json] [--tiny]

LOCOMO_DIR holds `<split>/{corpus,queries,adversarial}.jsonl` and `qrels.tsv`
(`locomo_split.py` writes them). For each floor, every question goes through
`memory_agent.recall.injection.recall` - the function the daemon's prompt hook calls - on two
homes: the split's conversations (each turn a KB entry, each conversation its own project) and
the demo KB (a coding memory). Prints, per floor: characters injected per prompt and the share
of prompts that got nothing, for each set; the injection's evidence recall on the answerable
questions; the share of the demo KB's labelled queries whose answer is injected. `--tiny`: a
LoCoMo-shaped folder of two short conversations, written into the work folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from memory_agent import config
from memory_agent.index.memory import Memory
from memory_agent.kb.entries import Entry, render_entry
from memory_agent.recall import injection, policy

HERE = Path(__file__).resolve().parent
FLOORS = "none,0.15,0.2,0.25,0.3,0.35,0.4"
LIMIT, BUDGET = 6, 3000  # the defaults of recall_limit and inject_budget
CREATED = "2026-11-01T09:00:00Z"
# The results were measured with the memory's clock a month after CREATED: pinned, so that the
# entries' age (recency, dormancy) and so the figures do not depend on the day this is run.
os.environ.setdefault("MEMORY_AGENT_CLOCK", "2026-12-01T09:00:00Z")


def rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def entry_id(doc_id: str) -> str:
    return doc_id.lower().replace("_", "-")


def identity(conv: str) -> str:
    return f"example.com/locomo/{conv}"


def locomo_home(folder: Path, bench: Path) -> Memory:
    """A home whose KB holds every turn of the split as an entry, scoped to its conversation."""
    cfg = config.load({"home": str(folder), "embedder": "minilm"})
    Memory(cfg).init(embedder="minilm", sync=False)
    kb = folder / "kb"
    convs = set()
    for row in rows(bench / "corpus.jsonl"):
        conv = row["id"].split("_")[0]
        convs.add(conv)
        e = Entry(entry_id(row["id"]), row["title"], "note", "active", CREATED, row["text"], [], {})
        e.extra["scope"] = conv
        path = kb / "note" / f"{e.id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_entry(e), encoding="utf-8")
    (kb / "projects.yaml").write_text(
        "".join(f"{c}: {identity(c)}\n" for c in sorted(convs)), encoding="utf-8"
    )
    git = ["git", "-C", str(kb), "-c", "user.name=x", "-c", "user.email=x@x"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "locomo turns"], check=True)
    return opened(folder)


def opened(folder: Path) -> Memory:
    memory = Memory(config.load({"home": str(folder)}), resident=True)
    memory.require_home()
    with memory.session():
        memory.refresh()
    return memory


def demo_home(folder: Path) -> Memory:
    Memory(config.load({"home": str(folder), "embedder": "minilm"})).init(
        demo=True, embedder="minilm", sync=False
    )
    return opened(folder)


def inject(memory: Memory, query: str, project: str | None) -> injection.Recall:
    return injection.recall(memory, query, None, limit=LIMIT, project=project, budget=BUDGET)


def summary(found: list[injection.Recall]) -> dict:
    chars = [len(r.text) for r in found]
    return {
        "prompts": len(found),
        "chars_mean": round(statistics.fmean(chars), 1) if chars else 0.0,
        "chars_p95": sorted(chars)[int(0.95 * (len(chars) - 1))] if chars else 0,
        "nothing": round(sum(1 for r in found if not r.ids) / len(found), 3) if found else 0.0,
        "note_only": round(sum(1 for r in found if r.text and not r.ids) / len(found), 3)
        if found
        else 0.0,
    }


def recall_of(found: list[injection.Recall], wanted: list[set[str]]) -> float:
    shares = [len(w & set(r.ids)) / len(w) for r, w in zip(found, wanted, strict=True) if w]
    return round(statistics.fmean(shares), 4) if shares else 0.0


def set_floor(value: float | None) -> None:
    if value is None:
        policy.INJECT_FLOORS.pop("minilm", None)
    else:
        policy.INJECT_FLOORS["minilm"] = value


def measure(bench: Path, work: Path, floors: list[float | None], max_queries: int | None) -> dict:
    qrels: dict[str, set[str]] = {}
    for line in (bench / "qrels.tsv").read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].strip().isdigit():
            qrels.setdefault(parts[0], set()).add(entry_id(parts[1]))
    questions = [q for q in rows(bench / "queries.jsonl") if q["qid"] in qrels][:max_queries]
    adversarial = rows(bench / "adversarial.jsonl")[:max_queries]
    labelled = rows(HERE.parent / "reinforcement" / "queries.jsonl")[:max_queries]
    convs = sorted({q["qid"].split("_")[0] for q in questions})
    after = {c: convs[(i + 1) % len(convs)] for i, c in enumerate(convs)}  # another project
    locomo = locomo_home(work / "locomo", bench)
    demo = demo_home(work / "demo")
    out = {"split": bench.name, "questions": len(questions), "adversarial": len(adversarial)}
    out["floors"] = {}
    for floor in floors:
        set_floor(floor)
        conv = lambda q: q["qid"].split("_")[0]  # noqa: E731
        with locomo.session():
            own = [inject(locomo, q["query"], identity(conv(q))) for q in questions]
            adv = [inject(locomo, q["query"], identity(conv(q))) for q in adversarial]
            cross = [inject(locomo, q["query"], identity(after[conv(q)])) for q in questions]
        with demo.session():
            positives = [inject(demo, q["query"], None) for q in labelled]
            negatives = [inject(demo, q["query"], None) for q in [*questions, *adversarial]]
        premise = [{entry_id(d) for d in q.get("evidence") or []} for q in adversarial]
        answered = [
            bool(set(q["relevant"]) & set(r.ids)) for q, r in zip(labelled, positives, strict=True)
        ]
        out["floors"]["none" if floor is None else str(floor)] = {
            "locomo_answerable": {
                **summary(own),
                "evidence_recall": recall_of(own, [qrels[q["qid"]] for q in questions]),
            },
            "locomo_adversarial": {
                **summary(adv),
                "premise_turns_injected": recall_of(adv, premise),
            },
            "locomo_another_project": summary(cross),
            "demo_labelled": {
                **summary(positives),
                "answer_injected": round(sum(answered) / len(answered), 4) if answered else 0.0,
                "answered": [q["qid"] for q, a in zip(labelled, answered, strict=True) if a],
            },
            "demo_locomo_questions": summary(negatives),
        }
        print(f"floor {floor}: done", file=sys.stderr, flush=True)
    locomo.close()
    demo.close()
    return out


TINY_CORPUS = [
    (
        "conv-1_D1-1",
        "Ann, 1 May 2023 (session 1, turn D1:1)",
        "Ann: I adopted a dog named Biscuit.",
    ),
    ("conv-1_D1-2", "Bo, 1 May 2023 (session 1, turn D1:2)", "Bo: I started a pottery class."),
    ("conv-2_D1-1", "Cy, 2 May 2023 (session 1, turn D1:1)", "Cy: The bakery opens at six."),
    ("conv-2_D1-2", "Di, 2 May 2023 (session 1, turn D1:2)", "Di: I ran a marathon in Lisbon."),
]
TINY_QUERIES = [
    ("conv-1_q000", "What is the name of Ann's dog?", "conv-1_D1-1"),
    ("conv-2_q000", "Where did Di run a marathon?", "conv-2_D1-2"),
]


def write_tiny(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in TINY_CORPUS)
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"qid": q, "query": t}) + "\n" for q, t, _ in TINY_QUERIES)
    )
    (folder / "qrels.tsv").write_text("".join(f"{q}\t{d}\t1\n" for q, _, d in TINY_QUERIES))
    adversarial = {"qid": "conv-1_adv000", "query": "What class did Ann start?"}
    (folder / "adversarial.jsonl").write_text(json.dumps({**adversarial, "evidence": []}) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("locomo", nargs="?", type=Path)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--floors", default=FLOORS)
    ap.add_argument("--max-queries", type=int)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    floors = [None if f == "none" else float(f) for f in args.floors.split(",")]
    with tempfile.TemporaryDirectory(prefix="injection-floor-") as tmp:
        work = args.work or Path(tmp)
        if args.tiny:
            bench, args.max_queries = work / "tiny" / "dev", 3
            write_tiny(bench)
            floors = floors[:2]
        elif args.locomo is None:
            ap.error("LOCOMO_DIR is needed (or --tiny)")
        else:
            bench = args.locomo / args.split
        out = measure(bench, work, floors, args.max_queries)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"split {out['split']}: {out['questions']} questions, {out['adversarial']} adversarial")
    for floor, sets in out["floors"].items():
        print(f"\nfloor {floor}")
        for name, s in sets.items():
            extra = {k: v for k, v in s.items() if k not in ("answered",)}
            print(f"  {name:24s} {json.dumps(extra)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
