"""Secrets nothing labels but what travels with them (issue 32, item 1): the 40-character secret
beside an AWS access key id, in the credentials CSV the AWS console downloads and on one line
after the key id, and the columns of a CSV whose header names them - redacted by capture (the
real hook command) as well as the key id was."""

from __future__ import annotations

import json

import pytest

from memory_agent.intake.pairs import csv_columns, key_pairs
from memory_agent.intake.redact import redact
from memory_agent.intake.secrets import found
from tests.memory_agent.intake.journal_hooks import hook, journal_of

# fake, well formed, never issued
KEY_ID = "AKIAZ7QW4RTY2UIO3PLK"
SECRET = "q8Zr2LmW4xTn7VbK9pQsD3fH6jL1nR5tV8yB2cE4"
PASSWORD = "Vh7#kQ2m!xR9"
CONSOLE_CSV = (
    "User name,Password,Access key ID,Secret access key,Console login link\n"
    f"ci-deploy,{PASSWORD},{KEY_ID},{SECRET},https://123456789012.signin.aws.amazon.com/console\n"
)
KEYS_CSV = f"Access key ID,Secret access key\r\n{KEY_ID},{SECRET}\r\n"


@pytest.mark.parametrize(
    "text",
    [
        CONSOLE_CSV,
        KEYS_CSV,
        f"{KEY_ID} {SECRET}",
        f"{KEY_ID}:{SECRET}",
        f"{KEY_ID}\t{SECRET}",
        f"key id {KEY_ID}\nsecret {SECRET}\n",
        f"aws configure set aws_access_key_id {KEY_ID} && aws configure set "
        f"aws_secret_access_key {SECRET}",
    ],
    ids=["console csv", "keys csv", "space", "colon", "tab", "adjacent lines", "aws configure"],
)
def test_a_secret_beside_its_key_id_is_redacted_and_found(text):
    out = redact(text)
    assert SECRET not in out and KEY_ID not in out and PASSWORD not in out, out
    assert {f.value for f in found(text)} >= {SECRET}


def test_a_csv_column_named_like_a_secret_is_redacted_row_by_row():
    text = 'name,api_token,owner\nbilling,"Tk9,x2Lm4qW8",ops\nledger,Pz3vR8nY1qK6,"Jo, Ann"\n\nnext'
    assert [f.value for f in csv_columns(text)] == ["Tk9,x2Lm4qW8", "Pz3vR8nY1qK6"]
    out = redact(text)
    assert "Tk9" not in out and "Pz3vR8nY1qK6" not in out
    assert out.startswith("name,api_token,owner\nbilling,") and out.endswith('"Jo, Ann"\n\nnext')


def test_a_forty_character_run_far_from_any_key_id_is_no_pair():
    assert key_pairs(f"{KEY_ID} was rotated.\n\nAnd later: {SECRET}") == []
    assert key_pairs(f"{KEY_ID}" + " pad" * 60 + f" {SECRET}") == []
    assert key_pairs(f"{SECRET} alone") == []


def test_the_hook_journals_the_credentials_csv_and_the_pair_without_the_secrets(capture_home):
    """Through `memory-agent hook` as `init` prints it: the key ids were redacted and the
    secrets beside them journaled verbatim."""
    for event, payload in [
        ("prompt", {"prompt": f"here are the new keys:\n{CONSOLE_CSV}"}),
        (
            "tool",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "cat ~/Downloads/ci-deploy_accessKeys.csv"},
                "tool_response": {"stdout": KEYS_CSV, "stderr": "", "interrupted": False},
            },
        ),
        ("prompt", {"prompt": f"use {KEY_ID} {SECRET} for the deploy"}),
    ]:
        raw = json.dumps({"session_id": "s1", "cwd": "/tmp", **payload}).encode()
        assert hook(capture_home, event, raw).returncode == 0
    records = journal_of(capture_home, "s1")
    assert len(records) == 3
    kept = json.dumps(records)
    assert SECRET not in kept and PASSWORD not in kept and KEY_ID not in kept
    assert "ci-deploy" in kept and "for the deploy" in kept  # what is not secret stays
