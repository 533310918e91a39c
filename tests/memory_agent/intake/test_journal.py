"""The journal (L0): compaction never loses a line; inputs are cut rather than dropped (a 2 MB
prompt, a lone surrogate, 900 levels deep), cut with a margin so no fragment of a secret across the
cut is left; a tool's output bounded as a whole, and a record redacted within one budget. (Issues 11
and 17.)

(`capture_home` is the memory_agent conftest's.)"""

from __future__ import annotations

import json

import pytest

from memory_agent.intake import journal
from memory_agent.intake import redact as redact_module
from memory_agent.intake.journal import (
    MAX_FIELD,
    MAX_OUTPUT,
    REDACT_BUDGET,
    append,
    clean_record,
    compact,
    read_session,
    sessions,
)
from memory_agent.intake.redact import redact
from tests.memory_agent.intake.journal_hooks import hook, journal_of
from tests.memory_agent.stored_secrets import GH


def test_compaction_never_loses_a_line(tmp_path):
    folder = tmp_path / "journal"
    for i in range(50):
        append(folder, "s", {"ts": i, "event": "prompt", "prompt": f"p{i}"})
    assert compact(folder, idle_s=0) == ["s.jsonl"]
    for i in range(50, 60):  # the session resumes later: a new plain file
        append(folder, "s", {"ts": i, "event": "prompt", "prompt": f"p{i}"})
    (folder / "s.jsonl.compacting").write_text(
        json.dumps({"ts": 60, "event": "prompt", "prompt": "p60", "session": "s"}) + "\n"
    )  # a compaction that died after renaming the file aside
    prompts = [r["prompt"] for r in read_session(sessions(folder)["s"])]
    assert sorted(prompts, key=lambda p: int(p[1:])) == [f"p{i}" for i in range(61)]
    compact(folder, idle_s=0)
    again = [r["prompt"] for r in read_session(sessions(folder)["s"])]
    assert sorted(again, key=lambda p: int(p[1:])) == [f"p{i}" for i in range(61)]
    assert not list(folder.glob("*.jsonl")) and not list(folder.glob("*.compacting"))


def fragments(secret: str, size: int = 8) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


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


# -- the output bounded as a whole -----------------------------------------------------------------
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
