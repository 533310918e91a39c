"""Git's loose objects in the KB are packed as they pile up (`memory_agent.kb.upkeep`): the
writes' plumbing commits never run `git gc --auto`, and at 100,000 entries each add left a
4.3 MB tree loose. Real writes through the gateway, real git; the budget and the number of
writes between two looks are lowered so that a few writes reach them."""

import subprocess

import pytest

from memory_agent.kb import upkeep
from tests.memory_agent.helpers import git


def git_in(kb, *args: str, data: str) -> str:
    """`git args` with `data` on its standard input; its output, stripped."""
    return subprocess.run(
        ["git", "-C", str(kb), *args], input=data, capture_output=True, text=True, check=True
    ).stdout.strip()


def counts(kb) -> dict[str, int]:
    pairs = (line.split(":", 1) for line in git(kb, "count-objects", "-v").splitlines())
    return {key: int(value) for key, value in pairs}


FACTS = (
    ("Kiwi deploys on Tuesdays", "The kiwi service is deployed every Tuesday at 10:00 UTC."),
    ("Papaya uses Postgres 16", "The papaya backend stores its orders in Postgres 16."),
    ("Lychee listens on 7443", "The lychee gateway accepts TLS connections on port 7443."),
    ("Quince logs go to Loki", "Quince ships its structured logs to the team's Loki cluster."),
)


def add(gateway, facts) -> None:
    for title, body in facts:
        assert gateway.add(title, body)["status"] == "created"


@pytest.fixture
def every_write(monkeypatch):
    monkeypatch.setattr(upkeep, "CHECK_EVERY", 1)


def test_loose_objects_past_the_budget_are_packed_and_nothing_is_lost(
    memory, gateway, every_write, monkeypatch
):
    monkeypatch.setattr(upkeep, "LOOSE_BUDGET_MB", 0.0)
    kb = memory.kb_dir
    add(gateway, FACTS[:3])
    gateway.writes.loose.wait(120)
    after = counts(kb)
    assert after["count"] == 0 and after["packs"] >= 1  # every object is in a pack now
    git(kb, "fsck", "--no-progress")  # (raises on a missing or broken object)
    assert len(git(kb, "log", "--format=%H").split()) >= 4  # the history, whole
    assert "port 7443" in git(kb, "show", "HEAD:note/lychee-listens-on-7443.md")
    assert git(kb, "status", "--porcelain") == ""


def test_under_the_budget_nothing_is_packed(memory, gateway, every_write):
    kb = memory.kb_dir
    before = counts(kb)
    add(gateway, FACTS[:2])
    gateway.writes.loose.wait(120)
    after = counts(kb)
    assert after["packs"] == before["packs"] and after["count"] > before["count"]


def test_packing_again_and_again_keeps_few_packs_and_every_unreachable_object(
    memory, gateway, every_write, monkeypatch
):
    """Geometric packing: each packing rolls small packs into larger ones (their number stays
    logarithmic, no history walked), and an object no commit reaches - loose, or in a pack of
    its own - is kept."""
    monkeypatch.setattr(upkeep, "LOOSE_BUDGET_MB", 0.0)
    kb = memory.kb_dir
    orphan = git_in(kb, "hash-object", "-w", "--stdin", data="an orphan blob\n")  # a person's
    git_in(kb, "pack-objects", "-q", ".git/objects/pack/pack", data=orphan)  # in a pack of its own
    loose_orphan = git_in(kb, "hash-object", "-w", "--stdin", data="another orphan blob\n")
    assert counts(kb)["packs"] == 1  # the orphan's (the new KB's objects are all loose)
    for fact in FACTS:  # a packing after every write
        add(gateway, [fact])
        gateway.writes.loose.wait(120)
    after = counts(kb)
    assert after["count"] == 0 and after["packs"] <= 3  # four packings, not five packs
    for kept in (orphan, loose_orphan):
        assert git(kb, "cat-file", "-t", kept).strip() == "blob"  # unreachable, and kept
    git(kb, "fsck", "--no-progress")
