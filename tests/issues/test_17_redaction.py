"""Issue 17, items 4, 7, 8 and 9 and the build bullets "Redaction" and "What earlier versions
already stored": secrets seen on the structure, the missing shapes, redaction in linear time
with a margin cut, inputs cut rather than dropped, the tool output bounded as a whole, the
usage events redacted, and `memory-agent scrub` for what earlier versions stored."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memory_agent import config
from memory_agent.capture.gate import Gate, read_state
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.intake import journal
from memory_agent.intake import redact as redact_module
from memory_agent.intake.journal import (
    MAX_FIELD,
    MAX_OUTPUT,
    REDACT_BUDGET,
    append,
    clean_record,
    read_session,
    sessions,
)
from memory_agent.intake.redact import redact, redact_value
from memory_agent.recall.events import EventLog
from memory_agent.serve.mcp_config import hook_command
from memory_agent.serve.scrub import scrub_home
from tests.memory_agent.mcp_helpers import ROOT, daemon_pids, env_for

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


def fragments(secret: str, size: int = 8) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


# -- item 7: secrets on the structure ------------------------------------------------------
def test_a_key_that_names_a_secret_hides_its_whole_value_at_any_depth(tmp_path):
    values = {
        "password": 90817263,  # a number
        "api_key": "q8Zr2LmW4xTn7VbK",
        "token": {"value": "nested-Tok3nValue-77", "scope": "repo"},  # nested
        "aws": AWS_SECRET,
        "client": "Cl13ntS3cretValue99",
        "pair": "PairValueForDbPass42",
        "docker": "ZG9ja2VyOmh1bnRlcjJodW50ZXI=",
        "json-in-text": "JsonTextSecret-1234",
        "cookie": "sessionid=CookieVal-9876",
    }
    record = {
        "ts": 1.0,
        "event": "tool",
        "tool": "Bash",
        "input": {
            "command": "deploy",
            "config": {"db": {"password": values["password"], "host": "db"}},
            "api_key": values["api_key"],
            "env": {"AWS_SECRET_ACCESS_KEY": values["aws"], "PATH": "/usr/bin"},
            "oauth": [{"client_secret": values["client"], "max_tokens": 256}],
            "containers": [{"env": [{"name": "DB_PASSWORD", "value": values["pair"]}]}],
        },
        "output": {
            "auth": {"token": values["token"]},
            "auths": {"https://index.docker.io/v1/": {"auth": values["docker"]}},
            "stdout": json.dumps({"data": {"credentials": {"secret": values["json-in-text"]}}}),
            "headers": {"Cookie": values["cookie"]},
        },
        "ok": True,
    }
    path = append(tmp_path, "s1", record)
    text = path.read_text()
    for name, value in values.items():
        shown = json.dumps(value) if not isinstance(value, str) else value
        assert shown.strip('"') not in text, f"{name} leaked"
    [back] = list(read_session([path]))
    assert back["input"]["env"]["PATH"] == "/usr/bin"  # what is not secret stays
    assert back["input"]["oauth"][0]["max_tokens"] == 256
    assert back["input"]["config"]["db"]["host"] == "db"
    assert "[REDACTED" in back["input"]["config"]["db"]["password"]


# -- item 8: the shapes --------------------------------------------------------------------
SHAPES = {
    "curl -u": ("curl -u deploy:Hunt3rPassw0rd https://api.example.com", "Hunt3rPassw0rd"),
    "curl --user": ("curl --user deploy:Hunt3rPassw0rd https://x.io", "Hunt3rPassw0rd"),
    "mysql -p": ("mysql -uroot -pMyR00tPassw0rd -h db shop", "MyR00tPassw0rd"),
    "--password X, --password=X": (
        "pg_restore --password Sup3rS3cretPw --dbname app; tool --password=Sup3rS3cretPw -v",
        "Sup3rS3cretPw",
    ),
    "azure AccountKey": (
        "DefaultEndpointsProtocol=https;AccountName=shop;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg"
        "5MA==;EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",
    ),
    "slack webhook": (
        "curl -X POST https://hooks.slack.com/services/T024BE7LD/B01ABCDEF/abcdefghijklmnopqrstuvwx",
        "abcdefghijklmnopqrstuvwx",
    ),
    "hf token": ("HF_HUB=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567 ok", "hf_aBcDeFgHiJkLmNoPqRs"),
    "hf token bare": ("login with hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567", "aBcDeFgHiJkLmNoP"),
    "docker auth": (
        '{"auths": {"ghcr.io": {"auth": "dXNlcjpodW50ZXIyaHVudGVyMg=="}}}',
        "dXNlcjpod",
    ),
    "netrc": (
        "machine api.heroku.com\n  login me@x.io\n  password N3trcS3cret77\n",
        "N3trcS3cret77",
    ),
    "error text": (
        "FATAL: could not log in to the registry with password Tr0ub4dor&3xyz (user ci)",
        "Tr0ub4dor&3xyz",
    ),
    "authorization basic": ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_redacted_in_the_journal(tmp_path, name):
    text, secret = SHAPES[name]
    path = append(tmp_path, "s", {"ts": 1.0, "event": "prompt", "prompt": f"before {text} after"})
    kept = next(read_session([path]))["prompt"]
    assert secret not in kept and "[REDACTED" in kept, kept
    assert kept.startswith("before ") and kept.endswith(" after")


def test_search_queries_are_redacted_in_the_usage_events(tmp_path):
    log = EventLog(tmp_path / "events")
    log.append("query", qid="q1", text=f"why does {GH} fail with curl -u ci:Hunt3rPassw0rd")
    log.append("importance", entry="e1", importance=5, note=f"token {GH} rotated")
    log.close()
    text = stored(tmp_path)
    assert GH not in text and "Hunt3rPassw0rd" not in text
    assert "why does" in text and "[REDACTED" in text


def test_the_service_logs_a_search_redacted(memory, tmp_path):
    from memory_agent.serve.service import Service

    service = Service(memory)
    try:
        service.search(f"deploy failed with password Pl41nQu3ryS3cret and {GH}")
    finally:
        service.events.close()
    text = stored(memory.home / "events")
    assert "deploy failed" in text  # the query is logged ...
    assert "Pl41nQu3ryS3cret" not in text and GH not in text  # ... redacted


# -- item 9: linear time, the margin cut, nothing dropped ------------------------------------
def test_redaction_time_grows_linearly_on_adversarial_input():
    """A 3 KB token-like run took 0.87 s and 4,000 hex characters 1.7 s (backtracking). Each
    adversarial input of 1.6 MB must now finish (in a subprocess that a timeout ends), in
    time proportional to its size: 16x the input, not 256x the time."""
    code = textwrap.dedent(
        """
        import json, sys, time
        from memory_agent.intake.redact import redact
        shapes = {
            "hex": "0123456789abcdef", "token-like": "a_b-", "assignments": "token=",
            "flags": "--password ", "quotes": 'password:"', "jwt-ish": "eyJ-",
            "urls": "://", "words": "password is the token x ",
            "escaped json": '\\\\"password\\\\":\\\\"', "cli -p": "sshpass -p -p ",
            "closers": "password=" + ")" * 300 + " ",
        }
        out = {}
        for name, unit in shapes.items():
            def per_run(n):  # mean over runs that fill at least 0.3 s: steadier under load
                text = unit * (n // len(unit))
                runs, start = 0, time.perf_counter()
                while runs < 2 or time.perf_counter() - start < 0.3:
                    redact(text)
                    runs += 1
                return (time.perf_counter() - start) / runs
            out[name] = [per_run(100_000), per_run(1_600_000)]
        print(json.dumps(out))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    for name, (small, large) in json.loads(proc.stdout).items():
        # 16x the input: linear is 16x the time, quadratic 256x (noise on a loaded machine: < 64x)
        assert large / max(small, 1e-3) < 64, (name, small, large)


def hook(home: Path, event: str, raw: bytes, **env: str) -> subprocess.CompletedProcess:
    """The hook exactly as `memory-agent init` prints it, with the default budget."""
    return subprocess.run(
        hook_command(home, event),
        input=raw,
        capture_output=True,
        env=env_for(home, home.parent / "cache", MEMORY_AGENT_INJECT="off", **env),
        timeout=60,
    )


@pytest.fixture
def capture_home(tmp_path):
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    return home


def journal_of(home: Path, session: str) -> list[dict]:
    paths = sessions(home / "journal").get(session)
    assert paths, (
        (home / "run" / "hooks.log").read_text()
        if (home / "run" / "hooks.log").exists()
        else "no journal"
    )
    return list(read_session(paths))


def test_a_secret_across_the_cut_of_a_2mb_prompt_leaves_no_fragment(capture_home):
    """Cut with a margin, redact, cut exactly: the prompt (2 MB of hex, which took the old
    redaction past the hook's budget: the turn was not journaled) is kept, cut, and the
    tokens that straddle both cuts leave no 8-character piece behind."""
    filler = "0123456789abcdef" * (2_000_000 // 16)
    head, tail = MAX_FIELD // 2, MAX_FIELD - MAX_FIELD // 2
    prompt = filler[: head - 20] + " " + GH + " " + filler
    prompt = (
        prompt[: len(prompt) - tail - 20] + " " + GH.replace("ghp_16", "ghp_27") + " " + "ab" * 40
    )
    payload = {"session_id": "big", "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    proc = hook(capture_home, "prompt", json.dumps(payload).encode())
    assert proc.returncode == 0
    [record] = journal_of(capture_home, "big")
    kept = record["prompt"]
    assert "characters cut" in kept and len(kept) < MAX_FIELD + 100
    for secret in (GH, GH.replace("ghp_16", "ghp_27")):
        assert not [f for f in fragments(secret) if f in kept], kept[head - 40 : head + 40]


@pytest.mark.parametrize("case", ["2 MB prompt of non-ASCII text", "lone surrogate", "900 deep"])
def test_inputs_that_were_dropped_whole_are_journaled(capture_home, case):
    """Each was dropped whole (hooks.log: JSONDecodeError past the 4 MB stdin cap,
    UnicodeEncodeError, RecursionError); now each is journaled, cut."""
    if case == "2 MB prompt of non-ASCII text":
        payload = {"session_id": "s", "prompt": "Schöne Grüße " * 160_000}  # 2 M chars, 4 MB
        raw, event = json.dumps(payload, ensure_ascii=False).encode(), "prompt"
    elif case == "lone surrogate":
        payload = {"session_id": "s", "prompt": "a broken emoji \ud800 here"}
        raw, event = json.dumps(payload).encode(), "prompt"  # "\ud800", as JSON escapes it
    else:
        nested: object = "the leaf"
        for _ in range(900):
            nested = {"k": nested}
        payload = {
            "session_id": "s",
            "tool_name": "Bash",
            "tool_input": nested,
            "tool_response": {"stdout": "ok"},
        }
        raw, event = json.dumps(payload).encode(), "tool"
    assert hook(capture_home, event, raw).returncode == 0
    [record] = journal_of(capture_home, "s")
    if case == "2 MB prompt of non-ASCII text":
        assert record["prompt"].startswith("Schöne Grüße") and "characters cut" in record["prompt"]
    elif case == "lone surrogate":
        assert record["prompt"] == "a broken emoji \ufffd here"
    else:
        assert record["tool"] == "Bash" and record["output"] == {"stdout": "ok"}
        assert "nested deeper than" in json.dumps(record["input"])


# -- item 4: the output bounded as a whole ---------------------------------------------------
def test_a_write_response_is_bounded_as_a_whole(tmp_path):
    content = "".join(f"line {i}: some file content here\n" for i in range(3000))
    response = {
        "type": "update",
        "filePath": "/home/u/src/app.py",
        "content": content,
        "originalFile": content.replace("here", "there"),
        "structuredPatch": [
            {
                "oldStart": 1,
                "oldLines": 3000,
                "newStart": 1,
                "newLines": 3000,
                "lines": [f"-line {i}" for i in range(3000)],
            }
        ],
    }
    record = {
        "ts": 1.0,
        "event": "tool",
        "tool": "Write",
        "input": {"file_path": "/x"},
        "output": response,
        "ok": True,
    }
    [back] = list(read_session([append(tmp_path, "w", record)]))
    size = len(json.dumps(back["output"], ensure_ascii=False))
    assert size <= MAX_OUTPUT * 1.25, size
    assert back["output"]["filePath"] == "/home/u/src/app.py"  # short fields stay whole
    assert back["output"]["type"] == "update"


# -- what earlier versions stored: memory-agent scrub ----------------------------------------
OLD = {  # what an earlier version stored verbatim
    "input password": "OldPl41nPassw0rd",
    "curl": "Hunt3rCurlPass",
    "env secret": AWS_SECRET,
    "query": "Qu3ryS3cretPassw0rd",
    "gz prompt": "GzPr0mptS3cretVal",
    "inbox": "Inb0xS3cretValue",
}


def old_records(session: str, secret_of: str) -> list[dict]:
    return [
        {
            "ts": 100.0,
            "event": "prompt",
            "session": session,
            "client": "claude-code",
            "prompt": f"deploy with password {OLD[secret_of]} please",
        },
        {
            "ts": 101.0,
            "event": "tool",
            "session": session,
            "client": "claude-code",
            "tool": "Bash",
            "input": {
                "command": f"curl -u ci:{OLD['curl']} https://x.io",
                "password": OLD["input password"],
                "env": {"AWS_SECRET_ACCESS_KEY": OLD["env secret"]},
            },
            "output": "ok",
            "ok": True,
        },
        {"ts": 102.0, "event": "stop", "session": session, "answer": "done"},
    ]


def lines(records: list[dict]) -> bytes:
    return b"".join((json.dumps(r) + "\n").encode() for r in records)


@pytest.fixture
def old_home(tmp_path):
    """A home as an earlier version left it: a plain journal, a gzipped part, events (plain
    and gzipped) and a gate inbox holding secrets, and one lesson the gate wrote by itself."""
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    j = home / "journal"
    j.mkdir(mode=0o700, exist_ok=True)
    (j / "s-plain.jsonl").write_bytes(lines(old_records("s-plain", "input password")))
    (j / "s-gz.jsonl.4000-1700000000000000000.gz").write_bytes(
        gzip.compress(lines(old_records("s-gz", "gz prompt")))
    )
    (j / "s-gz.jsonl").write_bytes(lines([{"ts": 200.0, "event": "prompt", "prompt": "later"}]))
    (j / ".s-gz.jsonl.gz.tmp-999999999-abc123").write_bytes(b"crashed copy " + OLD["curl"].encode())
    ev = home / "events"
    ev.mkdir(mode=0o700, exist_ok=True)
    query = {
        "kind": "query",
        "qid": "q",
        "text": f"password {OLD['query']}",
        "results": 0,
        "ts": 1.0,
    }
    (ev / "20250101T000000-1-aaaaaa.jsonl").write_bytes(lines([query]))
    (ev / "20240101T000000-2-bbbbbb.jsonl.gz").write_bytes(gzip.compress(lines([query])))
    (home / "inbox").mkdir(mode=0o700, exist_ok=True)
    (home / "inbox" / "state.json").write_text(
        json.dumps(
            {
                "proposed": {
                    "k1": {"title": "curl fails", "command": f"curl -u ci:{OLD['inbox']} x"}
                },
                "promoted": {},
            }
        )
    )
    (home / "kb" / "pitfall").mkdir(exist_ok=True)
    (home / "kb" / "pitfall" / "auto-lesson.md").write_text(
        "---\nid: auto-lesson\ntitle: pytest fails without the fixture\ntype: pitfall\n"
        "status: active\ncreated: '2026-01-01T00:00:00Z'\ntags: [auto]\nsource: auto\n---\n\n"
        "Observed output: ...\n"
    )
    return home


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env_for(home, home.parent / "cache"),
        timeout=300,
    )


def test_scrub_redacts_plain_and_gzipped_journals_events_and_inbox(old_home):
    before = {
        name: list(read_session(paths)) for name, paths in sessions(old_home / "journal").items()
    }
    assert OLD["gz prompt"] in stored(old_home)  # the test sees inside gzip
    proc = run_cli(old_home, "scrub", "--json", "--no-rebuild")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["journal"]["lines"] == 4  # prompt + tool of each session
    assert report["events"]["lines"] == 2 and report["inbox"] == 1
    assert [lesson["id"] for lesson in report["auto_lessons"]] == ["auto-lesson"]
    assert report["auto_lessons"][0]["archive"].startswith("memory-agent archive auto-lesson ")
    everything = stored(old_home)
    for name, secret in OLD.items():
        assert secret not in everything, f"{name} still stored"
    assert (old_home / "run" / "scrub-v1").exists()
    # the records are all still there, in order, only redacted
    after = {
        name: list(read_session(paths)) for name, paths in sessions(old_home / "journal").items()
    }
    assert {n: [r["event"] for r in rs] for n, rs in after.items()} == {
        n: [r["event"] for r in rs] for n, rs in before.items()
    }
    assert after["s-gz"][-1]["prompt"] == "later"
    assert after["s-plain"][1]["input"]["command"].startswith("curl -u ")
    # idempotent: a second run changes nothing
    snapshot = {
        p: p.read_bytes() for p in old_home.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    again = json.loads(run_cli(old_home, "scrub", "--json", "--no-rebuild").stdout)
    assert again["journal"]["lines"] == again["events"]["lines"] == again["inbox"] == 0
    now = {p: p.read_bytes() for p in old_home.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert now == snapshot


def test_the_daemon_scrubs_at_its_first_start_and_the_episodes_follow(
    old_home, shared_cache, monkeypatch
):
    """Run once on upgrade: the daemon scrubs when run/scrub-v1 is absent, then builds a fresh
    index generation (it writes the marker last), so no episode built from the old journal
    text stays searchable, and the old generation's files are gone."""
    for key, value in env_for(old_home, shared_cache).items():
        if key.startswith("MEMORY_AGENT_") or key == "PYTHONPATH":  # the daemon runs this tree
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("MEMORY_AGENT_JOURNAL_RETENTION_DAYS", "100000")  # episodes of 1970
    client = DaemonClient(old_home)
    marker = old_home / "run" / "scrub-v1"
    try:
        client.ensure()
        # the files are scrubbed before the daemon answers (the gate never reads old text)
        for name, secret in OLD.items():
            assert secret not in stored(old_home / "journal") + stored(old_home / "events"), name
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:  # the scrub's own signal
            time.sleep(0.2)
        assert marker.exists(), (old_home / "run" / "daemon.log").read_text()[-2000:]
        for name, secret in OLD.items():
            assert secret not in stored(old_home), f"{name} still stored"
        hits = client.call_tool(
            "memory_search", {"query": "deploy with password please", "include_episodes": True}
        )["hits"]
        assert [h for h in hits if h["id"].startswith("episodes/")], hits
        assert "[REDACTED" in json.dumps(hits)
        # on demand, with this version's daemon running: nothing left to do, the daemon's own
        # events file (held open) is left alone, the daemon keeps running
        live = sorted((old_home / "events").glob(f"*-{client.pid()}-*.jsonl"))
        assert live
        before = {p: p.stat().st_ino for p in live}
        proc = run_cli(old_home, "scrub", "--json")
        assert proc.returncode == 0, proc.stderr
        again = json.loads(proc.stdout)
        assert again["journal"]["lines"] == again["events"]["lines"] == 0
        assert again["index"] is None and again["stopped_daemon"] is None
        assert {p: p.stat().st_ino for p in live} == before
        assert client.health() is not None
    finally:
        client.stop(wait=True)
        for pid in daemon_pids(old_home):
            os.kill(pid, signal.SIGKILL)


# -- review of the redaction (defects 3, 4, 7 and 9 of the reviewer's list) -------------------
def test_a_secret_inside_escaped_json_is_redacted():
    """`curl -d "{\"password\":\"...\"}"`: the backslash before the quotes around the name
    defeated the pattern, the password was stored verbatim."""
    command = (
        'curl https://api.example.com/login -d "{\\"username\\":\\"bob\\",'
        '\\"password\\":\\"hunter22pw\\"}"'
    )
    out = json.dumps(clean_record({"input": {"command": command}}, "s"))
    assert "hunter22pw" not in out
    assert "bob" in out and "[REDACTED" in out  # only the secret goes
    assert "hunter22pw" not in redact(command.replace('"', "'"))  # \'...\' alike


@pytest.mark.parametrize(
    "value",
    [
        {"args": ["--password", "hunter22pw"]},
        ["mysql", "-phunter22pw"],
        ["mysql", "-uroot", "-phunter22pw", "shop"],
        ["curl", "-u", "bob:hunter22pw", "https://x.io"],
        [["X-Api-Key", "hunter22pw"]],
        ["docker", "login", "-u", "bob", "-p", "hunter22pw", "registry.io"],
        ["sshpass", "-p", "hunter22pw", "ssh", "host"],
    ],
    ids=[
        "--password",
        "mysql -pX",
        "mysql -uroot -pX",
        "curl -u",
        "header pair",
        "docker login -p",
        "sshpass -p",
    ],
)
def test_a_secret_split_across_list_elements_is_redacted(value):
    """Each string of a list was redacted alone: the flag naming the secret and its value
    sit in two elements."""
    assert "hunter22pw" not in json.dumps(clean_record({"input": value}, "s"))
    assert "hunter22pw" not in json.dumps(redact_value(value))  # what the scrub uses


@pytest.mark.parametrize(
    "text",
    [
        "docker login -u bob -p hunter22pw registry.io",
        "sshpass -p hunter22pw ssh deploy@host",
        "password = hun,ter22pw",
    ],
)
def test_cli_passwords_and_a_value_with_a_comma_are_redacted(text):
    assert "ter22pw" not in redact(text)
    assert "ter22pw" not in json.dumps(clean_record({"prompt": text}, "s"))


def test_ports_and_words_stay_when_no_password_program_runs():
    assert redact("ssh -p 2222 deploy@host") == "ssh -p 2222 deploy@host"
    assert redact_value(["ssh", "-p", "2222", "host"]) == ["ssh", "-p", "2222", "host"]
    assert redact_value(["--user", "bob"]) == ["--user", "bob"]


def best_of(fn, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def test_many_mysql_dash_p_cost_no_more_than_the_flags_themselves():
    """`mysql -pX -pX ...`: each `-p` searched up to 500 characters back for `mysql` (100 KB:
    1.08 s). The programs are now found once per line: the same text with `mysql` costs
    about what it costs without (where no `-p` can be a password)."""
    text = ("mysql " + "-pQ " * 25_000)[:100_000]
    other = text.replace("mysql", "mysqx", 1)
    with_context, without = best_of(lambda: redact(text)), best_of(lambda: redact(other))
    assert redact(text).startswith("mysql -p[REDACTED:password] -p[REDACTED:password]")
    assert with_context < 2.5 * without, (with_context, without)


def test_a_record_of_many_long_strings_redacts_within_one_budget(monkeypatch):
    """Each string of a record was redacted up to its cut plus twice the 4 KB margin: 50 long
    strings meant ~400 KB through `redact` and a hook past its budget. Now a record has one
    budget (`REDACT_BUDGET` characters). Counted in characters sent through `redact` (the
    work the budget bounds), not timed: a timing ratio failed on a loaded machine."""
    sent = [0]

    def counted(text, *args, **kwargs):
        sent[0] += len(text)
        return redact(text, *args, **kwargs)

    monkeypatch.setattr(journal, "redact", counted)
    monkeypatch.setattr(redact_module, "redact", counted)  # redact_value's strings
    unit = "password is the token x " * 10_000  # 240 KB
    many = {"event": "tool", "output": {f"part{i}": unit for i in range(50)}}
    out = clean_record(many, "s")["output"]
    assert REDACT_BUDGET <= sent[0] < 1.5 * REDACT_BUDGET, sent[0]  # was ~400 KB
    assert len(json.dumps(out)) < 2 * MAX_OUTPUT + 50 * 40  # still bounded as a whole
    # mostly structure (2,500 strings of 10 KB, kept as a JSON text cut to the budget): each
    # string was redacted up to the whole budget plus the margins, ~25 MB; now, once the
    # record's budget is spent, each is cut to a few hundred characters first
    sent[0] = 0
    nested = {"event": "tool", "output": [[unit[:10_080]] * 50 for _ in range(50)]}
    out = clean_record(nested, "s")["output"]
    assert sent[0] < REDACT_BUDGET + 2_500 * 400, sent[0]
    assert len(json.dumps(out)) < 2 * MAX_OUTPUT


def failure_fix_records(session: str, n: int, secret: str) -> list[dict]:
    """One turn: a command fails, a file is edited, the same command passes."""
    base = {"session": session, "client": "claude-code", "cwd": "/w"}
    return [
        {**base, "ts": 100.0 + n, "event": "prompt", "prompt": f"deploy, password={secret}{n}"},
        {
            **base,
            "ts": 100.1 + n,
            "event": "tool",
            "tool": "Bash",
            "ok": False,
            "input": {"command": "make deploy"},
            "error": "Error: missing DEPLOY_TARGET",
        },
        {
            **base,
            "ts": 100.2 + n,
            "event": "tool",
            "tool": "Edit",
            "ok": True,
            "input": {"file_path": "/w/settings.py"},
            "output": "ok",
        },
        {
            **base,
            "ts": 100.3 + n,
            "event": "tool",
            "tool": "Bash",
            "ok": True,
            "input": {"command": "make deploy"},
            "output": "done",
        },
        {**base, "ts": 100.4 + n, "event": "stop", "answer": "deployed"},
    ]


def test_scrub_resets_the_gates_read_positions_so_no_episode_is_counted_twice(capture_home):
    """The gate knows a journal file by the hash of its first line and reads on from an
    offset. A scrub that rewrote the first line made it read the file whole again: every
    episode counted twice (new ids), the prompt counter doubled."""
    home = capture_home
    secret = "Hunt3rPassw0rdGate"
    folder = home / "journal"
    folder.mkdir(mode=0o700, exist_ok=True)
    for session in ("s-gate-a", "s-gate-b"):
        records = [r for n in (1, 2) for r in failure_fix_records(session, n, secret)]
        (folder / f"{session}.jsonl").write_bytes(lines(records))
    memory = Memory(config.load({"home": str(home)}))
    gate = Gate(memory, gateway=None)
    first = gate.run()
    assert first["proposed"], first  # 4 episodes of 2 sessions: a qualified lesson
    before = read_state(home)
    (key,) = before["observed"]
    assert len(before["observed"][key]["episodes"]) == 4

    report = scrub_home(home, mark=False)
    assert report["journal"]["sessions"] == ["s-gate-a", "s-gate-b"]
    assert secret not in stored(folder)
    gate.run()
    after = read_state(home)
    assert sorted(after["observed"][key]["episodes"]) == sorted(before["observed"][key]["episodes"])
    assert {n: e["prompts"] for n, e in after["journal"].items()} == {"s-gate-a": 2, "s-gate-b": 2}
    assert after["proposed"].keys() == before["proposed"].keys()
    assert secret not in stored(home / "inbox")
    # appended after the scrub: read once, numbered on
    with open(folder / "s-gate-a.jsonl", "ab") as fh:
        fh.write(lines(failure_fix_records("s-gate-a", 3, "x")))
    gate.run()
    episodes = read_state(home)["observed"][key]["episodes"]
    assert sorted(episodes) == sorted([*before["observed"][key]["episodes"], "episodes/s-gate-a/3"])


def test_scrub_on_demand_stops_a_running_daemon_before_it_rewrites_the_journal(
    old_home, shared_cache, monkeypatch
):
    """The daemon's gate runs in another process, with no lock the CLI could share: were it to
    run between a file's rewrite and the reset of its read positions (or save a state read
    before the reset), it would count the session twice. So `memory-agent scrub` stops a
    running daemon (this version's too) when it has a journal file or the gate's state to
    rewrite, and holds the spawn lock while it does."""
    for key, value in env_for(old_home, shared_cache).items():
        if key.startswith("MEMORY_AGENT_") or key == "PYTHONPATH":
            monkeypatch.setenv(key, value)
    (old_home / "run").mkdir(exist_ok=True)
    (old_home / "run" / "scrub-v1").write_text("scrubbed by an earlier run\n")  # no scrub at start
    path = old_home / "inbox" / "state.json"
    state = json.loads(path.read_text())
    state["journal"] = {
        "s-plain": {
            "files": {"0123456789abcdef": {"offset": 900}},
            "parts": [],
            "prompts": 1,
            "tail": None,
        }
    }
    path.write_text(json.dumps(state))
    client = DaemonClient(old_home)
    try:
        client.ensure()
        pid = client.pid()
        proc = run_cli(old_home, "scrub", "--json", "--no-rebuild")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["stopped_daemon"] == pid
        assert client.health() is None
        assert report["journal"]["sessions"] == ["s-gz", "s-plain"]
        assert "s-plain" not in read_state(old_home)["journal"]  # read again, once, cleanly
        for name, secret in OLD.items():
            assert secret not in stored(old_home), f"{name} still stored"
    finally:
        client.stop(wait=True)
        for pid in daemon_pids(old_home):
            os.kill(pid, signal.SIGKILL)
