"""The replay and the files people put in a KB (issue 32, item 3 and its low items): a PNG or a
UTF-16 note committed by hand travels untouched, byte for byte, and a round never fails for a
file's encoding (every round failed as `internal ... UnicodeDecodeError ... a bug`: local
commits were read as strict UTF-8); both sides changing one such file keep upstream's and this
side's as a variant. A commit from upstream that git refuses to check out (a path with `..`)
fails the round naming that commit and the fix, not in git's words, and leaves no temporary
folder; a replay's folder left by a process that died is removed at the next round. Real git
repositories in tmp dirs and real `Syncer`s."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from memory_agent.errors import Conflict
from tests.memory_agent.helpers import commit, git, head_of
from tests.memory_agent.sync.remotes import note, two_kbs_on_branches

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(256)) + b"\xff\xfe\x80"
UTF16 = "---\nid: utf16-note\ntitle: Written in UTF-16\n---\nSaved by an old editor.\n".encode(
    "utf-16"
)


def _diverged(tmp_path):
    """Two KBs on one remote and one history; `a` then pushes an entry, so `b`'s next commit
    makes the two diverge (its round replays)."""
    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()
    note(kb_a, "from-a-later", "Pushed by a while b worked.")
    commit(kb_a, "a later")
    a.run()
    return kb_a, a, kb_b, b


def _put(kb: Path, name: str, data: bytes) -> None:
    (kb / name).parent.mkdir(parents=True, exist_ok=True)
    (kb / name).write_bytes(data)
    git(kb, "add", name)


def test_files_that_are_not_utf8_travel_untouched_through_a_replay(tmp_path):
    kb_a, a, kb_b, b = _diverged(tmp_path)
    _put(kb_b, "attachments/diagram.png", PNG)
    _put(kb_b, "note/utf16-note.md", UTF16)
    note(kb_b, "from-b-later", "And an entry beside them.")
    commit(kb_b, "a diagram, an old note and an entry")
    report = b.run()
    assert report["replayed"] == 1 and report["variants"] == []
    a.run()
    for kb in (kb_a, kb_b):
        assert (kb / "attachments/diagram.png").read_bytes() == PNG
        assert (kb / "note/utf16-note.md").read_bytes() == UTF16
        assert (kb / "note/from-a-later.md").is_file() and (kb / "note/from-b-later.md").is_file()
    assert head_of(kb_a) == head_of(kb_b)
    # changed again and deleted on this side only: both travel as well
    _put(kb_b, "attachments/diagram.png", PNG + b"\x00v2")
    git(kb_b, "rm", "-q", "note/utf16-note.md")
    commit(kb_b, "diagram v2, old note gone")
    note(kb_a, "from-a-third", "Meanwhile on a.")
    commit(kb_a, "a third")
    a.run()
    b.run()
    a.run()
    assert (kb_a / "attachments/diagram.png").read_bytes() == PNG + b"\x00v2"
    assert not (kb_a / "note/utf16-note.md").exists()


def test_a_binary_file_both_sides_changed_keeps_upstreams_and_a_variant(tmp_path):
    kb_a, a, kb_b, b = _diverged(tmp_path)
    _put(kb_b, "attachments/diagram.png", PNG)
    commit(kb_b, "diagram")
    b.run()
    a.run()
    _put(kb_a, "attachments/diagram.png", PNG + b"from a")
    commit(kb_a, "diagram on a")
    a.run()
    _put(kb_b, "attachments/diagram.png", PNG + b"from b\xff")
    commit(kb_b, "diagram on b")
    report = b.run()
    [variant] = report["variants"]
    assert variant["path"] == "attachments/diagram.png"
    assert (kb_b / "attachments/diagram.png").read_bytes() == PNG + b"from a"
    assert (kb_b / variant["variant"]).read_bytes() == PNG + b"from b\xff"


def test_a_text_file_upstream_replaced_by_bytes_is_a_variant_not_a_failure(tmp_path):
    kb_a, a, kb_b, b = _diverged(tmp_path)
    _put(kb_b, "README.md", b"# my notes\n")
    commit(kb_b, "readme")
    b.run()
    a.run()
    _put(kb_a, "README.md", "# notes\n".encode("utf-16"))
    commit(kb_a, "readme in utf-16")
    a.run()
    _put(kb_b, "README.md", b"# my notes, edited\n")
    commit(kb_b, "readme edited")
    report = b.run()
    assert [v["path"] for v in report["variants"]] == ["README.md"]
    assert (kb_b / "README.md").read_bytes() == "# notes\n".encode("utf-16")


# -- a commit git refuses, a replay's folder left behind ------------------------------------
def _replay_folders() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("memory-agent-replay-")}


def _push_a_path_git_refuses(kb_a: Path, remote: Path) -> str:
    """A commit on the remote's branch whose tree holds `../escape.md` (made with plumbing:
    git itself never writes one, another tool may)."""
    blob = git(kb_a, "hash-object", "-w", "--stdin", "-t", "blob", "--path", "x").strip()
    inner = subprocess.run(
        ["git", "-C", str(kb_a), "mktree"],
        input=f"100644 blob {blob}\tescape.md\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    listing = git(kb_a, "ls-tree", "HEAD") + f"040000 tree {inner}\t..\n"
    tree = subprocess.run(
        ["git", "-C", str(kb_a), "mktree"], input=listing, capture_output=True, text=True
    ).stdout.strip()
    bad = git(kb_a, "commit-tree", tree, "-p", "HEAD", "-m", "made by another tool").strip()
    git(kb_a, "push", "-q", str(remote), f"{bad}:refs/heads/main")
    return bad


def test_a_commit_git_refuses_names_the_commit_and_leaves_no_folder(tmp_path):
    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()
    bad = _push_a_path_git_refuses(kb_a, remote)
    note(kb_b, "from-b-later", "b's own work, to be replayed.")
    commit(kb_b, "b later")
    before = _replay_folders()
    local = head_of(kb_b)
    for _ in range(2):  # every round alike, nothing left behind by either
        with pytest.raises(Conflict) as caught:
            b.run()
        assert bad[:12] in caught.value.message and "../escape.md" in caught.value.message
        assert "made by another tool" in caught.value.message
        assert "every local commit is kept" in caught.value.message
        assert "run the command by hand" not in caught.value.fix
        assert "memory-agent sync" in caught.value.fix
        assert _replay_folders() == before
        assert head_of(kb_b) == local
    assert git(kb_b, "worktree", "list").count("\n") == 1


def test_a_commit_git_refuses_on_a_fast_forward_is_named_too(tmp_path):
    remote, [(kb_a, a), (kb_b, b)] = two_kbs_on_branches(tmp_path, "main", "main")
    a.run()
    b.run()
    a.run()
    b.run()
    bad = _push_a_path_git_refuses(kb_a, remote)
    with pytest.raises(Conflict) as caught:
        b.run()  # only behind: a fast-forward, in the KB itself
    assert bad[:12] in caught.value.message and "../escape.md" in caught.value.message
    assert "uncommitted" not in caught.value.message


def test_a_replay_folder_left_by_a_dead_process_is_removed_at_the_next_round(tmp_path):
    kb_a, a, kb_b, b = _diverged(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid no process has now
    left = Path(tempfile.gettempdir()) / f"memory-agent-replay-{dead.pid}-abc123"
    (left / "kb" / "note").mkdir(parents=True)
    (left / "kb" / "note" / "copy.md").write_text("a full copy of the KB, once")
    alive = Path(tempfile.gettempdir()) / f"memory-agent-replay-{os.getpid()}-live01"
    alive.mkdir()
    try:
        note(kb_b, "from-b-later", "b's own work.")
        commit(kb_b, "b later")
        b.run()
        assert not left.exists()
        assert alive.exists()  # a running process's folder is left alone
    finally:
        for folder in (left, alive):
            subprocess.run(["rm", "-rf", str(folder)], check=False)


# Before: this side's map was read with yaml.safe_load and each value turned to text: the
# aliases expanded (memory growing until the round was killed). The round runs in a process of
# its own with 1.5 GB and 120 s, and failed on either.
def test_a_project_map_that_expands_by_aliases_is_a_variant_not_a_wedged_round(tmp_path):
    import json
    import resource
    import sys

    kb_a, a, kb_b, b = _diverged(tmp_path)
    (kb_a / "projects.yaml").write_text("alpha: github.com/acme/alpha\n")
    git(kb_a, "add", "projects.yaml")
    commit(kb_a, "alpha named")
    a.run()
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    _put(kb_b, "projects.yaml", ("\n".join(levels) + "\n").encode())
    commit(kb_b, "a map written by a tool")
    script = (
        "import json, sys, threading\nfrom pathlib import Path\n"
        "from memory_agent.sync.remote import Syncer\n"
        "s = Syncer(Path(sys.argv[1]), Path(sys.argv[2]), threading.RLock(), lambda p: None)\n"
        "print(json.dumps(s.run()))\n"
    )

    def bounded():
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    proc = subprocess.run(
        [sys.executable, "-c", script, str(kb_b), str(tmp_path / "b" / "run")],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=bounded,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert [v["path"] for v in report["variants"]] == ["projects.yaml"]
    assert (kb_b / "projects.yaml").read_text() == "alpha: github.com/acme/alpha\n"
