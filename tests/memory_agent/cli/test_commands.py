"""The CLI as a user runs it: real processes, one JSON object on stdout with --json, every option
with its help, argument errors in JSON with one exit status, and `memory-agent eval` per category.
(The commands' error contract: issue 9; `eval --by`: issue 13.)"""

import json
import os
import re
import subprocess
import sys

from memory_agent.client import DaemonClient
from tests.memory_agent.demo_daemon import cli


def run(home, cache, *args, stdin=None):
    env = dict(os.environ, MEMORY_AGENT_CACHE=str(cache), MEMORY_AGENT_IDLE_EXIT="120")
    env.pop("MEMORY_AGENT_HOME", None)
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home), "--json"],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout + proc.stderr  # one JSON object, nothing else
    return proc.returncode, json.loads(lines[0])


def test_the_cli_round_trip(tmp_path, shared_cache):
    home = tmp_path / "home"
    try:
        _round_trip(home, shared_cache)
    finally:
        DaemonClient(home).stop(wait=True)


def _round_trip(home, shared_cache):
    rc, init = run(home, shared_cache, "init", "--embedder", "minilm", "--demo")
    assert rc == 0 and init["demo_entries_added"] == 79 and init["created_repo"]
    assert init["index"]["consistent"] and init["index"]["entries"] == 79
    assert "claude mcp add" in init["mcp"]["Claude Code (shell)"]
    rc, added = run(
        home,
        shared_cache,
        "add",
        "--title",
        "Feature flags live in Unleash",
        "--type",
        "fact",
        "--tag",
        "config",
        "--request-id",
        "cli-1",
        stdin="Flags are read from Unleash at startup; see the flags dashboard.",
    )
    assert rc == 0 and added["status"] == "created" and added["commit"] and added["generation"]
    rc, found = run(
        home, shared_cache, "search", "where are feature flags stored", "--limit", "3", "--explain"
    )
    assert rc == 0 and found["hits"][0]["id"] == added["id"] and "why" in found["hits"][0]
    rc, got = run(home, shared_cache, "get", added["id"])
    assert rc == 0 and got["tags"] == ["config"] and got["body"].startswith("Flags are read")
    rc, preview = run(
        home,
        shared_cache,
        "supersede",
        added["id"],
        "--title",
        "Feature flags moved to LaunchDarkly",
        "--body",
        "Since November.",
    )
    assert rc == 0 and preview["status"] == "preview"
    rc, error = run(home, shared_cache, "archive", "no-such-id", "--reason", "x", "--confirm")
    error = error["error"]
    assert rc == 2 and error["code"] == "not_found" and "`memory-agent search`" in error["fix"]
    rc, status = run(home, shared_cache, "status")
    assert rc == 0 and status["consistent"] and status["entries"] == 80
    rc, rebuilt = run(home, shared_cache, "rebuild")
    assert rc == 0 and rebuilt["generation"] == "gen-000002" and rebuilt["documents"] == 80
    rc, stopped = run(home, shared_cache, "stop")
    assert rc == 0 and stopped["stopped"] is True
    rc, stopped = run(home, shared_cache, "stop")
    assert rc == 0 and stopped["stopped"] is False


def test_commands_before_init_name_the_fix(tmp_path, shared_cache):
    rc, error = run(tmp_path / "nowhere", shared_cache, "status")
    error = error["error"]
    assert rc == 2 and error["code"] == "not_ready" and "memory-agent init" in error["fix"]


def test_every_cli_option_has_help_and_every_command_takes_home_and_json():
    from memory_agent.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        options = {o for a in parser._actions for o in a.option_strings}
        assert {"--home", "--json"} <= options, name
        for action in parser._actions:
            assert action.help, (name, action.dest)


def test_argument_errors_answer_in_json_with_one_exit_status(tmp_path, shared_cache):
    home = tmp_path / "nowhere"
    bad = cli(home, shared_cache, "search", "x", "--limit", "many", "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "invalid"
    no_body = cli(home, shared_cache, "add", "--title", "T", "--json", stdin="")
    refused = cli(home, shared_cache, "status", "--json")
    assert {no_body.returncode, refused.returncode} == {2}


def test_eval_prints_metrics_per_category(tmp_path, shared_cache):
    bench = tmp_path / "bench"
    bench.mkdir()
    docs = {
        "d1": "Caroline adopted a dog named Biscuit in Lisbon.",
        "d2": "The ledger reconciliation runs nightly at two.",
        "d3": "Melanie signed up for a pottery class on Tuesday.",
    }
    with open(bench / "corpus.jsonl", "w") as fh:
        for doc_id, text in docs.items():
            fh.write(json.dumps({"id": doc_id, "title": text[:20], "text": text}) + "\n")
    queries = [
        ("q1", "What is the name of Caroline's dog?", "single-hop", "d1"),
        ("q2", "When does the reconciliation run?", "temporal", "d2"),
        ("q3", "What class did Melanie take?", "single-hop", "d3"),
    ]
    with open(bench / "queries.jsonl", "w") as fh:
        for qid, text, category, _ in queries:
            fh.write(json.dumps({"qid": qid, "query": text, "category": category}) + "\n")
    (bench / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, _, d in queries)
    )
    env = dict(os.environ, MEMORY_AGENT_CACHE=str(shared_cache))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_agent",
            "eval",
            str(bench),
            "--embedder",
            "minilm",
            "--by",
            "category",
            "--json",
            "--quiet",
            "--home",
            str(tmp_path / "h"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    by = json.loads(proc.stdout)["by"]["category"]
    assert {k: v["queries"] for k, v in by.items()} == {"single-hop": 2, "temporal": 1}
    assert by["temporal"]["ndcg@10"] == 1.0
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_agent",
            "eval",
            str(bench),
            "--by",
            "speaker",
            "--home",
            str(tmp_path / "h"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and "no query" in proc.stderr and "speaker" in proc.stderr


# -- where a person meets the CLI (issue 31, item 5) ----------------------------------------------
def test_the_help_lists_the_commands_by_job_with_the_web_app_apart(tmp_path):
    from memory_agent.cli.groups import GROUPS
    from memory_agent.cli.main import build_parser

    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    text = proc.stdout
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    listed = [n for _, names in GROUPS for n in names]
    assert sorted(listed) == sorted(sub.choices)  # each command in exactly one group
    sections = dict(re.findall(r"^([a-z][^\n]*):\n((?:  \S.*\n)+)", text, re.M))
    assert set(sections) >= {"start here", "entries", "beyond this machine", "not the memory"}
    assert re.findall(r"^  (\w+)", sections["not the memory"], re.M) == ["web"]
    assert "legal_web" in sections["not the memory"]
    assert "resolve" in sections["entries"] and "sync" in sections["beyond this machine"]
    assert "{init,connect" not in text  # not one flat list of every name


def test_a_duplicate_says_what_to_do_instead(home, shared_cache):
    args = ("add", "--title", "Timestamps", "--body", "Store timestamps as UTC.")
    first = cli(home, shared_cache, *args)
    assert first.returncode == 0 and "created:" in first.stdout, first.stderr
    again = cli(home, shared_cache, *args)
    assert again.returncode == 2 and "nothing written" in again.stdout  # a refusal (issue 34)
    assert "memory-agent supersede" in again.stdout  # before: no hint at all


def test_init_shows_the_memory_first_and_the_settings_on_request(tmp_path, shared_cache):
    home = tmp_path / "home"
    plain = cli(home, shared_cache, "init", "--no-index", "--embedder", "minilm")
    assert plain.returncode == 0, plain.stderr
    assert "memory-agent connect claude-code" in plain.stdout
    assert "claude mcp add" not in plain.stdout and len(plain.stdout.splitlines()) < 15
    full = cli(home, shared_cache, "init", "--no-index", "--print-config")
    assert "claude mcp add" in full.stdout and len(full.stdout.splitlines()) > 100
