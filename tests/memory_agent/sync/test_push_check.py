"""What the push check refuses and what it lets through, with a real `Syncer` and a bare remote on
disk: documentation of tokens, headers and CI permissions is pushed (issue 33, item 2: it was
refused, and nothing pushed from that machine again); a real-looking secret is refused naming its
fingerprint and both ways out, and a false positive is released by a reviewed commit of the KB's
allow-list, no history rewritten; a commit answers for what it adds; an unlabelled AWS secret
beside its key id, a base64-wrapped secret and the common tokens of issue 33 are never pushed
(issues 32 and 33); and a machine blocked by a false positive recovers through the CLI.

(`pair`, two homes and a bare remote, is the memory_agent conftest's.)"""

from __future__ import annotations

import base64
import subprocess

import pytest

from memory_agent.intake.secrets import ALLOW_FILE
from memory_agent.sync.publish import SecretFound
from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.intake.test_secret_rules import COMMON, SECRET_PART
from tests.memory_agent.sync.remotes import kb_with_remote, note

CI_NOTE = """OIDC to AWS from GitHub Actions needs no stored key:

```yaml
permissions:
  id-token: write
  contents: read
```

Every API call sends `Authorization: Bearer <token>`; in CI the header is
`Authorization: Bearer ${{ secrets.GITHUB_TOKEN }}`. Set `DB_PASSWORD: ${DB_PASSWORD}` in the
compose file; `token: required` in the schema."""
# jwt.io's example token: a real-looking value every JWT tutorial prints
JWT_EXAMPLE = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwi"
    "aWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS_ID, AWS_SECRET = "AKIAZ7QW4RTY2UIO3PLK", "q8Zr2LmW4xTn7VbK9pQsD3fH6jL1nR5tV8yB2cE4"


def pushed(remote) -> str:
    return git(remote, "log", "--all", "-p", "--format=%B")


def test_notes_about_tokens_headers_and_ci_permissions_are_pushed(tmp_path):
    """Before: `id-token: write` and `Bearer <token>` made the eager redactor change the text,
    the round refused, and every later round refused too."""
    kb, remote, syncer = kb_with_remote(tmp_path)
    note(kb, "oidc", CI_NOTE)
    commit(kb, "how CI authenticates")
    note(kb, "later", "A later note that must not wait behind the first.")
    commit(kb, "later")
    assert syncer.run()["pushed"] == 2
    assert "id-token: write" in pushed(remote) and "Bearer <token>" in pushed(remote)


def test_a_false_positive_names_its_fingerprint_and_an_allowed_one_is_pushed(tmp_path):
    kb, remote, syncer = kb_with_remote(tmp_path)
    since = head_of(kb)
    note(kb, "jwt", f"jwt.io decodes its example:\n\n    {JWT_EXAMPLE}\n")
    commit(kb, "how a JWT reads")
    with pytest.raises(SecretFound) as caught:
        syncer.run()
    message, fix = caught.value.message, caught.value.fix
    assert message.startswith("kb/note/jwt.md holds what looks like a secret at line ")
    assert JWT_EXAMPLE not in message + fix  # named by its fingerprint, never its value
    fp = message.split("fingerprint ", 1)[1].split(";", 1)[0]
    assert fp.startswith("jwt:") and f"memory-agent secrets allow {fp}" in fix
    assert f"rebase -i {since[:12]}" in fix  # the way out for a real secret, too
    assert JWT_EXAMPLE not in pushed(remote)
    (kb / ALLOW_FILE).write_text(f"{fp}  jwt.io's example token, printed in every tutorial\n")
    git(kb, "add", ALLOW_FILE)
    commit(kb, "release jwt.io's example")
    assert syncer.run()["pushed"] == 2  # the blocked commit and the release: no rebase
    assert JWT_EXAMPLE in pushed(remote) and fp in pushed(remote)


def test_a_commit_answers_for_what_it_adds_not_for_what_its_file_held(tmp_path):
    """A file that came from upstream holding a finding (pushed before this check, by a
    plain git client) is edited on another line: the edit is pushed; a second secret added
    to it is not."""
    kb, remote, syncer = kb_with_remote(tmp_path)
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(remote), str(other)], check=True)
    note(other, "old", f"Written before the check: {COMMON['databricks']}\n")
    commit(other, "an old note")
    git(other, "push", "-q", "origin", "HEAD")
    syncer.run()
    assert (kb / "note" / "old.md").exists()
    note(kb, "old", f"Written before the check: {COMMON['databricks']}\n\nA line added.\n")
    commit(kb, "an edit")
    assert syncer.run()["pushed"] == 1
    note(kb, "old", f"Written before the check: {COMMON['databricks']}\n{COMMON['shopify']}\n")
    commit(kb, "a second secret")
    with pytest.raises(SecretFound, match="fingerprint shopify-access-token:"):
        syncer.run()


@pytest.mark.parametrize(
    "body",
    [
        f"{AWS_ID} {AWS_SECRET}",
        f"Access key ID,Secret access key\n{AWS_ID},{AWS_SECRET}\n",
        "the old runner's config:\n"
        + base64.encodebytes(f"[default]\naws_secret_access_key={AWS_SECRET}\n".encode()).decode(),
    ],
    ids=["aws pair", "aws csv", "base64"],
)
def test_an_unlabelled_or_encoded_secret_is_never_pushed(tmp_path, body):
    """Issue 32: the scan used capture's patterns, which left these as they were."""
    kb, remote, syncer = kb_with_remote(tmp_path)
    note(kb, "keys", body)
    commit(kb, "keys")
    with pytest.raises(SecretFound):
        syncer.run()
    history = pushed(remote)
    assert AWS_SECRET not in history and body.splitlines()[-1][:30] not in history


def test_the_common_tokens_are_never_pushed(tmp_path):
    """Issue 33, item 3: each was pushed as it was."""
    kb, remote, syncer = kb_with_remote(tmp_path)
    for name, text in sorted(COMMON.items()):
        note(kb, "token", f"{name}: {text}\n")
        commit(kb, name)
        with pytest.raises(SecretFound):
            syncer.run()
        git(kb, "reset", "-q", "--hard", "HEAD~1")
    history = pushed(remote)
    for text in COMMON.values():
        assert SECRET_PART.search(text).group() not in history


def test_a_machine_blocked_by_a_false_positive_recovers_through_the_cli(pair):
    """The whole way a person takes: `sync` refuses naming the fingerprint, `secrets allow`
    commits the release through the daemon's gateway, the next `sync` pushes both."""
    a, _, remote = pair
    a.cli("remote", "set", str(remote))
    a.sync()
    note(a.kb, "jwt", f"jwt.io decodes its example:\n\n    {JWT_EXAMPLE}\n")
    commit(a.kb, "how a JWT reads")
    code, err = a.sync(check=False)
    assert code != 0 and err["error"]["code"] == "invalid"
    fp = err["error"]["message"].split("fingerprint ", 1)[1].split(";", 1)[0]
    _, reply = a.cli("secrets", "allow", fp, "--reason", "jwt.io's example token")
    assert reply["status"] == "allowed" and reply["commit"]
    assert fp in (a.kb / ALLOW_FILE).read_text()
    a.sync()
    assert JWT_EXAMPLE in pushed(remote) and "jwt.io's example token" in pushed(remote)
    _, again = a.cli("secrets", "allow", fp, "--reason", "twice")
    assert again["status"] == "unchanged"
