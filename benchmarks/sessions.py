"""A benchmark of real coding sessions: does the memory bring back the earlier session that
matters, at the prompt where it matters?

    .venv/bin/python benchmarks/sessions.py FOLDER [--work DIR] [--origin URL]
        [--max-sessions N] [--json]

INPUT: FOLDER holds past sessions in any format `memory-agent import` reads (Claude Code
transcripts, Codex rollouts, an opencode database, Aider histories; a folder is walked), all
of ONE repository. The sessions ran in clones elsewhere: each working folder gets a local git
clone here (all with the origin `--origin`, default `git@example.com:bench/sessions.git`, so
all are one project), and the folder's path is rewritten to its clone's in every string of
the session's calls (a relocation: the same paths, relative to the clone). A session met in
two files is replayed once (its longest copy). The
development data: `benchmarks/entire_sessions.py` writes the Claude Code sessions stored on
the `entire/checkpoints/v1` branch of github.com/entireio/cli into such a folder.

REPLAY: a fresh home (MiniLM, capture on, the gate in its default `propose` mode, retention
long enough for the data's dates). Every session becomes the hook calls it would have made
(`capture.past_sessions.hook_calls`: start, prompt, each tool call, stop), and all sessions'
calls are merged in time order (sessions that ran at the same time interleave) and sent
through the hook command's own function (`capture.hooks.run`, in this process: a process per
tool call would be tens of thousands), each with the clock set to its own time. The daemon
answers the prompt hook's recall; it is restarted at each new UTC day of the data with its
clock at that day's end (the memory's recency is measured from "now"). At each prompt the
benchmark keeps what was injected and what `memory_search` returns for the prompt (include
episodes; asked for 16, the asking session's own episodes dropped, the first 8 kept).

JUDGMENTS: derived from the replayed journal by the rules in `benchmarks/session_judgments.py`
(printed with --help below): (a) the same failure - normalised command plus first error line,
or the same linter rule - hit and then resolved by an earlier session; (b) a file the prompt's
turn edits that an earlier session edited; (c) a near-identical instruction from the user in
an earlier session (duplicates within a session, system-generated prompts and automated loops
dropped).

SCORES, per rule and overall, over the prompts the rule judges: the share whose injected
context holds an episode of a relevant earlier session, and the same for the search; against
two baselines measured in the same run on the same journal: RECENCY (the episodes of the last
other session active before the prompt) and BM25 (over every earlier turn of the other
sessions - those that ended before the prompt: their prompt, each tool call's tool, target and
error line, and answer, as journaled - k1 0.9, b 0.4, the product's tokenizer; its
top 6, the injection's limit, and top 8, the search's). Also: the lessons the gate proposed
and how many name a failure that recurred after the proposal, and the time per MB of
transcript (the replay, and `memory-agent import`'s reading and journaling alone).
"""

from __future__ import annotations

import argparse
import datetime as dt
import heapq
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from session_judgments import RULES, derive, read_turns

from memory_agent import config
from memory_agent.capture import hooks
from memory_agent.capture.episodes import command_key, step_of
from memory_agent.capture.gate import read_state as gate_state
from memory_agent.capture.lessons import lesson_key
from memory_agent.capture.past_sessions import hook_calls
from memory_agent.capture.session_import import import_sessions
from memory_agent.capture.session_sources import find_sources, read_source
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.intake.journal import read_session, session_name, sessions
from memory_agent.limits import MAX_QUERY
from memory_agent.recall.injection import QUERY_CHARS
from ragcore.tokenizer import Tokenizer

INJECTED = re.compile(r"^- \[([^\]]+)\]", re.M)
SEARCH_KEEP = 8
INJECT_KEEP = 6  # recall_limit's default


def iso_us(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_repo(path: Path, origin: str) -> Path:
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", origin], check=True)
    return path


def session_of(doc_id: str) -> str | None:
    parts = doc_id.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "episodes" else None


class BM25:
    """BM25 over documents added over time (the baseline), the product's tokenizer."""

    def __init__(self, k1: float = 0.9, b: float = 0.4):
        self.k1, self.b = k1, b
        self.tok = Tokenizer()
        self.postings: dict[str, dict[int, int]] = {}
        self.lengths: list[int] = []
        self.owners: list[str] = []

    def add(self, owner: str, text: str) -> None:
        doc = len(self.lengths)
        terms = self.tok(text)
        self.lengths.append(len(terms))
        self.owners.append(owner)
        for term in terms:
            row = self.postings.setdefault(term, {})
            row[doc] = row.get(doc, 0) + 1

    def top(self, query: str, exclude: str, k: int) -> list[str]:
        """The owners of the k best documents not owned by `exclude`, best first."""
        n = len(self.lengths)
        if not n:
            return []
        avg = sum(self.lengths) / n
        scores: dict[int, float] = {}
        for term in set(self.tok(query)):
            row = self.postings.get(term)
            if not row:
                continue
            idf = math.log(1 + (n - len(row) + 0.5) / (len(row) + 0.5))
            for doc, tf in row.items():
                norm = self.k1 * (1 - self.b + self.b * self.lengths[doc] / avg)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        ranked = sorted((d for d in scores if self.owners[d] != exclude), key=lambda d: -scores[d])
        return [self.owners[d] for d in ranked[:k]]


def relocate(value, old: str, new: str):
    """`value` with the session's folder `old` written `new` (its clone here), in every
    string: the sessions ran in clones elsewhere; they are replayed in clones on this
    machine, one per folder, all with the same origin (one project)."""
    if isinstance(value, str):
        return value.replace(old, new) if old else value
    if isinstance(value, dict):
        return {k: relocate(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [relocate(v, old, new) for v in value]
    return value


def calls_of(i: int, session):
    """A session's hook calls as (time, session index, order, turn, event, payload, code)."""
    calls = hook_calls(session, range(len(session.turns)))
    for seq, (n, event, payload, ts, code) in enumerate(calls):
        yield ts, i, seq, n, event, payload, code


def replay(args, past, clones: dict, home: Path) -> tuple[list[dict], dict]:
    """Every hook call of every session, in time order; what each prompt got."""
    cfg = config.load({"home": str(home)})
    streams = [calls_of(i, session) for i, (session, _) in enumerate(past)]
    client = DaemonClient(home, timeout=600)
    prompts: list[dict] = []
    day, errors, count = None, Counter(), 0
    started = time.perf_counter()
    for ts, i, _seq, n, event, payload, _code in heapq.merge(*streams, key=lambda x: x[:3]):
        session, source = past[i]
        today = dt.datetime.fromtimestamp(ts, dt.UTC).date()
        if today != day:  # the daemon's "now": the end of the data's current day
            if day is not None:
                client.admin("gate")  # the day's last run (the Stop hooks' timer may not have)
            day = today
            end = dt.datetime.combine(today, dt.time(23, 59, 59), dt.UTC).timestamp()
            os.environ["MEMORY_AGENT_CLOCK"] = iso_us(end)
            client.stop(wait=True)
            client.ensure()
            client.admin("refresh")
        payload = relocate(payload, session.cwd, str(clones[session.cwd]))
        if session.client == "codex":  # a command's exit code, read from the rollout as live
            payload["transcript_path"] = str(source.path)
        when = config.Config(dict(cfg.values, clock=iso_us(ts)))
        try:
            out = hooks.run(event, payload, home, session.client, time.monotonic() + 60, when)
        except Exception as exc:  # noqa: BLE001 - counted, the replay goes on
            errors[f"{event}: {type(exc).__name__}: {exc}"[:200]] += 1
            continue
        count += 1
        if event != "prompt":
            continue
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""
        name = session_name(session.session_id)
        hits = client.call_tool(
            "memory_search",
            {"query": payload["prompt"][:MAX_QUERY], "limit": 16, "include_episodes": True},
            where=str(clones[session.cwd]),
        )["hits"]
        found = [h["id"] for h in hits if session_of(h["id"]) != name][:SEARCH_KEEP]
        prompts.append(
            {
                "session": name,
                "n": n + 1,
                "ts": ts,
                "injected": INJECTED.findall(text),
                "chars": len(text),
                "search": found,
            }
        )
        if len(prompts) % 100 == 0:
            print(f"replayed {len(prompts)} prompts, {count} hook calls", file=sys.stderr)
    client.admin("gate")  # the gate's last run: what the Stop hooks left to read
    client.stop(wait=True)
    return prompts, {
        "hook_calls": count,
        "errors": dict(errors),
        "seconds": round(time.perf_counter() - started, 1),
    }


def raw_text(records: list[dict]) -> str:
    """A turn as the BM25 baseline reads it: the prompt, each tool call's tool, target and
    error line, the answer - every step, as journaled (not the episode's rendering)."""
    parts = []
    for record in records:
        if record.get("event") == "prompt":
            parts.append(str(record.get("prompt") or ""))
        elif record.get("event") == "tool":
            step = step_of(record)
            parts.append(f"{step.tool} {step.target} {step.error}")
        elif record.get("event") == "stop":
            parts.append(str(record.get("answer") or ""))
    return "\n".join(parts)


def baselines(journal_dir: Path, prompts: list[dict]) -> None:
    """Add to each prompt what RECENCY and BM25 would have given, from the same journal."""
    turns, activity = [], []  # (end, session, text); (ts, session)
    for name, paths in sessions(journal_dir).items():
        records = list(read_session(paths))
        activity += [(float(r.get("ts") or 0.0), name) for r in records]
        bounds = [i for i, r in enumerate(records) if r.get("event") == "prompt"] + [len(records)]
        for a, b in zip(bounds, bounds[1:], strict=False):
            part = records[a:b]
            if part and part[0].get("event") == "prompt":
                end = max(float(r.get("ts") or 0.0) for r in part)
                turns.append((end, name, raw_text(part)))
    turns.sort()
    activity.sort()
    bm25 = BM25()
    t_i = a_i = 0
    last: dict[str, float] = {}
    for p in sorted(prompts, key=lambda x: x["ts"]):
        while t_i < len(turns) and turns[t_i][0] < p["ts"]:
            bm25.add(turns[t_i][1], turns[t_i][2])
            t_i += 1
        while a_i < len(activity) and activity[a_i][0] < p["ts"]:
            last[activity[a_i][1]] = activity[a_i][0]
            a_i += 1
        others = [(when, s) for s, when in last.items() if s != p["session"]]
        p["recency"] = [max(others)[1]] if others else []
        ranked = bm25.top(p.get("prompt", "")[:QUERY_CHARS], p["session"], SEARCH_KEEP)
        p["bm25_6"], p["bm25_8"] = ranked[:INJECT_KEEP], ranked


def score(prompts: list[dict], relevant: dict) -> dict:
    systems = {
        "injection": lambda p: {session_of(i) for i in p["injected"]},
        "search@8": lambda p: {session_of(i) for i in p["search"]},
        "recency": lambda p: set(p["recency"]),
        "bm25@6": lambda p: set(p["bm25_6"]),
        "bm25@8": lambda p: set(p["bm25_8"]),
    }
    out: dict = {}
    for rule in (*RULES, "overall"):
        judged = []
        for p in prompts:
            rules = relevant.get((p["session"], p["n"]), {})
            want = set().union(*rules.values()) if rule == "overall" else rules.get(rule, set())
            if want:
                judged.append((p, want))
        row = {"prompts": len(judged)}
        if judged:
            row["relevant_sessions_mean"] = round(sum(len(w) for _, w in judged) / len(judged), 1)
        for name, got in systems.items():
            hits = sum(1 for p, want in judged if got(p) & want)
            row[name] = round(hits / len(judged), 3) if judged else None
        out[rule] = row
    return out


def lessons(home: Path, journal_dir: Path) -> dict:
    """Lessons the gate proposed, and how many name a failure seen again after the proposal."""
    proposed = gate_state(home)["proposed"]
    failures: list[tuple[float, str]] = []
    for paths in sessions(journal_dir).values():
        for record in read_session(paths):
            if record.get("event") != "tool":
                continue
            step = step_of(record)
            if not step.ok and not step.is_edit and step.error:
                key = lesson_key(command_key(step.target), step.error)
                failures.append((float(record.get("ts") or 0.0), key))
    recurred = [
        k
        for k, v in proposed.items()
        if any(key == k and ts > v.get("at", 0) for ts, key in failures)
    ]
    return {
        "proposed": len(proposed),
        "recurred_after_proposal": len(recurred),
        "titles": [v.get("title") for v in proposed.values()][:20],
    }


def main() -> None:
    from session_judgments import __doc__ as rules_doc

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2] + "\n" + (rules_doc or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", type=Path, help="past sessions of one repository (any format)")
    parser.add_argument("--work", type=Path, help="keep the home, repository and results here")
    parser.add_argument("--origin", default="git@example.com:bench/sessions.git")
    parser.add_argument("--max-sessions", type=int, help="only the first N sessions (by start)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true", help="score the replay a run left in --work again"
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="memory-agent-sessions-"))
    home = work / "home"
    cache = Path(os.environ.get("MEMORY_AGENT_CACHE") or work / "cache")
    env = {
        "MEMORY_AGENT_HOME": str(home),
        "MEMORY_AGENT_EMBEDDER": "minilm",
        "MEMORY_AGENT_CACHE": str(cache),
        "MEMORY_AGENT_IDLE_EXIT": "0",
        "MEMORY_AGENT_JOURNAL_RETENTION_DAYS": "36500",
    }
    os.environ.update(env)
    sources, _ = find_sources([str(args.folder)])
    folder_mb = sum(s.size for s in sources) / 1e6
    t = time.perf_counter()
    longest: dict[str, tuple] = {}  # a session met in two files (copies): its longest copy
    for src in sources:
        for s in read_source(src):
            kept = longest.get(s.session_id)
            if kept is None or len(s.turns) > len(kept[0].turns):
                longest[s.session_id] = (s, src)
    past = sorted(longest.values(), key=lambda x: x[0].started)[: args.max_sessions]
    mb = sum(src.size for _, src in past) / 1e6  # what is replayed
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    shutil.rmtree(work / "import-journal", ignore_errors=True)  # timed from empty
    journaled = import_sessions(sources, work / "import-journal", confirm=True)
    import_s = time.perf_counter() - t
    folders = sorted({s.cwd for s, _ in past})
    clones = {
        cwd: make_repo(work / "clones" / str(k), args.origin) for k, cwd in enumerate(folders)
    }
    saved = work / "replay.json"
    if args.reuse and saved.is_file():  # judge and score again, on the same replay
        prompts, run = json.loads(saved.read_text())
    else:
        Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
        prompts, run = replay(args, past, clones, home)
        saved.write_text(json.dumps([prompts, run]))
    texts = {
        (session_name(s.session_id), n + 1): turn.prompt
        for s, _ in past
        for n, turn in enumerate(s.turns)
    }
    for p in prompts:
        p["prompt"] = texts.get((p["session"], p["n"]), "")
    journal_dir = home / "journal"
    cwds = {session_name(s.session_id): str(clones[s.cwd]) for s, _ in past}
    judged = derive(read_turns(journal_dir, cwds))
    baselines(journal_dir, prompts)
    for p in prompts:
        rules = judged.relevant.get((p["session"], p["n"]), {})
        p["relevant"] = {rule: sorted(found) for rule, found in rules.items()}
    result = {
        "sessions": len(past),
        "turns": sum(len(s.turns) for s, _ in past),
        "prompts_replayed": len(prompts),
        "source_mb": round(mb, 1),
        "dates": [iso_us(past[0][0].started)[:10], iso_us(max(s.ended for s, _ in past))[:10]]
        if past
        else [],
        "judged_prompts": {r: sum(1 for v in judged.relevant.values() if r in v) for r in RULES},
        "instruction_prompts_dropped": judged.dropped,
        "scores": score(prompts, judged.relevant),
        "lessons": lessons(home, journal_dir),
        "injected_chars_mean": round(sum(p["chars"] for p in prompts) / max(1, len(prompts)), 1),
        "empty_injections": sum(1 for p in prompts if not p["injected"]),
        "replay": run,
        "replay_s_per_mb": round(run["seconds"] / mb, 2) if mb else None,
        "folder_mb": round(folder_mb, 1),
        "import_read_s_per_mb": round(read_s / folder_mb, 3) if folder_mb else None,
        "import_journal_s_per_mb": round(import_s / folder_mb, 3) if folder_mb else None,
        "import_report": journaled.as_json(),
    }
    (work / "result.json").write_text(json.dumps(result, indent=1))
    (work / "prompts.json").write_text(json.dumps(prompts))
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['sessions']} sessions, {result['turns']} turns, {mb:.1f} MB; {work}")
    for rule, row in result["scores"].items():
        print(f"  {rule:12s} {json.dumps(row)}")
    for key in ("judged_prompts", "instruction_prompts_dropped", "lessons", "replay_s_per_mb"):
        print(f"  {key}: {json.dumps(result[key])}")


if __name__ == "__main__":
    main()
