"""Nothing relevant, nothing injected: the prompt hook injects only hits whose absolute similarity
reaches the embedder's floor (relevance is relative: the best hit of any prompt scored about 1);
an exact lexical match still counts; `min_score` on search; "more in other projects" when the
project's scope hides what another project knows; LoCoMo's questions asked of a coding memory
inject nothing. The real hook command against a real daemon, the real CLI. (Issue 31, item 3.)

(`make_home` and `memory` are the memory_agent conftest's.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.recall.injection import ELSEWHERE, recall
from tests.memory_agent.hook_turns import context_of, hook
from tests.memory_agent.mcp_helpers import env_for
from tests.memory_agent.project_repos import _repo

SHARED_LOCOMO = Path(__file__).resolve().parents[4] / "shared" / "bench" / "locomo"
UNRELATED = [
    ("Deploy window", "Deploys happen on Tuesdays after the standup; run `make deploy` from main."),
    ("Code review", "Every change gets one review; run the linters before you ask for it."),
    ("Log fields", "Every log line carries request_id and tenant; run queries in Loki."),
]
MIGRATIONS = "how do I run the database migrations here?"


def cli(home, cache, *args, cwd=None, json_out=True):
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(home)]
        + (["--json"] if json_out else []),
        capture_output=True,
        text=True,
        env=env_for(home, cache),
        cwd=cwd,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if json_out else proc.stdout


def prompt(home, cache, text, cwd="/home/u/src/kestrel"):
    payload = {"session_id": "s1", "cwd": str(cwd), "hook_event_name": "UserPromptSubmit"}
    return context_of(hook(home, cache, "prompt", {**payload, "prompt": text}))


def test_a_prompt_the_memory_knows_nothing_about_injects_nothing(make_home, shared_cache):
    home = make_home(demo=False)
    for title, body in UNRELATED:
        cli(home, shared_cache, "add", "--title", title, "--body", body, "--scope", "global")
    # before: all three, relevance 0.39-0.40 relative to a best hit of about 1 ("run" matched)
    assert prompt(home, shared_cache, MIGRATIONS) == ""
    found = cli(home, shared_cache, "search", MIGRATIONS)
    assert found["hits"] and all(h["similarity"] < 0.25 for h in found["hits"])
    assert cli(home, shared_cache, "search", MIGRATIONS, "--min-score", "0.25")["hits"] == []
    said = cli(home, shared_cache, "search", MIGRATIONS, "--min-score", "0.25", json_out=False)
    assert "no matches at or above --min-score" in said
    # what it does know is still injected
    assert "[deploy-window]" in prompt(home, shared_cache, "which day of the week do we deploy?")


def test_an_exact_match_the_embedder_does_not_see_as_close_is_still_injected(
    make_home, shared_cache
):
    home = make_home()  # the demo KB
    got = prompt(home, shared_cache, "except Exception: pass is that acceptable")
    assert "[make-failures-loud]" in got  # cosine 0.14, but it holds the prompt's words


def test_another_projects_entries_are_pointed_to_never_injected(make_home, shared_cache, tmp_path):
    home = make_home(demo=False)
    alpha = _repo(tmp_path / "alpha", "git@example.com:acme/alpha.git")
    beta = _repo(tmp_path / "beta", "git@example.com:acme/beta.git")
    cli(
        home,
        shared_cache,
        "add",
        "--title",
        "Database migrations run with alembic",
        "--body",
        "Run `alembic upgrade head` from the api folder; autogenerate misses enum changes.",
        cwd=alpha,
    )
    cli(
        home, shared_cache, "add", "--title", "Beta's linter", "--body", "Beta uses ruff.", cwd=beta
    )
    got = prompt(home, shared_cache, MIGRATIONS, cwd=beta)
    assert got == ELSEWHERE.format(projects="alpha")  # a pointer, no text of alpha's
    assert "alembic" not in got
    found = cli(home, shared_cache, "search", MIGRATIONS, cwd=beta)
    assert found["elsewhere"] == ["alpha"]
    said = cli(home, shared_cache, "search", MIGRATIONS, cwd=beta, json_out=False)
    assert "more in other projects: alpha" in said
    assert "[database-migrations-run-with-alembic]" in prompt(home, shared_cache, MIGRATIONS, alpha)
    assert "elsewhere" not in cli(home, shared_cache, "search", MIGRATIONS, cwd=alpha)


def test_a_clone_in_a_generic_folder_opens_with_its_projects_memory(
    make_home, shared_cache, tmp_path
):
    """The session's opening note searches by the project's name: a clone of kestrel in a
    folder called `project` searched "project project conventions..." and, under the floor,
    opened with nothing although the memory is all about kestrel."""
    home = make_home()  # the demo KB: kestrel's memory
    clone = _repo(tmp_path / "project", "git@example.com:e2e/kestrel.git")
    payload = {"session_id": "s1", "cwd": str(clone), "source": "startup"}
    opening = context_of(hook(home, shared_cache, "session-start", payload))
    assert "(project: kestrel)" in opening and "- [" in opening


@pytest.mark.skipif(
    not SHARED_LOCOMO.is_dir(), reason=f"no {SHARED_LOCOMO}: the shared benchmarks are absent"
)
def test_locomo_questions_asked_of_a_coding_memory_inject_nothing(memory):
    """The experiment's negatives in small (experiments/injection-floor): chat questions about
    people asked of the demo KB. Before the floor every one of them injected its six best."""
    questions = [
        json.loads(line)["query"]
        for line in (SHARED_LOCOMO / "queries.jsonl").read_text().splitlines()[:60]
    ]
    injected = [recall(memory, q, None, limit=6, budget=3000) for q in questions]
    assert sum(1 for r in injected if r.ids) <= 3, [r.ids for r in injected if r.ids]
