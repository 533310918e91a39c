"""`memory-agent import` brings in what people already wrote - CLAUDE.md, AGENTS.md, a vault of
notes, Claude Code's memory folder. The reading of files on its own; then the real daemon (MiniLM)
and the real CLI as subprocesses, real git: a preview, one commit without the secrets, a second
import writing nothing and an edited section superseding its entry, duplicates left out, the scope
of the working directory, a daemon killed mid-import. (Issue 20.)"""

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.write.imports import Section, infer_type, read_sources, split_document
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import daemon_pids, env_for, serve_home

CLOCK = "2026-11-30T09:00:00Z"
AWS_KEY = "AKIAZ7QW4RTY2UIO3PLK"
GH_TOKEN = "ghp_" + "x7Kq2Lm9Np4Rs6Tv8Wy0Zb3Cd5Ef1Gh7Jk2M"

CLAUDE_MD = f"""# CLAUDE.md

Guidance for agents working in the billing service.

## Build and test

Run `make test` before every push; the integration suite needs `docker compose up db`.
CI deploys with the key {AWS_KEY} (rotate it yearly).

## Pitfalls

- The ledger fixtures go stale after a migration: run `make fixtures` again.
- Never call `Invoice.save()` inside a loop; it commits each time.

## Empty section

## Conventions

Money is stored as integer cents, never floats. Use the token {GH_TOKEN} only in CI.

```bash
## this is a shell comment, not a section
make lint
```
"""


# -- reading files, no daemon ----------------------------------------------------------------
def test_a_document_splits_at_second_level_headings_outside_code():
    parts = split_document(CLAUDE_MD, "CLAUDE", "~/src/billing/CLAUDE.md")
    sections = [p for p in parts if isinstance(p, Section)]
    assert [s.title for s in sections] == ["CLAUDE.md", "Build and test", "Pitfalls", "Conventions"]
    assert [s.type for s in sections] == ["note", "note", "pitfall", "guideline"]
    assert sections[0].body == "Guidance for agents working in the billing service."
    assert "## this is a shell comment" in sections[3].body  # a fence is not split
    assert sections[2].origin == "import:~/src/billing/CLAUDE.md#Pitfalls"
    assert sections[0].origin == "import:~/src/billing/CLAUDE.md"  # the text before ##
    assert {"heading": "Empty section", "reason": "empty section"} in parts
    twice = split_document("## Notes\na\n## Notes\nb\n", "x", "x.md")
    assert [s.origin for s in twice] == ["import:x.md#Notes", "import:x.md#Notes (2)"]
    whole = split_document("Just one paragraph.\n", "loose-thought", "n/loose-thought.md")
    assert [(s.title, s.origin) for s in whole] == [("loose-thought", "import:n/loose-thought.md")]


def test_types_are_inferred_from_headings_only_and_conservatively():
    assert infer_type("Known issues") == "pitfall"
    assert infer_type("Rules of thumb") == "guideline"
    assert infer_type("Architecture decisions") == "decision"
    assert infer_type("User preferences") == "preference"
    assert infer_type("Release process") == "process"
    assert infer_type("Ruler settings") == "note"  # whole words only
    assert infer_type("Setup", "Team conventions") == "guideline"  # else the document's title
    body_says = split_document("## Setup\nThis is a pitfall and a decision.\n", "x", "x.md")
    assert body_says[0].type == "note"  # the body never decides


def test_claude_codes_memory_folder_skips_its_index_and_reads_the_declared_type(tmp_path):
    memory = tmp_path / ".claude" / "projects" / "-home-me-billing" / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("- [Testing](feedback_testing.md) - no mocks\n")
    (memory / "feedback_testing.md").write_text(
        "---\nname: Integration tests hit a real database\ndescription: no mocks\n"
        "type: feedback\n---\nDo not mock the database in integration tests.\n"
    )
    sections, skipped = read_sources([str(memory)])
    assert [(s.title, s.type) for s in sections] == [
        ("Integration tests hit a real database", "guideline")
    ]
    assert "description: no mocks" in sections[0].body  # other frontmatter is kept
    assert [s["file"] for s in skipped] == [str(memory / "MEMORY.md")]


# -- through the daemon ------------------------------------------------------------------------
def _repo(path, remote=None):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if remote:
        git(path, "remote", "add", "origin", remote)
    return path


def _commit(repo, message="files"):
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


@pytest.fixture
def world(tmp_path, shared_cache, monkeypatch):
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    serve_home(home, shared_cache, monkeypatch, CLOCK)
    yield {
        "home": home,
        "kb": home / "kb",
        "outside": outside,
        "cache": shared_cache,
        "tmp": tmp_path,
    }
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def cli(w, cwd, *args, check=True, **env):
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(w["home"]), "--json"],
        capture_output=True,
        text=True,
        env=env_for(w["home"], w["cache"], MEMORY_AGENT_CLOCK=CLOCK, **env),
        cwd=cwd,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr or proc.stdout)
    return json.loads(proc.stdout)


def head(kb):
    return git(kb, "rev-parse", "HEAD").strip()


def committed_files(kb, rev="HEAD"):
    return sorted(git(kb, "show", "--name-only", "--format=", rev).split())


def front(path):
    return yaml.safe_load(path.read_text().split("---\n")[1])


def test_a_claude_md_is_previewed_then_written_in_one_commit_without_its_secrets(world):
    w = world
    docs = w["tmp"] / "billing"
    docs.mkdir()
    (docs / "CLAUDE.md").write_text(CLAUDE_MD)
    before = head(w["kb"])

    preview = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"))
    assert preview["status"] == "preview"
    assert preview["counts"] == {
        "new": 4,
        "supersede": 0,
        "unchanged": 0,
        "duplicate": 0,
        "skipped": 0,
    }
    assert preview["empty_sections"] == 1
    assert [(e["action"], e["title"], e["type"]) for e in preview["entries"]] == [
        ("new", "CLAUDE.md", "note"),
        ("new", "Build and test", "note"),
        ("new", "Pitfalls", "pitfall"),
        ("new", "Conventions", "guideline"),
    ]
    assert head(w["kb"]) == before  # nothing written
    assert not list(w["kb"].glob("*/pitfalls*.md"))

    done = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"), "--confirm")
    assert done["status"] == "imported" and done["scope"] == "global"
    assert git(w["kb"], "rev-parse", "HEAD~1").strip() == before  # exactly one commit
    message = git(w["kb"], "log", "-1", "--format=%B")
    assert message.startswith(f"memory: import {docs / 'CLAUDE.md'}: 4 new")
    paths = {e["id"]: w["kb"] / e["type"] / f"{e['id']}.md" for e in done["entries"]}
    assert committed_files(w["kb"]) == sorted(str(p.relative_to(w["kb"])) for p in paths.values())
    pitfalls = front(paths[done["ids"][2]])
    assert pitfalls["type"] == "pitfall"
    assert pitfalls["source"] == f"import:{docs / 'CLAUDE.md'}#Pitfalls"
    build = paths[done["ids"][1]].read_text()
    assert "[REDACTED:" in build and "docker compose up db" in build
    # no secret reached the disk: not the entries, the commit, the intent log or the index
    for root, _, files in os.walk(w["home"]):
        for name in files:
            path = os.path.join(root, name)
            if os.path.isfile(path):  # (git's objects are compressed: read through git below)
                data = open(path, "rb").read()
                assert AWS_KEY.encode() not in data and GH_TOKEN.encode() not in data, path
    history = git(w["kb"], "log", "-p", "--all", "--format=%B")
    assert "Money is stored as integer cents" in history
    assert AWS_KEY not in history and GH_TOKEN not in history
    found = cli(w, w["outside"], "search", "how is money stored, cents or floats")
    assert found["hits"][0]["id"] == done["ids"][3]


def test_importing_again_writes_nothing_and_an_edited_section_supersedes_its_entry(world):
    w = world
    docs = w["tmp"] / "billing"
    docs.mkdir()
    (docs / "CLAUDE.md").write_text(CLAUDE_MD)
    first = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"), "--confirm")
    after_first = head(w["kb"])

    again = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"), "--confirm")
    assert again["status"] == "unchanged" and again["commit"] is None
    assert again["counts"]["unchanged"] == 4 and again["counts"]["new"] == 0
    assert head(w["kb"]) == after_first

    edited = CLAUDE_MD.replace("integer cents, never floats", "integer cents (BIGINT)")
    (docs / "CLAUDE.md").write_text(edited)
    preview = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"))
    assert preview["counts"]["supersede"] == 1 and preview["counts"]["unchanged"] == 3
    assert head(w["kb"]) == after_first
    done = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"), "--confirm")
    old_id = first["ids"][3]
    assert done["superseded"] == [old_id] and len(done["ids"]) == 1
    assert git(w["kb"], "rev-parse", "HEAD~1").strip() == after_first  # one commit
    new_id = done["ids"][0]
    assert committed_files(w["kb"]) == sorted([f"guideline/{old_id}.md", f"guideline/{new_id}.md"])
    old = front(w["kb"] / "guideline" / f"{old_id}.md")
    new = front(w["kb"] / "guideline" / f"{new_id}.md")
    assert old["status"] == "superseded" and old["superseded_by"] == new_id
    assert new["supersedes"] == [old_id] and new["source"] == old["source"]
    assert "BIGINT" in (w["kb"] / "guideline" / f"{new_id}.md").read_text()
    # and the edited file, imported once more, is unchanged; an archived entry stays archived
    cli(w, w["outside"], "archive", first["ids"][2], "--reason", "fixed upstream", "--confirm")
    after_archive = head(w["kb"])
    last = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"), "--confirm")
    assert last["status"] == "unchanged" and last["counts"]["unchanged"] == 4
    assert head(w["kb"]) == after_archive


def test_a_vault_keeps_its_frontmatter_and_wikilinks(world):
    w = world
    vault = w["tmp"] / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "workspace.md").write_text("# Workspace\nnot a note\n")
    (vault / "projects").mkdir()
    (vault / "Deploy checklist.md").write_text(
        "---\ntags: [ops, '#release', nested/tag]\naliases: [ship it]\n---\n"
        "Tag the release, then run the deploy job. See [[Rollback plan]] and "
        "[[Release notes|notes]].\n"
    )
    (vault / "projects" / "Rollback plan.md").write_text(
        "# Rollback plan\n\n## Database\n\nRestore the nightly snapshot with `pg_restore`.\n\n"
        "## Traffic\n\nShift traffic back to the blue pool within five minutes.\n"
    )
    done = cli(w, w["outside"], "import", str(vault), "--confirm")
    assert done["counts"]["new"] == 3
    titles = {e["title"]: e for e in done["entries"]}
    assert set(titles) == {"Deploy checklist", "Database", "Traffic"}  # .obsidian not read
    deploy = w["kb"] / "note" / f"{titles['Deploy checklist']['id']}.md"
    text = deploy.read_text()
    assert "[[Rollback plan]]" in text and "[[Release notes|notes]]" in text
    assert front(deploy)["tags"] == ["ops", "release", "nested-tag"]
    assert "aliases:\n- ship it" in text  # the rest of the frontmatter, kept in the body
    assert front(deploy)["source"] == f"import:{vault / 'Deploy checklist.md'}"
    assert front(w["kb"] / "note" / f"{titles['Traffic']['id']}.md")["source"] == (
        f"import:{vault / 'projects' / 'Rollback plan.md'}#Traffic"
    )
    message = git(w["kb"], "log", "-1", "--format=%s").strip()
    assert message == f"memory: import {vault}: 3 new, 0 superseded"


def test_duplicates_within_the_import_and_of_the_kb_are_left_out(world):
    w = world
    known = cli(
        w,
        w["outside"],
        "add",
        "--title",
        "Pitfalls",
        "--type",
        "pitfall",
        "--body",
        "- Restarting the worker drops queued jobs; drain it first.",
    )
    docs = w["tmp"] / "repo"
    docs.mkdir()
    shared = "## Style\n\nFormat with black and sort imports with isort.\n"
    (docs / "CLAUDE.md").write_text(
        shared + "\n## Tests\n\nRun the whole suite with make check before a release.\n"
        "\n## Pitfalls\n\n- Restarting the worker drops queued jobs; drain it first.\n"
    )
    (docs / "AGENTS.md").write_text(
        shared + "\n## Testing\n\nRun the whole suite with make check before a release!\n"
    )
    done = cli(
        w, w["outside"], "import", str(docs / "AGENTS.md"), str(docs / "CLAUDE.md"), "--confirm"
    )
    by_origin = {e["origin"].rpartition("/")[2]: e for e in done["entries"]}
    assert done["counts"]["new"] == 2 and done["counts"]["duplicate"] == 3
    style = by_origin["AGENTS.md#Style"]
    assert style["action"] == "new"
    assert by_origin["CLAUDE.md#Style"] == {
        **by_origin["CLAUDE.md#Style"],
        "action": "duplicate",
        "duplicate_of": style["id"],
        "match": "exact",
        "within": "this import",
    }
    near = by_origin["CLAUDE.md#Tests"]
    assert near["action"] == "duplicate" and near["match"] == "near"
    assert near["duplicate_of"] == by_origin["AGENTS.md#Testing"]["id"]
    kb_dup = by_origin["CLAUDE.md#Pitfalls"]
    assert kb_dup["action"] == "duplicate" and kb_dup["duplicate_of"] == known["id"]
    assert "within" not in kb_dup
    assert len(committed_files(w["kb"])) == 2


def test_the_scope_is_the_working_directorys_project_unless_named(world):
    w = world
    alpha = _repo(w["tmp"] / "src" / "alpha", "git@github.com:acme/alpha.git")
    (alpha / "CLAUDE.md").write_text("## Build\n\nAlpha builds with bazel 7: bazel build //...\n")
    (alpha / "notes.md").write_text("## Editor\n\nThe user prefers tabs of width 4 everywhere.\n")
    _commit(alpha)
    git(alpha, "worktree", "add", "-q", str(w["tmp"] / "src" / "alpha-wt"))

    done = cli(w, alpha, "import", "CLAUDE.md", "--confirm")
    assert done["scope"] == "alpha" and done["entries"][0]["scope"] == "alpha"
    entry = w["kb"] / "note" / f"{done['ids'][0]}.md"
    assert front(entry)["scope"] == "alpha"
    assert front(entry)["source"] == "import:github.com/acme/alpha/CLAUDE.md#Build"
    assert committed_files(w["kb"]) == sorted(["projects.yaml", f"note/{done['ids'][0]}.md"])
    # the same file in another worktree of the repository is the same origin: unchanged
    again = cli(w, w["tmp"] / "src" / "alpha-wt", "import", "CLAUDE.md")
    assert again["counts"]["unchanged"] == 1 and again["counts"]["new"] == 0

    named = cli(w, alpha, "import", "notes.md", "--scope", "global", "--confirm")
    assert named["scope"] == "global"
    assert "scope" not in front(w["kb"] / "note" / f"{named['ids'][0]}.md")
    outside = cli(w, w["outside"], "search", "how does alpha build with bazel")
    assert done["ids"][0] not in [h["id"] for h in outside["hits"]]
    inside = cli(w, alpha, "search", "how does alpha build with bazel")
    assert inside["hits"][0]["id"] == done["ids"][0]


def test_a_daemon_killed_mid_import_is_finished_in_one_commit_by_the_next_daemon(world):
    w = world
    docs = w["tmp"] / "billing"
    docs.mkdir()
    (docs / "CLAUDE.md").write_text(CLAUDE_MD)
    before = head(w["kb"])
    DaemonClient(w["home"]).stop(wait=True)  # the next one starts with the fault set
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_agent",
            "import",
            str(docs / "CLAUDE.md"),
            "--confirm",
            "--home",
            str(w["home"]),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=w["outside"],
        timeout=300,
        env=env_for(
            w["home"], w["cache"], MEMORY_AGENT_CLOCK=CLOCK, MEMORY_AGENT_FAULT="after-write"
        ),
    )
    assert proc.returncode == 2 and "stopped answering" in proc.stdout
    assert head(w["kb"]) == before  # written, not committed
    assert len(list((w["home"] / "run" / "pending").glob("*.json"))) == 1
    # a new daemon finishes the import (at start, or before the next write) as one commit
    again = cli(w, w["outside"], "import", str(docs / "CLAUDE.md"), "--confirm")
    assert again["status"] == "unchanged" and again["counts"]["unchanged"] == 4
    assert not list((w["home"] / "run" / "pending").glob("*.json"))
    assert git(w["kb"], "rev-parse", "HEAD~1").strip() == before  # one commit, all four
    assert len(committed_files(w["kb"])) == 4
    message = git(w["kb"], "log", "-1", "--format=%B").strip()
    assert message.split("\n\nMemory-Agent-Machine:")[0].endswith("(recovered)")


# -- a front matter that expands by aliases (issue 32, item 4) ---------------------------------
# Before: the preview ran with its memory growing until killed (the 0.4 KB file's nine levels of
# nine aliases were expanded while its front matter was copied); here the CLI gets 1.5 GB and
# 120 s, and failed on either. Now the file is skipped, naming the alias, with the others read.
def test_an_alias_bomb_in_an_imported_file_is_skipped_not_expanded(world):
    import resource

    w = world
    notes = w["tmp"] / "vault"
    notes.mkdir()
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    (notes / "bomb.md").write_text("---\ntitle: bomb\n" + "\n".join(levels) + "\n---\nx\n")
    (notes / "fine.md").write_text("---\ntags: [ops]\n---\n# Fine\n\nA note that reads well.\n")

    def bounded():  # (in the CLI's process, before it starts)
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", "import", str(notes)]
        + ["--home", str(w["home"]), "--json"],
        capture_output=True,
        text=True,
        env=env_for(w["home"], w["cache"], MEMORY_AGENT_CLOCK=CLOCK),
        cwd=w["outside"],
        timeout=120,
        preexec_fn=bounded,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    reply = json.loads(proc.stdout)
    [skipped] = reply["files_skipped"]
    assert skipped["file"] == str(notes / "bomb.md")
    assert "alias *a (line 4)" in skipped["reason"] and "write the value out" in skipped["reason"]
    assert [e["title"] for e in reply["entries"]] == ["Fine"]


def test_imported_ids_say_which_project_and_file_they_came_from(world):
    """Three projects' CLAUDE.md and AGENTS.md each with a `## Pitfalls` section were imported as
    `pitfalls`, `pitfalls-2` and `pitfalls-3`: nothing said which was which. (Issue 31.)"""
    w = world
    ids = []
    for name, file, text in (
        ("alpha", "CLAUDE.md", "## Pitfalls\n\nAlpha's tests need the fake S3 running first.\n"),
        ("beta", "CLAUDE.md", "## Pitfalls\n\nBeta's build breaks on Node 22; pin Node 20.\n"),
        ("beta", "AGENTS.md", "## Pitfalls\n\nBeta's seed script wipes the local database.\n"),
    ):
        repo = w["tmp"] / "src" / name
        if not repo.exists():
            _repo(repo, f"git@github.com:acme/{name}.git")
        (repo / file).write_text(text)
        _commit(repo)
        ids += cli(w, repo, "import", file, "--confirm")["ids"]
    assert ids == ["alpha-claude-md-pitfalls", "beta-claude-md-pitfalls", "beta-agents-md-pitfalls"]
    assert front(w["kb"] / "pitfall" / f"{ids[0]}.md")["title"] == "Pitfalls"  # the heading
    outside = w["tmp"] / "notes.md"
    outside.write_text("# Notes\n\nKeep the notes short.\n")
    assert cli(w, w["outside"], "import", str(outside), "--confirm")["ids"] == ["notes-md"]


def test_an_aws_credentials_csv_and_a_key_pair_are_imported_without_their_secrets(world):
    """Issue 32: import redacted the key ids and wrote the 40-character secret beside each
    (the console's credentials CSV, a key id and its secret on one line) into an entry, and
    committed it."""
    from tests.memory_agent.intake.test_key_pairs import CONSOLE_CSV, KEY_ID, PASSWORD, SECRET

    w = world
    docs = w["tmp"] / "ops"
    docs.mkdir()
    (docs / "NOTES.md").write_text(
        f"# Ops notes\n\n## AWS user\n\n{CONSOLE_CSV}\n## Deploy\n\nThe deploy job runs with "
        f"{KEY_ID} {SECRET} until the rotation.\n"
    )
    done = cli(w, w["outside"], "import", str(docs / "NOTES.md"), "--confirm")
    assert done["status"] == "imported" and done["counts"]["new"] == 2
    history = git(w["kb"], "log", "-p", "--all", "--format=%B")
    assert "until the rotation" in history and "ci-deploy" in history
    for root, _, files in os.walk(w["home"]):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.isfile(path):  # the daemon's socket
                continue
            data = open(path, "rb").read()
            for value in (SECRET, PASSWORD, KEY_ID):
                assert value.encode() not in data, (name, value)
    for value in (SECRET, PASSWORD, KEY_ID):
        assert value not in history


def test_the_preview_lists_every_change_first_and_counts_the_unchanged(world):
    """Issue 34: the preview listed its first 10 rows (`--json` too), so an edited section at
    row 13 sat behind "... and 4 more" while 10 unchanged rows were shown (here: On-call)."""
    w = world
    notes = w["tmp"] / "handbook.md"
    facts = {
        "Releases": "We release on Tuesdays; never on a Friday.",
        "Branches": "Feature branches are named after their ticket, like KES-123.",
        "Reviews": "Every pull request needs one approval from the owning team.",
        "Database": "Postgres 16 runs in docker compose for local development.",
        "Secrets": "Credentials live in the vault; nothing sensitive goes in .env files.",
        "Logging": "Log lines are JSON with a request id and the tenant.",
        "Testing": "pytest with the xdist plugin; integration tests need the fake S3.",
        "Frontend": "The web client is built with Vite and served by nginx.",
        "Queues": "Background jobs run on arq workers reading Redis.",
        "Metrics": "Prometheus scrapes /metrics on port 8000 every fifteen seconds.",
        "Search": "Search indexes are rebuilt into a new collection, then the alias moves.",
        "Holidays": "Nobody deploys the day before a public holiday.",
        "On-call": "The on-call rota is kept in the team wiki.",
        "Docs": "Architecture decisions are written as ADRs in docs/adr.",
    }
    topics = list(facts)

    def write():
        notes.write_text("".join(f"## {t}\n\n{facts[t]}\n\n" for t in topics))

    write()
    assert cli(w, w["outside"], "import", str(notes), "--confirm")["counts"]["new"] == 14
    facts["On-call"] = "The on-call rota moved to the paging tool's calendar in March."
    write()

    preview = cli(w, w["outside"], "import", str(notes))
    assert preview["counts"]["supersede"] == 1 and preview["counts"]["unchanged"] == 13
    rows = preview["entries"]
    assert len(rows) == 14  # every row, the change first
    assert (rows[0]["action"], rows[0]["title"]) == ("supersede", "On-call")

    def printed(*extra):  # the preview as a person reads it
        return subprocess.run(
            [sys.executable, "-m", "memory_agent", "import", str(notes), *extra]
            + ["--home", str(w["home"])],
            capture_output=True,
            text=True,
            env=env_for(w["home"], w["cache"], MEMORY_AGENT_CLOCK=CLOCK),
            cwd=w["outside"],
            timeout=300,
        ).stdout

    said = printed()
    assert "supersede" in said and "On-call" in said
    assert "13 unchanged, not listed (--unchanged lists them)" in said
    assert "Docs" not in said  # an unchanged row, counted
    listed = printed("--unchanged")
    assert all(t in listed for t in topics)
