"""`kb fanout`: a KB's flat entry folders moved into `<type>/<xx>/<id>.md` in one commit of
renames (each file's bytes and blob kept), found and read in their new places, new entries
written there; refused with uncommitted changes; an interrupted run finished by running it
again; the daemon route and the CLI's preview (ADR 0031)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.errors import Conflict, Invalid
from memory_agent.kb.entries import shard
from memory_agent.kb.files import FANOUT
from memory_agent.recall import reads
from tests.memory_agent.helpers import git, head_of, make_memory
from tests.memory_agent.mcp_helpers import ROOT


def _flat(kb: Path) -> dict[str, bytes]:
    """Each tracked flat entry file's bytes, by path."""
    names = git(kb, "ls-files", "--", "*/*.md").split()
    return {n: (kb / n).read_bytes() for n in names if n.count("/") == 1 and "/" in n}


def _fanned(name: str) -> str:
    folder, file = name.split("/")
    return f"{folder}/{shard(file[:-3])}/{file}"


def test_a_preview_moves_nothing(memory, gateway):
    kb, before = memory.kb_dir, head_of(memory.kb_dir)
    flat = _flat(kb)
    reply = gateway.fan_out()
    assert reply["status"] == "preview" and reply["moves"] == len(flat) > 5
    assert reply["examples"][0]["to"] == _fanned(reply["examples"][0]["from"])
    assert head_of(kb) == before and _flat(kb) == flat and not (kb / FANOUT).exists()


def test_the_fan_out_is_one_commit_of_renames_and_every_entry_is_found_in_its_new_place(
    memory, gateway
):
    kb, before = memory.kb_dir, head_of(memory.kb_dir)
    flat = _flat(kb)
    reply = gateway.fan_out(confirm=True)
    assert reply["status"] == "fanned_out" and reply["moved"] == len(flat)
    assert reply["reindexed"] == 0  # moved, not changed: no entry chunked again
    assert reply["commit"] == head_of(kb) and git(kb, "rev-parse", "HEAD~1").strip() == before
    changes = git(kb, "diff", "--name-status", "-M100%", before, "HEAD").splitlines()
    renames = sorted(line.split("\t")[1:] for line in changes if line.startswith("R100"))
    assert renames == sorted([name, _fanned(name)] for name in flat)
    assert [line for line in changes if not line.startswith("R100")] == [f"A\t{FANOUT}"]
    assert all((kb / _fanned(n)).read_bytes() == data for n, data in flat.items())
    assert git(kb, "status", "--porcelain") == ""
    some = next(iter(flat))
    got = reads.get(memory, Path(some).stem)
    assert got["path"] == str(kb / _fanned(some))
    assert all(memory.index.doc(Path(n).stem).path == str(kb / _fanned(n)) for n in flat)
    assert reads.search(memory, got["title"], limit=3)["hits"][0]["id"] == got["id"]
    added = gateway.add("The release train leaves on Thursdays", "Cut the branch on Wednesday.")
    assert Path(added["path"]) == kb / "note" / shard(added["id"]) / f"{added['id']}.md"
    assert git(kb, "show", "--name-only", "--format=", "HEAD").split() == [
        f"note/{shard(added['id'])}/{added['id']}.md"
    ]
    assert reads.get(memory, added["id"])["body"] == "Cut the branch on Wednesday."
    assert gateway.fan_out(confirm=True)["status"] == "unchanged"
    memory.close()  # a new process opens the index: the saved read model has the new places
    reopened = make_memory(memory.home, memory.embedder)
    assert all(reopened.index.doc(Path(n).stem).path == str(kb / _fanned(n)) for n in flat)
    reopened.close()


def test_with_gits_split_index_the_moves_go_into_a_new_shared_index(memory, gateway):
    kb = memory.kb_dir  # (a KB past ~90,000 files gets git's split index: ADR 0025)
    for name in _flat(kb):  # written long before the index: git keeps a file of the index's
        os.utime(kb / name, (1_700_000_000, 1_700_000_000))  # second out of a shared index
    git(kb, "config", "core.splitIndex", "true")
    git(kb, "update-index", "-q", "--refresh")
    git(kb, "update-index", "--split-index")
    moved = gateway.fan_out(confirm=True)["moved"]
    head = (kb / ".git" / "index").read_bytes()[:12]  # "DIRC", version, entries held here
    assert head[:4] == b"DIRC" and int.from_bytes(head[8:12], "big") <= 2 < moved  # (racy ones)
    assert len(git(kb, "ls-files", "--", "*/*/*.md").split()) == moved  # in the shared one


def test_uncommitted_changes_refuse_the_fan_out_and_nothing_moves(memory, gateway):
    kb, before = memory.kb_dir, head_of(memory.kb_dir)
    name = next(iter(_flat(kb)))
    (kb / name).write_text((kb / name).read_text() + "\nA person's edit.\n")
    flat = _flat(kb)
    with pytest.raises(Conflict) as err:
        gateway.fan_out(confirm=True)
    assert name in err.value.message and "commit or stash" in err.value.fix
    assert head_of(kb) == before and _flat(kb) == flat and not (kb / FANOUT).exists()


def test_a_fan_out_cut_short_is_finished_by_running_it_again(memory, gateway):
    kb, before = memory.kb_dir, head_of(memory.kb_dir)
    flat = _flat(kb)
    for name in list(flat)[::2]:  # what a killed daemon leaves: some files moved, no commit
        (kb / _fanned(name)).parent.mkdir(exist_ok=True)
        os.replace(kb / name, kb / _fanned(name))
    memory.refresh(force=True)  # both places are read meanwhile: every entry is still found
    assert all(reads.get(memory, Path(n).stem)["id"] for n in flat)
    reply = gateway.fan_out(confirm=True)
    assert reply["moved"] == len(flat) and git(kb, "rev-parse", "HEAD~1").strip() == before
    assert git(kb, "status", "--porcelain") == ""
    assert all((kb / _fanned(n)).read_bytes() == data for n, data in flat.items())


def test_the_cli_previews_then_moves_through_the_daemon(home):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "memory_agent", "--home", str(home), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    preview = cli("kb", "fanout")
    assert preview.returncode == 0, preview.stderr
    assert "nothing moved: add --confirm" in preview.stdout
    assert not (home / "kb" / FANOUT).exists()
    done = cli("kb", "fanout", "--confirm", "--json")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["status"] == "fanned_out" and reply["moved"] == reply["moves"] > 5
    assert (home / "kb" / FANOUT).is_file()
    added = cli("add", "--title", "A fanned-out note", "--body", "In its subfolder.", "--json")
    assert added.returncode == 0, added.stderr
    entry_id = json.loads(added.stdout)["id"]
    assert (home / "kb" / "note" / shard(entry_id) / f"{entry_id}.md").is_file()


def test_doctor_names_the_fan_out_for_a_large_flat_folder_and_not_after_it(
    memory, gateway, monkeypatch
):
    from memory_agent.serve import doctor

    monkeypatch.setattr(doctor, "FANOUT_ABOVE", 5)  # the demo KB's largest folder is past it
    (line,) = [c for c in doctor.diagnose(memory.home, start=False) if c["check"].startswith("la")]
    assert line["check"] == "layout personal" and not line["ok"]
    assert "memory-agent kb fanout`" in line["fix"] and "entries in one folder" in line["message"]
    gateway.fan_out(confirm=True)
    (line,) = [c for c in doctor.diagnose(memory.home, start=False) if c["check"].startswith("la")]
    assert line["ok"] and line["message"].startswith("fanned out")


def test_a_fan_out_whose_commit_failed_is_finished_by_running_it_again(
    memory, gateway, monkeypatch
):
    from memory_agent.errors import GitError
    from memory_agent.kb.gitrepo import KBRepo

    kb, before = memory.kb_dir, head_of(memory.kb_dir)
    flat = _flat(kb)
    real = KBRepo.commit_staged

    def moved_head(self, message, parent):  # HEAD moved during the moves (or a kill here)
        monkeypatch.setattr(KBRepo, "commit_staged", real)
        raise GitError("HEAD moved", "retry")

    monkeypatch.setattr(KBRepo, "commit_staged", moved_head)
    with pytest.raises(GitError):
        gateway.fan_out(confirm=True)
    assert head_of(kb) == before and git(kb, "diff", "--cached", "--name-only")  # staged only
    reply = gateway.fan_out(confirm=True)  # before: "unchanged", and the moves never committed
    assert reply["status"] == "fanned_out" and reply["moved"] == len(flat)
    assert (
        git(kb, "rev-parse", "HEAD~1").strip() == before and git(kb, "status", "--porcelain") == ""
    )
    assert all((kb / _fanned(n)).read_bytes() == data for n, data in flat.items())


def test_a_subfolder_that_is_a_link_refuses_the_fan_out_before_anything_moves(
    memory, gateway, tmp_path
):
    kb, before = memory.kb_dir, head_of(memory.kb_dir)
    flat = _flat(kb)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = (kb / _fanned(next(iter(flat)))).parent
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(Invalid) as err:
        gateway.fan_out(confirm=True)
    assert str(link) in err.value.message and "symbolic link" in err.value.message
    assert head_of(kb) == before and _flat(kb) == flat and not any(outside.iterdir())


def test_the_memory_browser_shows_a_fanned_out_entrys_history(memory, gateway):
    from memory_agent.ui.data import UIData

    gateway.fan_out(confirm=True)
    added = gateway.add("The release train leaves on Thursdays", "Cut the branch on Wednesday.")
    commits = UIData(memory.home).file_history(added["path"])  # before: "not a file of a KB"
    assert [c["commit"] for c in commits] == [added["commit"]]
    assert "Cut the branch on Wednesday." in commits[0]["diff"]
