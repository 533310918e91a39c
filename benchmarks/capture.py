"""Replay benchmark of memory that keeps itself, on LoCoMo's real conversations.

    .venv/bin/python benchmarks/capture.py [--bench ../shared/bench/locomo] [--max-queries N]
        [--work DIR [--reuse]] [--legacy] [--projects one|each [--per-conversation N]] [--json]
        [--tiny]

Runs as shipped: the default settings (the gate on in its default `propose` mode, run by the
daemon after every Stop; the prompt hook capturing and injecting), only the retention
lengthened so 2023's turns stay searchable.

1. A fresh home (MiniLM, no demo entries). Every turn of every session of every dev
   conversation goes, in order, through the real `memory-agent hook` command as an agent
   session would send it: a `prompt` hook (the turn, with its date; the clock set to the
   session's date) and a `stop` hook. Each turn becomes one episode.
2. Each question is asked through the `prompt` hook of a fresh session (capturing, as
   shipped: each question becomes an episode later questions may meet, and its Stop runs the
   gate); the episodes named in the injected context are mapped back to LoCoMo turns and
   checked against the question's evidence (qrels). `--legacy` asks them as before this
   change: capture off for the questions, the gate off.
3. The same question through `memory_search` (include_episodes, limit 8): the recall@8 of
   searching the raw turns directly - the ceiling.

With --work DIR the home and the replay's record stay in DIR; --reuse then asks the questions
again without replaying (to compare recall settings on the same captured turns).

Projects (issue 20, ADR 0014). Without `--projects` the hooks get no `cwd` (no project:
everything global, as before scopes). `--projects each` gives each LoCoMo conversation its own
project - a git repository of its own under DIR/repos with its own `origin` remote
(`git@example.com:locomo/conv-N.git`; no network is touched) - and sends every hook of a
conversation's turns, and of its questions, with `cwd` set to that repository; the direct
search is made from it too. `--projects one` puts every conversation in one such repository:
the single-project run to compare with. Then every injected id (the replay's prompts, the
questions, and a `session-start` hook run in each repository after the questions) is mapped
back to its conversation: `other_conversation_*` counts the snippets injected from another
conversation - with `each`, from another project (must be 0); with `one` they are allowed,
and the count shows the check sees them. Injected characters are reported against
`inject_budget` (mean, p95, max), and the session start's digest likewise.
`--per-conversation N` replays only the first N turns of each conversation (a subset that
keeps every project), and asks only the questions whose evidence was replayed.

`--tiny` replays a LoCoMo-shaped bench of two short conversations about much the same things
(written into the work folder) instead of ../shared/bench: the smallest real run.

Prints: evidence recall of the injection and of direct search, injected characters per
prompt, p50/p95 latency of the capture hook (stop) and of the injecting hook (prompt), each
a whole process start to exit, the journal's size, and the gate: its mode, the proposals it
made, and what its last run (by hand, after the questions) read and took. Needs
../shared/bench (skips with a message otherwise).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memory_agent import config
from memory_agent.capture.gate import read_state as gate_state
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.serve.mcp_config import hook_command

ROOT = Path(__file__).resolve().parents[1]
TITLE = re.compile(
    r"^(?P<speaker>[^,]+), (?P<when>.+) \(session (?P<session>\d+), turn (?P<turn>.+)\)$"
)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))] if ordered else 0.0


def parse_when(text: str) -> float:
    """'1:56 pm on 8 May, 2023' -> a timestamp (UTC)."""
    when = dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)
    return when.timestamp()


def turns(bench: Path) -> list[dict]:
    out = []
    for line in (bench / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        m = TITLE.match(row["title"])
        if not m:
            continue
        conv = row["id"].split("_", 1)[0]
        turn = m.group("turn").split(":")[-1]
        out.append(
            {
                "id": row["id"],
                "conv": conv,
                "session": int(m.group("session")),
                "turn": int(turn) if turn.isdigit() else 0,
                "when": parse_when(m.group("when")),
                "date": m.group("when"),
                "text": row["text"],
            }
        )
    return sorted(out, key=lambda t: (t["conv"], t["session"], t["turn"]))


TINY = {  # two conversations alike on purpose: a leak between their projects would show
    "conv-1": [
        ("Alice", "I adopted a dog named Biscuit last spring."),
        ("Bob", "Biscuit! Does he like the park by the river?"),
        ("Alice", "He does. I also started a pottery class on Tuesdays."),
    ],
    "conv-2": [
        ("Carol", "We adopted a dog named Pepper in the winter."),
        ("Dan", "Pepper is a good name. Is she calm at the park?"),
        ("Carol", "Mostly. I also joined a painting class on Thursdays."),
    ],
}
TINY_QUESTIONS = [
    ("conv-1_q000", "What is the name of Alice's dog?", "conv-1_D1-1"),
    ("conv-1_q001", "Which class did Alice start?", "conv-1_D2-3"),
    ("conv-2_q000", "What is the name of Carol's dog?", "conv-2_D1-1"),
    ("conv-2_q001", "Which class did Carol join?", "conv-2_D2-3"),
]


def write_tiny(folder: Path) -> Path:
    """A LoCoMo-shaped bench: each conversation's turns in two sessions, and four questions."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for conv, said in TINY.items():
        for n, (speaker, text) in enumerate(said, 1):
            session = 1 if n == 1 else 2
            when = f"{n}:00 pm on {session} May, 2023"
            rows.append(
                {
                    "id": f"{conv}_D{session}-{n}",
                    "title": f"{speaker}, {when} (session {session}, turn D{session}:{n})",
                    "text": f"{speaker}: {text}",
                }
            )
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"qid": q, "query": text}) + "\n" for q, text, _ in TINY_QUESTIONS)
    )
    (folder / "qrels.tsv").write_text("".join(f"{q}\t{d}\t1\n" for q, _, d in TINY_QUESTIONS))
    return folder


def make_repos(work: Path, names: list[str]) -> dict[str, Path]:
    """A git repository per name under work/repos, each with its own origin remote."""
    repos = {}
    for name in names:
        repo = work / "repos" / name
        if not (repo / ".git").exists():
            repo.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(repo),
                    "remote",
                    "add",
                    "origin",
                    f"git@example.com:locomo/{name}.git",
                ],
                check=True,
            )
        repos[name] = repo
    return repos


def stats(chars: list[int]) -> dict:
    return {
        "mean": round(sum(chars) / len(chars), 1) if chars else 0.0,
        "p95": pct(chars, 0.95),
        "max": max(chars, default=0),
    }


def run_hook(home: Path, event: str, payload: dict, env: dict) -> tuple[float, str]:
    """One hook process, the command `memory-agent init` prints for Claude Code."""
    t = time.perf_counter()
    proc = subprocess.run(
        hook_command(home, event),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
    )
    took = (time.perf_counter() - t) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"hook {event} failed: {proc.stderr}")
    return took, proc.stdout


def injected_ids(stdout: str) -> tuple[list[str], int]:
    if not stdout.strip():
        return [], 0
    text = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    return re.findall(r"^- \[([^\]]+)\]", text, re.M), len(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench" / "locomo")
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--max-turns", type=int, default=None, help="a quick smoke run")
    parser.add_argument("--work", type=Path, default=None, help="keep the home here")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="skip the replay: ask the questions of the home a previous run left in --work",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--legacy",
        action="store_true",
        help="the earlier method, for comparison: the gate off, questions not captured",
    )
    parser.add_argument(
        "--projects",
        choices=("one", "each"),
        default=None,
        help="each: a git repository (project) per conversation; one: all in one repository",
    )
    parser.add_argument(
        "--per-conversation",
        type=int,
        default=None,
        help="replay only the first N turns of each conversation (a subset keeping every one)",
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny bench of two conversations")
    args = parser.parse_args()
    if args.tiny:
        args.work = args.work or Path(tempfile.mkdtemp(prefix="memory-agent-capture-"))
        args.bench = write_tiny(args.work / "tiny-bench")
    if not (args.bench / "corpus.jsonl").is_file():
        print(f"skipped: no LoCoMo bench at {args.bench} (it lives in ../shared/bench)")
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="memory-agent-capture-"))
    home = work / "home"
    cache = Path(os.environ.get("MEMORY_AGENT_CACHE") or work / "cache")
    env = dict(
        os.environ,
        MEMORY_AGENT_HOME=str(home),
        MEMORY_AGENT_EMBEDDER="minilm",
        MEMORY_AGENT_CACHE=str(cache),
        MEMORY_AGENT_IDLE_EXIT="0",
        MEMORY_AGENT_JOURNAL_RETENTION_DAYS="36500",
    )  # 2023 turns stay searchable
    if args.legacy:
        env["MEMORY_AGENT_GATE"] = "off"
    os.environ.update(env)  # the daemon the client starts gets the same settings
    saved = work / "replay.json"
    if args.reuse and not saved.is_file():
        raise SystemExit(f"--reuse: no earlier replay in {work} (run once with --work {work})")
    if not args.reuse:
        Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    client = DaemonClient(home, timeout=600)
    client.stop(wait=True)  # a daemon with this checkout's code and these settings
    client.ensure()
    client.admin("refresh")
    # 1. replay every turn
    episode_of: dict[str, str] = {}
    capture_ms, inject_ms, count = [], [], {}
    all_turns = turns(args.bench)
    if args.per_conversation is not None:
        seen: dict[str, int] = {}
        kept = []
        for t in all_turns:
            seen[t["conv"]] = seen.get(t["conv"], 0) + 1
            if seen[t["conv"]] <= args.per_conversation:
                kept.append(t)
        all_turns = kept
    all_turns = all_turns[: args.max_turns]
    convs = sorted({t["conv"] for t in all_turns})
    if args.projects == "each":
        repo_of = make_repos(work, convs)
    elif args.projects == "one":
        one = make_repos(work, ["locomo"])["locomo"]
        repo_of = dict.fromkeys(convs, one)
    else:
        repo_of = {}

    def where(conv: str) -> dict:  # the hook payload's cwd: the conversation's repository
        return {"cwd": str(repo_of[conv])} if conv in repo_of else {}

    def conv_of(doc: str) -> str | None:  # an injected id -> the conversation it came from
        if doc in episode_of:
            return episode_of[doc].split("_", 1)[0]
        found = re.match(r"episodes/question-(conv-\d+)_", doc)
        return found.group(1) if found else None

    def foreign(ids: list[str], conv: str, where: str) -> None:
        """Count the snippets of another conversation (another project's with `each`; in one
        project they are allowed: the count shows the check sees them) and of none."""
        convs_of = [conv_of(i) for i in ids]
        cross[where] += sum(1 for c in convs_of if c and c != conv)
        cross["unmapped"] += convs_of.count(None)

    replay_chars, cross = [], {"replay": 0, "questions": 0, "start": 0, "unmapped": 0}
    started = time.perf_counter()
    if args.reuse:
        state = json.loads(saved.read_text())
        episode_of, capture_ms, inject_ms = state["episodes"], state["capture"], state["inject"]
        count, all_turns = state["sessions"], all_turns[: state["turns"]]
        replay_chars, cross = state.get("replay_chars", []), state.get("cross", cross)
    for i, t in enumerate([] if args.reuse else all_turns):
        session = f"{t['conv']}-s{t['session']}"
        count[session] = count.get(session, 0) + 1
        episode_of[f"episodes/{session}/{count[session]}"] = t["id"]
        turn_env = dict(
            env,
            MEMORY_AGENT_CLOCK=dt.datetime.fromtimestamp(
                t["when"] + count[session], dt.UTC
            ).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        prompt = f"[{t['date']}] {t['text']}"
        took, out = run_hook(
            home,
            "prompt",
            {
                "session_id": session,
                "prompt": prompt,
                "hook_event_name": "UserPromptSubmit",
                **where(t["conv"]),
            },
            turn_env,
        )
        inject_ms.append(took)
        ids, n = injected_ids(out)
        replay_chars.append(n)
        foreign(ids, t["conv"], "replay")
        took, _ = run_hook(
            home,
            "stop",
            {"session_id": session, "hook_event_name": "Stop", **where(t["conv"])},
            turn_env,
        )
        capture_ms.append(took)
        if (i + 1) % 250 == 0:
            print(f"replayed {i + 1}/{len(all_turns)} turns", file=sys.stderr, flush=True)
    replay_s = state["replay_s"] if args.reuse else time.perf_counter() - started
    if not args.reuse:
        saved.write_text(
            json.dumps(
                {
                    "episodes": episode_of,
                    "capture": capture_ms,
                    "inject": inject_ms,
                    "sessions": count,
                    "turns": len(all_turns),
                    "replay_s": replay_s,
                    "replay_chars": replay_chars,
                    "cross": dict(cross),
                }
            )
        )
    client.admin("refresh")
    # 2. questions through the prompt hook, 3. the same through memory_search
    qrels: dict[str, set[str]] = {}
    for line in (args.bench / "qrels.tsv").read_text().splitlines():
        q, doc, rel = line.split("\t")
        if int(rel) > 0:
            qrels.setdefault(q, set()).add(doc)
    queries = [json.loads(x) for x in (args.bench / "queries.jsonl").read_text().splitlines()]
    replayed = set(episode_of.values())
    queries = [q for q in queries if q["qid"] in qrels and qrels[q["qid"]] <= replayed]
    queries = queries[: args.max_queries]
    q_env = dict(env, MEMORY_AGENT_CAPTURE="off") if args.legacy else env  # shipped: captured
    rec_inject, rec_search, chars, question_ms = [], [], [], []
    for q in queries:
        conv = q["qid"].split("_", 1)[0]
        took, out = run_hook(
            home,
            "prompt",
            {
                "session_id": f"question-{q['qid']}",
                "prompt": q["query"],
                "hook_event_name": "UserPromptSubmit",
                **where(conv),
            },
            q_env,
        )
        question_ms.append(took)
        ids, n = injected_ids(out)
        chars.append(n)
        foreign(ids, conv, "questions")
        got = {episode_of.get(i) for i in ids}
        evidence = qrels[q["qid"]]
        rec_inject.append(len(evidence & got) / len(evidence))
        hits = client.call_tool(
            "memory_search",
            {"query": q["query"], "limit": 8, "include_episodes": True},
            where=str(repo_of.get(conv) or work),
        )["hits"]
        found = {episode_of.get(h["id"]) for h in hits}
        rec_search.append(len(evidence & found) / len(evidence))
        if (
            not args.reuse and not args.legacy
        ):  # the question's Stop: captured, and the daemon's gate runs after it
            run_hook(
                home,
                "stop",
                {"session_id": f"question-{q['qid']}", "hook_event_name": "Stop", **where(conv)},
                q_env,
            )
    t = time.perf_counter()
    gate = (
        client.admin("gate") if not args.legacy else {"mode": "off", "read_bytes": 0}
    )  # one more run by hand: what the incremental gate still reads
    gate_ms = (time.perf_counter() - t) * 1000
    # 4. a session start in each project: the digest the session-start hook injects
    start_chars = []
    for conv in convs if repo_of else []:
        if args.projects == "one" and conv != convs[0]:
            continue  # one repository: one start
        _, out = run_hook(
            home,
            "session-start",
            {
                "session_id": f"start-{conv}",
                "hook_event_name": "SessionStart",
                "source": "startup",
                **where(conv),
            },
            env,
        )
        ids, n = injected_ids(out)
        start_chars.append(n)
        foreign(ids, conv, "start")
    budget = config.load({"home": str(home)}).inject_budget
    hooks_log = home / "run" / "hooks.log"
    hook_log_lines = len(hooks_log.read_text().splitlines()) if hooks_log.is_file() else 0
    journal_bytes = sum(p.stat().st_size for p in (home / "journal").iterdir())
    client.stop(wait=True)
    out = {
        "turns": len(all_turns),
        "sessions": len(count),
        "questions": len(queries),
        "injection_evidence_recall": round(sum(rec_inject) / len(queries), 4),
        "direct_search_recall@8": round(sum(rec_search) / len(queries), 4),
        "injected_chars_mean": round(sum(chars) / len(chars), 1),
        "injected_chars_p95": pct(chars, 0.95),
        "empty_injections": sum(1 for c in chars if c == 0),
        "projects": args.projects or "none",
        "project_count": len(set(repo_of.values())),
        # another conversation's snippets: another project's with `each` (must be 0)
        "other_conversation_questions": cross["questions"],
        "other_conversation_replay": cross["replay"],
        "other_conversation_session_start": cross["start"],
        "injected_ids_unmapped": cross["unmapped"],
        "inject_budget": budget,
        "injected_chars_max": max(chars, default=0),
        "replay_injected_chars": stats(replay_chars),
        "session_start_chars": stats(start_chars),
        "hooks_log_lines": hook_log_lines,
        "capture_hook_p50_ms": round(pct(capture_ms, 0.5), 1),
        "capture_hook_p95_ms": round(pct(capture_ms, 0.95), 1),
        "inject_hook_p50_ms": round(pct(question_ms, 0.5), 1),
        "inject_hook_p95_ms": round(pct(question_ms, 0.95), 1),
        "replay_prompt_hook_p50_ms": round(pct(inject_ms, 0.5), 1),
        "journal_bytes": journal_bytes,
        "gate_mode": gate["mode"],
        "gate_proposed_total": len(gate_state(home)["proposed"]),
        "gate_last_run_read_bytes": gate["read_bytes"],
        "gate_last_run_ms": round(gate_ms, 1),
        "replay_s": round(replay_s, 1),
    }
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"LoCoMo dev replay: {out['turns']} turns in {out['sessions']} sessions, "
        f"{out['questions']} questions ({os.cpu_count()} cores)"
    )
    for key, value in out.items():
        print(f"  {key:28s} {value}")


if __name__ == "__main__":
    main()
