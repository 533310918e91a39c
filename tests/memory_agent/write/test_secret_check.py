"""The gateway runs the push check before it writes (issues 32 and 33): nothing that cannot be
pushed is committed silently. `memory_add` of a real-looking secret - plain, base64-wrapped, an
AWS secret beside its key id - is refused with the fix and writes nothing; notes about tokens,
headers and CI permissions are written; a false positive is released by the KB's allow-list (a
commit like any write); a write answers for what it adds, not for what a file already held.
(docs/adr/0023-secrets-in-the-kb.md)"""

from __future__ import annotations

import base64

import pytest

from memory_agent.errors import Invalid
from memory_agent.intake.secrets import ALLOW_FILE, SecretFound
from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.test_push_check import AWS_ID, AWS_SECRET, CI_NOTE, JWT_EXAMPLE

TOKEN = "ghp_Zr2LmW4xTn7VbK9pQsD3fH6jL1nR5tV8yB2c"  # fake, well formed
BLOB = base64.b64encode(
    f"[default]\naws_secret_access_key={AWS_SECRET}\ndb_password=Vh7#kQ2m!xR9\n".encode()
).decode()


def nothing_written(memory, head: str) -> None:
    assert head_of(memory.kb_dir) == head
    assert git(memory.kb_dir, "status", "--porcelain") == ""
    assert not list((memory.home / "run").glob("intents/*.json"))


@pytest.mark.parametrize(
    "body",
    [
        f"Deploys use {TOKEN} until Friday.",
        f"The runner's config, unlabelled: {BLOB}",
        f"New keys: {AWS_ID} {AWS_SECRET}",
    ],
    ids=["token", "base64 blob", "aws pair"],
)
def test_add_of_a_real_secret_is_refused_with_the_fix_and_writes_nothing(memory, gateway, body):
    """Before, `memory_add` accepted each: the gateway ran no secret check at all (the push
    refused them later, and that machine then pushed nothing)."""
    head = head_of(memory.kb_dir)
    with pytest.raises(SecretFound) as caught:
        gateway.add("Deploy credentials", body, type="note")
    assert isinstance(caught.value, Invalid)  # an `invalid` error the agent reads, with a fix
    message, fix = caught.value.message, caught.value.fix
    assert message.startswith("kb/note/deploy-credentials.md would hold what looks like a secret")
    assert "line " in message and "fingerprint " in message and "nothing was written" in message
    assert "leave the secret out" in fix and "memory-agent secrets allow" in fix
    for value in (TOKEN, BLOB, AWS_SECRET):
        assert value not in message + fix
    nothing_written(memory, head)


def test_notes_about_tokens_headers_and_ci_permissions_are_written(memory, gateway):
    reply = gateway.add("How CI authenticates", CI_NOTE, type="guideline")
    assert reply["status"] == "created"


def test_a_false_positive_is_released_by_the_allow_list_in_a_commit(memory, gateway):
    body = f"jwt.io decodes its example:\n\n    {JWT_EXAMPLE}\n"
    with pytest.raises(SecretFound) as caught:
        gateway.add("How a JWT reads", body, type="note")
    fp = caught.value.message.split("fingerprint ", 1)[1].split(")", 1)[0]
    allowed = gateway.allow_secret(fp, "jwt.io's example token, printed in every tutorial")
    assert allowed["status"] == "allowed" and allowed["commit"] == head_of(memory.kb_dir)
    assert git(memory.kb_dir, "show", "--name-only", "--format=%B", "HEAD").split("\n")[0] == (
        f"memory: allow secret finding {fp}"
    )
    assert (
        (memory.kb_dir / ALLOW_FILE)
        .read_text()
        .endswith(f"{fp}  jwt.io's example token, printed in every tutorial\n")
    )
    assert gateway.add("How a JWT reads", body, type="note")["status"] == "created"
    assert gateway.allow_secret(fp, "again")["status"] == "unchanged"
    with pytest.raises(Invalid, match="fingerprint"):
        gateway.allow_secret("not-a-fingerprint", "why")
    with pytest.raises(Invalid, match="reason"):
        gateway.allow_secret(fp, "  ")


def test_a_write_answers_for_what_it_adds_not_for_what_the_file_held(memory, gateway):
    """An entry committed by hand with a secret in it (before this check) can still be
    superseded or archived: the old file is rewritten with the finding it already held."""
    path = memory.kb_dir / "note" / "old-deploy-notes.md"
    path.write_text(
        "---\nid: old-deploy-notes\ntitle: Old deploy notes\ntype: note\nstatus: active\n"
        f"created: 2026-01-05T10:00:00Z\n---\nThe deploy token was {TOKEN}.\n"
    )
    git(memory.kb_dir, "add", "note/old-deploy-notes.md")
    commit(memory.kb_dir, "by hand")
    reply = gateway.supersede(
        "old-deploy-notes",
        "Deploy notes",
        "The deploy token lives in the vault under ci/deploy.",
        confirm=True,
    )
    assert reply["status"] == "superseded"
    with pytest.raises(SecretFound):  # a new secret in the reason is still refused
        gateway.archive(reply["id"], f"replaced by {TOKEN[:4]}{TOKEN[4:]}", confirm=True)
