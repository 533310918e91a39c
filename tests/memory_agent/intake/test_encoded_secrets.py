"""Secrets behind an encoding or a line break (issue 32, item 2): a base64 blob holding
`aws_secret_access_key=...` and a password, with nothing labelling it, was journaled verbatim.
Base64 (wrapped or not), hex and URL-encoded runs are decoded and read with the same rules; a
token hard-wrapped across lines is read whole - by capture through the real hook command."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from memory_agent.intake.redact import redact
from memory_agent.intake.secrets import found
from tests.memory_agent.intake.journal_hooks import hook, journal_of

AWS_SECRET = "q8Zr2LmW4xTn7VbK9pQsD3fH6jL1nR5tV8yB2cE4"  # fake, well formed
PASSWORD = "Vh7#kQ2m!xR9"
CONFIG = f"[default]\naws_secret_access_key={AWS_SECRET}\ndb_password={PASSWORD}\n"
BLOB = base64.b64encode(CONFIG.encode()).decode()
WRAPPED = base64.encodebytes(CONFIG.encode()).decode()  # 76 columns a line, as `base64` prints
TOKEN = "ghp_Zr2LmW4xTn7VbK9pQsD3fH6jL1nR5tV8yB2c"


@pytest.mark.parametrize(
    "text",
    [
        f"the runner's config: {BLOB} (from the old box)",
        f"the runner's config:\n{WRAPPED}\nthat was all",
        f"hex: {CONFIG.encode().hex()}",
        f"url: https://ci.example.org/hook?cfg={quote(CONFIG)}&x=1",
        f"twice: {base64.b64encode(BLOB.encode()).decode()}",
        f"urlsafe: {base64.urlsafe_b64encode(CONFIG.encode()).decode()}",
    ],
    ids=["base64", "base64 wrapped", "hex", "url-encoded", "base64 in base64", "base64url"],
)
def test_an_encoded_secret_is_redacted_whole_and_found(text):
    out = redact(text)
    assert "[REDACTED:" in out
    for piece in (BLOB[8:40], WRAPPED.splitlines()[0][8:40], CONFIG.encode().hex()[8:40]):
        assert piece not in out, out
    assert found(text), text


def test_encoded_text_without_a_secret_stays():
    prose = base64.b64encode(b"the quick brown fox jumps over the lazy dog, twice").decode()
    text = f"fixture {prose} and sha256:{'ab' * 32}"
    assert redact(text) == text
    assert found(text) == []


def test_a_token_wrapped_across_lines_is_redacted_whole():
    text = f"the token is {TOKEN[:22]}\n{TOKEN[22:]}\nand the next line stays"
    out = redact(text)
    assert TOKEN[:22] not in out and TOKEN[22:] not in out, out
    assert out.endswith("\nand the next line stays")
    assert [f.value for f in found(text)] == [TOKEN]  # its fingerprint is the plain token's


def test_a_token_at_a_line_end_does_not_take_the_next_lines_word():
    text = f"token {TOKEN}\nafter"
    assert redact(text).endswith("\nafter")


def test_the_hook_journals_an_unlabelled_blob_without_its_secrets(capture_home):
    """Through `memory-agent hook` as `init` prints it: the blob (and so the secret and the
    password inside it) was journaled as it was."""
    for event, payload in [
        ("prompt", {"prompt": f"decode this for me: {BLOB}"}),
        (
            "tool",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "kubectl get secret ci -o yaml"},
                "tool_response": {"stdout": f"data:\n  config: |\n{WRAPPED}", "stderr": ""},
            },
        ),
    ]:
        raw = json.dumps({"session_id": "s2", "cwd": "/tmp", **payload}).encode()
        assert hook(capture_home, event, raw).returncode == 0
    records = journal_of(capture_home, "s2")
    assert len(records) == 2
    kept = json.dumps(records)
    assert BLOB[:24] not in kept and WRAPPED.splitlines()[0][:24] not in kept
    assert "decode this for me" in kept
