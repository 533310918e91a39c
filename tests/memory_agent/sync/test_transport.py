"""Talking to the remote: a push the remote refuses by its own rule is named so (not retried as a
race), a token in any part of the URL's userinfo is never shown or stored, a user name without a
password is shown, and a relative path is the one the person typed. (Issue 21.)

(`pair`, two homes and a bare remote, is the memory_agent conftest's.)"""

import json
import subprocess

import pytest

from tests.memory_agent.sync.remotes import TOKEN


def test_a_push_the_remote_refuses_by_its_own_rule_is_named_so_not_retried_as_a_race(pair):
    """A server hook (or a protected branch) declining the push is not "the other side pushed
    first": the round says the remote refused it and why, keeps the commit, and pushes it once
    the rule is lifted."""
    a, _, remote = pair
    a.cli("remote", "set", str(remote))
    a.sync()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(  # the remote's words are data: quoted, and a secret in them is masked
        "#!/bin/sh\necho 'pushes are frozen for the release'\n"
        "echo 'use token ghp_0123456789abcdefghijABCDEFGHIJ012345'\nexit 1\n"
    )
    hook.chmod(0o755)
    a_id = a.add("Written during the freeze", "An entry written while pushes were refused.")
    code, err = a.sync(check=False)
    assert code != 0 and err["error"]["code"] == "unavailable", err
    message = err["error"]["message"]
    assert "refused the push" in message and "frozen for the release" in message, message
    assert "ghp_0123456789" not in message and "ghp_0123456789" not in json.dumps(
        a.cli("remote")[1]
    )  # nor in what status keeps (run/remote.json)
    assert "kept moving" not in message
    assert "next round" in err["error"]["fix"]
    hook.unlink()
    _, report = a.sync()
    assert report["pushed"] == 1
    published = subprocess.run(
        ["git", "-C", str(remote), "ls-tree", "-r", "--name-only", report["branch"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert any(name.endswith(f"/{a_id}.md") for name in published), published


def test_a_token_in_the_remote_url_is_never_shown_or_stored_by_us(pair):
    a, b, remote = pair
    url = "https://me:ghp_tokentokentoken@127.0.0.1:9/memory.git"  # nothing listens on port 9
    _, set_ = a.cli("remote", "set", url)
    code, err = a.sync(check=False)
    _, status = a.cli("remote")
    assert code != 0 and err["error"]["code"] == "unavailable"
    shown = json.dumps([set_, err, status]) + (a.path / "run" / "remote.json").read_text()
    assert "ghp_tokentokentoken" not in shown and "me:***@127.0.0.1" in shown


@pytest.mark.parametrize(
    "url, shown_as",
    [
        (f"https://{TOKEN}@127.0.0.1:9/memory.git", "https://***@127.0.0.1:9/memory.git"),
        (f"https://{TOKEN}:x-oauth-basic@127.0.0.1:9/m.git", "https://***:***@127.0.0.1:9/m.git"),
        (f"https://me:p@ss{TOKEN}@127.0.0.1:9/m.git", "https://me:***@127.0.0.1:9/m.git"),
    ],
)
def test_a_token_in_any_part_of_the_remote_urls_userinfo_is_never_shown_or_stored(
    tmp_path, url, shown_as
):
    """GitHub's token-only form (`https://<token>@github.com/...`, no password) was printed by
    `remote set`, `remote`/`status` and stored in run/remote.json with every failed round:
    only `user:password@` was masked (and a password holding `@` kept its tail). Fails at
    the first `TOKEN not in` (the set reply)."""
    from memory_agent.kb.gitrepo import KBRepo
    from memory_agent.sync.remote import Syncer
    from memory_agent.sync.transport import RemoteUnreachable

    kb = tmp_path / "kb"
    KBRepo.init(kb)
    syncer = Syncer(kb, tmp_path / "run", None, refresh=lambda paths: None)
    set_ = syncer.set_url(url)  # nothing listens on port 9
    assert TOKEN not in set_["remote"] and set_["remote"] == shown_as
    with pytest.raises(RemoteUnreachable) as caught:
        syncer.run()
    assert TOKEN not in caught.value.message + caught.value.fix
    said = str(syncer.status()) + (tmp_path / "run" / "remote.json").read_text()
    assert TOKEN not in said and "ss" + TOKEN[:4] not in said
    assert syncer.url() == url  # git's config keeps it (credentials are git's business)


def test_a_user_name_without_a_password_in_an_ssh_url_is_shown():
    from memory_agent.sync.transport import shown

    assert shown("ssh://git@example.com/me/memory.git") == "ssh://git@example.com/me/memory.git"
    assert shown("git@example.com:me/memory.git") == "git@example.com:me/memory.git"
    assert shown("fatal: unable to access 'https://me:pw@h/x.git/': 403") == (
        "fatal: unable to access 'https://me:***@h/x.git/': 403"
    )


def test_a_relative_path_as_url_is_the_one_the_person_typed(pair):
    """`memory-agent remote set ../backup.git` (the README: "a path works too"), typed in the
    folder the path is relative to: the daemon stored it as it was, and git read it relative
    to the KB (`kb add` to the daemon's own folder) - the first sync failed "does not appear
    to be a git repository". Fails at the `remote` of the reply (`../remote.git`)."""
    import json
    import sys

    a, _, remote = pair
    work = remote.parent / "work"
    work.mkdir()
    relative = f"../{remote.name}"

    def cli(*args):
        proc = subprocess.run(
            [sys.executable, "-m", "memory_agent", *args, "--home", str(a.path), "--json"],
            capture_output=True,
            text=True,
            env=a.env,
            timeout=300,
            cwd=work,
        )
        return proc.returncode, json.loads(proc.stdout)

    code, reply = cli("remote", "set", relative)
    assert code == 0 and reply["remote"] == str(remote), reply
    a.add("Pushed through a relative path", "The remote was named by a relative path.")
    code, reply = cli("sync")
    assert code == 0 and reply["pushed"] >= 1, reply
    team = remote.parent / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(team)], check=True)
    code, reply = cli("kb", "add", "team", "../team.git")
    assert code == 0 and reply["remote"] == str(team), reply


def test_an_unreachable_remote_is_reported_by_gits_cause_not_its_advice(pair):
    """git ends with 'Please make sure you have the correct access rights / and the repository
    exists.'; the round kept only that last line ('cannot fetch from ...: and the repository
    exists.') and dropped the cause. It reports git's first line and what to check for it."""
    a, _, _ = pair
    # the real ssh (the person's stand-in in these tests reaches every host on this machine)
    config = ["git", "-C", str(a.kb), "config", "core.sshCommand"]
    subprocess.run([*config, "ssh -o BatchMode=yes -o ConnectTimeout=5"], check=True)
    a.cli("remote", "set", "git@nosuchhost.invalid:me/memory.git")  # (.invalid never resolves)
    code, err = a.sync(check=False)
    assert code != 0 and err["error"]["code"] == "unavailable", err
    message, fix = err["error"]["message"], err["error"]["fix"]
    assert "Could not resolve hostname nosuchhost.invalid" in message, message
    assert "and the repository exists" not in message
    assert "git@nosuchhost.invalid:me/memory.git" in message
    assert "DNS" in fix and "writes go on" in fix, fix
