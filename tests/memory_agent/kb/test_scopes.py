"""Memory that knows which project it is in: an entry added in one project is found there and not in
the other (the scope map, dedup within what a scope sees, a supersede keeping its scope), the
proxy's roots, episodes and lessons that stay in their project, the injection's budget, the
browser's scope filter, corpora global unless their scope says otherwise. Real git repositories with
their own remotes (bare repositories on disk), the real daemon (MiniLM), the real CLI, proxy and
hook command as subprocesses. (Issue 20.)"""

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml

from memory_agent import config
from memory_agent.capture.lessons import Lesson
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.kb.scopes import ScopeMap
from memory_agent.serve.mcp_config import hook_command
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import ProxySession, daemon_pids, env_for, serve_home
from tests.memory_agent.project_repos import _repo

CLOCK = "2026-11-30T09:00:00Z"


# -- a home with two projects -----------------------------------------------------------------
@pytest.fixture
def world(tmp_path, shared_cache, monkeypatch):
    """A home (daemon running) and two repositories with their own remotes, plus a worktree of
    the first and a folder outside any repository."""
    home = tmp_path / "home"
    Memory(config.load({"home": str(home)})).init(embedder="minilm", sync=False)
    remotes = tmp_path / "remotes"
    remotes.mkdir()
    for name in ("alpha", "beta"):
        git(remotes, "init", "-q", "--bare", f"{name}.git")
    alpha = _repo(tmp_path / "src" / "alpha", "git@github.com:acme/alpha.git")
    beta = _repo(tmp_path / "src" / "beta", str(remotes / "beta.git"))
    git(alpha, "worktree", "add", "-q", str(tmp_path / "src" / "alpha-wt"))
    outside = tmp_path / "outside"
    outside.mkdir()
    serve_home(home, shared_cache, monkeypatch, CLOCK)
    yield {
        "home": home,
        "alpha": alpha,
        "beta": beta,
        "alpha_wt": tmp_path / "src" / "alpha-wt",
        "outside": outside,
        "cache": shared_cache,
        "beta_id": str(remotes / "beta"),
    }
    DaemonClient(home).stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


def cli(w, cwd, *args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "memory_agent", *args, "--home", str(w["home"]), "--json"],
        capture_output=True,
        text=True,
        env=env_for(w["home"], w["cache"], MEMORY_AGENT_CLOCK=CLOCK),
        cwd=cwd,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr or proc.stdout)
    return proc.returncode, json.loads(proc.stdout)


def ids(reply):
    return [h["id"] for h in reply["hits"]]


def test_an_entry_added_in_one_project_is_found_there_and_not_in_the_other(world):
    w = world
    _, added = cli(
        w,
        w["alpha"],
        "add",
        "--title",
        "Alpha builds with bazel 7",
        "--body",
        "The alpha monorepo builds with bazel 7; run bazel build //...",
    )
    assert added["status"] == "created" and added["scope"] == "alpha"
    kb = w["home"] / "kb"
    text = (kb / "note" / f"{added['id']}.md").read_text()
    assert "scope: alpha\n" in text
    assert yaml.safe_load((kb / "projects.yaml").read_text()) == {"alpha": "github.com/acme/alpha"}
    shown = git(kb, "show", "--stat", "--format=", "HEAD")
    assert "projects.yaml" in shown and f"{added['id']}.md" in shown  # one commit, both files
    _, glob_ = cli(
        w,
        w["outside"],
        "add",
        "--title",
        "Prefer rg over grep",
        "--body",
        "The user prefers ripgrep (rg) over grep in every repository.",
    )
    assert glob_["scope"] == "global"

    query = "how does the alpha monorepo build with bazel"
    _, here = cli(w, w["alpha"], "search", query)
    assert added["id"] in ids(here)
    assert {h["scope"] for h in here["hits"] if h["id"] == added["id"]} == {"alpha"}
    _, worktree = cli(w, w["alpha_wt"], "search", query)  # a worktree shares the scope
    assert added["id"] in ids(worktree)
    _, there = cli(w, w["beta"], "search", query)
    assert added["id"] not in ids(there)
    _, outside = cli(w, w["outside"], "search", query)
    assert added["id"] not in ids(outside)
    _, everything = cli(w, w["beta"], "search", query, "--scope", "all")
    assert added["id"] in ids(everything)
    _, named = cli(w, w["beta"], "search", query, "--scope", "alpha")
    assert added["id"] in ids(named)
    _, only_global = cli(w, w["alpha"], "search", query, "--scope", "global")
    assert added["id"] not in ids(only_global)
    _, other = cli(w, w["outside"], "search", query, "--project", str(w["alpha"]))
    assert added["id"] in ids(other)
    # the global entry is found from every project
    for cwd in (w["alpha"], w["beta"], w["outside"]):
        _, found = cli(w, cwd, "search", "does the user prefer ripgrep or grep")
        assert glob_["id"] in ids(found), cwd
    code, refused = cli(w, w["beta"], "search", query, "--scope", "nosuch", check=False)
    assert code == 2 and refused["error"]["code"] == "invalid"
    assert "alpha" in refused["error"]["message"]  # names the projects there are

    # dedup stays within what the new entry's scope sees
    _, again = cli(
        w,
        w["beta"],
        "add",
        "--title",
        "Alpha builds with bazel 7",
        "--body",
        "The alpha monorepo builds with bazel 7; run bazel build //...",
    )
    assert again["status"] == "created" and again["scope"] == "beta"
    code, dup = cli(
        w,
        w["alpha_wt"],
        "add",
        "--title",
        "Alpha builds with bazel 7",
        "--body",
        "The alpha monorepo builds with bazel 7; run bazel build //...",
        check=False,
    )
    assert code == 2 and dup["status"] == "duplicate" and dup["duplicate_of"] == added["id"]
    assert ScopeMap.read(kb).names == {"alpha": "github.com/acme/alpha", "beta": w["beta_id"]}

    # a supersede keeps the old entry's scope unless told
    _, preview = cli(
        w,
        w["outside"],
        "supersede",
        added["id"],
        "--title",
        "Alpha builds with bazel 8",
        "--body",
        "Since May alpha builds with bazel 8.",
        "--confirm",
    )
    assert preview["status"] == "superseded" and preview["scope"] == "alpha"
    _, moved = cli(
        w,
        w["alpha"],
        "supersede",
        glob_["id"],
        "--title",
        "Prefer rg here",
        "--body",
        "In alpha the user prefers ripgrep.",
        "--scope",
        "project",
        "--confirm",
    )
    assert moved["scope"] == "alpha"


def test_the_project_command_prints_the_identity(world):
    w = world
    _, here = cli(w, w["alpha_wt"], "project")
    assert here["project"] == "github.com/acme/alpha" and here["local"] is False
    _, beta = cli(w, w["outside"], "project", str(w["beta"]))
    assert beta["project"] == w["beta_id"] and beta["local"] is True
    _, none = cli(w, w["outside"], "project")
    assert none["project"] is None


def test_the_proxy_takes_the_clients_roots_else_its_own_folder(world):
    w = world
    with_roots = ProxySession(w["home"], w["cache"], cwd=w["outside"], MEMORY_AGENT_CLOCK=CLOCK)
    try:
        with_roots.initialize(roots=[w["beta"]])
        reply = with_roots.call(
            "memory_add",
            title="Beta deploys on Fridays",
            body="The beta service is deployed every Friday at noon.",
        )
        assert reply["structuredContent"]["scope"] == "beta", reply
        assert with_roots.roots_asked == 1
    finally:
        with_roots.close()
    plain = ProxySession(w["home"], w["cache"], cwd=w["alpha"], MEMORY_AGENT_CLOCK=CLOCK)
    try:
        plain.initialize()
        found = plain.call("memory_search", query="when is the beta service deployed")
        assert "beta-deploys-on-fridays" not in ids(found["structuredContent"])
        found = plain.call("memory_search", query="when is beta deployed", scope="beta")
        assert "beta-deploys-on-fridays" in ids(found["structuredContent"])
        assert plain.roots_asked == 0
        # no roots: the folder the client started the proxy in is the session's project
        added = plain.call(
            "memory_add",
            title="Alpha lints with ruff",
            body="The alpha repository lints with ruff check.",
        )
        assert added["structuredContent"]["scope"] == "alpha", added
    finally:
        plain.close()
    assert all(line.startswith("{") for line in with_roots.lines + plain.lines)


# -- capture: episodes never cross projects ---------------------------------------------------
def hook(w, event, payload):
    proc = subprocess.run(
        hook_command(w["home"], event, "claude-code"),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env_for(w["home"], w["cache"], MEMORY_AGENT_CLOCK=CLOCK),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def turn(w, session, cwd, prompt, command, answer):
    base = {"session_id": session, "cwd": str(cwd), "transcript_path": "/nonexistent"}
    hook(w, "prompt", {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    hook(
        w,
        "tool",
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_response": {"stdout": "ok", "exit_code": 0},
        },
    )
    hook(w, "stop", {**base, "hook_event_name": "Stop", "last_assistant_message": answer})


def injected(w, session, cwd, prompt):
    out = hook(
        w,
        "prompt",
        {
            "session_id": session,
            "cwd": str(cwd),
            "prompt": prompt,
            "hook_event_name": "UserPromptSubmit",
        },
    )
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""


def test_a_prompt_in_one_project_never_injects_the_others_episodes(world):
    w = world
    turn(
        w,
        "sa1",
        w["alpha"],
        "How do I rotate the staging database credentials for alpha?",
        "vault write alpha/staging/rotate",
        "Run vault write alpha/staging/rotate, then redeploy.",
    )
    turn(
        w,
        "sb1",
        w["beta"],
        "How do I rotate the staging database credentials for beta?",
        "kubectl rollout restart deploy/beta",
        "Restart the beta deployment after rotating.",
    )
    DaemonClient(w["home"]).admin("refresh")
    question = "how do I rotate the staging database credentials?"
    in_beta = injected(w, "sb2", w["beta"], question)
    assert "episodes/sb1/" in in_beta  # its own project's episode of another session
    assert "sa1" not in in_beta and "vault write" not in in_beta
    in_alpha = injected(w, "sa2", w["alpha_wt"], question)  # a worktree: alpha's scope
    assert "episodes/sa1/" in in_alpha and "sb1" not in in_alpha
    outside = injected(w, "so1", w["outside"], question)
    assert "sa1" not in outside and "sb1" not in outside
    # the journal records the project; an explicit search still reaches them with scope all
    _, everything = cli(w, w["outside"], "search", question, "--episodes", "--scope", "all")
    scopes = {h["scope"] for h in everything["hits"] if h["id"].startswith("episodes/")}
    assert {"github.com/acme/alpha", w["beta_id"]} <= scopes


def test_the_injection_never_exceeds_its_budget(world, tmp_path):
    w = world
    for n in range(12):
        cli(
            w,
            w["outside"],
            "add",
            "--title",
            f"Deploy checklist step {n}",
            "--force",
            "--body",
            f"Deploy checklist step {n}: " + "verify the canary metrics and the "
            "error budget before promoting the release to every region. " * 6,
        )
    prompt = "what is on the deploy checklist before promoting a release?"
    DaemonClient(w["home"]).stop(wait=True)
    (w["home"] / "config.toml").write_text("inject_budget = 1200\nrecall_limit = 10\n")
    DaemonClient(w["home"]).ensure()
    DaemonClient(w["home"]).admin("refresh")
    small = injected(w, "s1", w["outside"], prompt)
    assert 0 < len(small) <= 1200
    DaemonClient(w["home"]).stop(wait=True)
    (w["home"] / "config.toml").write_text("inject_budget = 6000\nrecall_limit = 10\n")
    DaemonClient(w["home"]).ensure()
    DaemonClient(w["home"]).admin("refresh")
    large = injected(w, "s2", w["outside"], prompt)
    assert 1200 < len(large) <= 6000
    assert large.count("\n- [") > small.count("\n- [")


# -- the gate ---------------------------------------------------------------------------------
def test_a_lesson_stays_in_its_project_until_it_recurs_in_another():
    one = Lesson(
        "k",
        "npm test",
        "boom",
        episodes=["e1", "e2"],
        sessions=["s1", "s2"],
        projects=["github.com/acme/alpha"],
    )
    assert one.scope == "github.com/acme/alpha"
    assert Lesson("k", "c", "e", projects=["github.com/acme/alpha", "/x/beta"]).scope == "global"
    assert Lesson("k", "c", "e", projects=["github.com/acme/alpha", ""]).scope == "global"
    assert Lesson("k", "c", "e", projects=[""]).scope == "global"


# -- the browser ------------------------------------------------------------------------------
def test_the_browser_filters_by_scope_and_shows_it(world):
    from tests.memory_agent.ui_server import UI, request

    w = world
    _, alpha = cli(
        w,
        w["alpha"],
        "add",
        "--title",
        "Alpha uses protobuf edition 2023",
        "--body",
        "The alpha services define messages in protobuf edition 2023.",
    )
    _, glob_ = cli(
        w,
        w["outside"],
        "add",
        "--title",
        "Always sign commits",
        "--body",
        "The user signs every commit with an ssh key.",
    )
    ui = UI(w["home"], w["cache"])
    try:
        cookie = {"Cookie": f"memory_agent_ui={ui.token}"}
        status, _, page = request(ui.base + "/entries?scope=alpha", headers=cookie)
        assert status == 200
        assert "Alpha uses protobuf edition 2023" in page and "Always sign commits" not in page
        status, _, page = request(ui.base + "/entries?scope=global", headers=cookie)
        assert "Always sign commits" in page and "Alpha uses protobuf" not in page
        status, _, page = request(ui.base + "/entries", headers=cookie)
        assert "Alpha uses protobuf" in page and ">alpha</a>" in page and ">global</a>" in page
        status, _, page = request(ui.base + "/search?q=protobuf+edition", headers=cookie)
        assert status == 200 and "Alpha uses protobuf" in page  # a person sees every project
        assert '<span class="tag scope">alpha</span>' in page
        status, _, page = request(ui.base + f"/entry?id={alpha['id']}", headers=cookie)
        assert '<span class="tag scope">alpha</span>' in page
        status, _, page = request(ui.base + "/", headers=cookie)
        assert 'id="scopes"' in page and "alpha" in page
    finally:
        assert ui.stop() == 0
    assert glob_["scope"] == "global"


def fix_turn(w, session, cwd, n, command, error):
    """A failure, an edit, the same command succeeding: one verified failure -> fix."""
    base = {"session_id": session, "cwd": str(cwd), "transcript_path": "/nonexistent"}
    hook(w, "prompt", {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"check {n}"})
    hook(
        w,
        "tool-failure",
        {
            **base,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "error": f"Exit code 1\n{error}",
        },
    )
    hook(
        w,
        "tool",
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": f"{cwd}/setup.cfg"},
            "tool_response": {},
        },
    )
    hook(
        w,
        "tool",
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_response": {"stdout": "ok"},
        },
    )
    hook(w, "stop", {**base, "hook_event_name": "Stop", "last_assistant_message": "fixed"})


def test_the_gate_writes_into_the_project_and_goes_global_when_it_recurs_elsewhere(world):
    from memory_agent.capture.gate import read_state

    w = world
    client = DaemonClient(w["home"])
    client.stop(wait=True)
    (w["home"] / "config.toml").write_text('gate = "auto"\n')
    client.ensure()
    command, error = "pytest -x tests", "ModuleNotFoundError: No module named 'respx'"
    for session, n in (("ga-1", 1), ("ga-1", 2), ("ga-2", 3)):
        fix_turn(w, session, w["alpha"], n, command, error)
    report = client.admin("gate")
    [entry_id] = report["promoted"]
    got = client.call_tool("memory_get", {"id": entry_id})
    assert got["scope"] == "alpha" and "source: auto" in (w["home"] / got["path"]).read_text()
    fix_turn(w, "gb-1", w["beta"], 4, command, error)  # the same lesson in another project
    client.admin("gate")
    state = read_state(w["home"])
    [promoted] = state["promoted"].values()
    assert promoted["scope"] == "global" and promoted["entry"] != entry_id
    successor = client.call_tool("memory_get", {"id": promoted["entry"]})
    assert successor["scope"] == "global" and successor["supersedes"] == [entry_id]
    text = (w["home"] / successor["path"]).read_text()
    assert "source: auto" in text and "episodes:" in text  # still quoted as captured text
    assert client.call_tool("memory_get", {"id": entry_id})["status"] == "superseded"


# -- read-only corpora ------------------------------------------------------------------------
def test_a_corpus_is_global_unless_its_scope_says_otherwise(world):
    w = world
    docs = w["alpha"] / "docs"
    docs.mkdir()
    (docs / "runbook.md").write_text("# Alpha runbook\n\nPage the alpha on-call via Opsgenie.\n")
    shared = w["outside"] / "handbook"
    shared.mkdir()
    (shared / "style.md").write_text("# Style\n\nWrite commit subjects in the imperative.\n")
    repos = w["home"] / "repos.json"
    rows = [
        {"label": "alpha-docs", "path": str(docs), "scope": "project"},
        {"label": "handbook", "path": str(shared)},
    ]
    repos.write_text(json.dumps(rows))
    DaemonClient(w["home"]).admin("refresh")
    query = "how do I page the alpha on-call"
    _, here = cli(w, w["alpha_wt"], "search", query)
    assert "alpha-docs/runbook.md" in ids(here)
    assert {h["scope"] for h in here["hits"] if h["id"] == "alpha-docs/runbook.md"} == {
        "github.com/acme/alpha"
    }
    _, there = cli(w, w["beta"], "search", query)
    assert "alpha-docs/runbook.md" not in ids(there)
    _, style = cli(w, w["beta"], "search", "how should commit subjects be written")
    assert "handbook/style.md" in ids(style)  # no scope: global
    rows[0]["scope"] = "global"  # a scope changed in repos.json re-reads the corpus
    repos.write_text(json.dumps(rows))
    DaemonClient(w["home"]).admin("refresh")
    _, there = cli(w, w["beta"], "search", query)
    assert "alpha-docs/runbook.md" in ids(there)


# Before: a clone made through the person's `gh:` alias (`url."git@github.com:".insteadOf`, the
# kb conftest's git configuration) was the project `gh/acme/alpha`: the entries written from the
# clone of the full URL were not found from it, and the hook's injection left them out.
def test_a_clone_made_through_an_insteadof_alias_shares_the_project(world, tmp_path):
    w = world
    by_alias = _repo(tmp_path / "src" / "alpha-by-alias", "gh:acme/alpha")
    _, added = cli(
        w,
        w["alpha"],
        "add",
        "--title",
        "Alpha deploys with helm",
        "--body",
        "The alpha service deploys with helm charts from deploy/charts.",
    )
    assert added["scope"] == "alpha"
    _, here = cli(w, by_alias, "project")
    assert here["project"] == "github.com/acme/alpha"
    _, found = cli(w, by_alias, "search", "how does the alpha service deploy, helm charts")
    assert added["id"] in ids(found)


def test_a_known_project_is_not_named_again_by_each_entry(memory, gateway):
    """Only a project's first entry names it in kb/projects.yaml. Each later entry in it used to
    rewrite the map with the same text and say "New scope" in its commit (a defect found
    profiling the add: one `git status` more per write, and a commit log that lied)."""
    kb = memory.kb_dir
    identity = "github.com/acme/alpha"
    first = gateway.add(
        "Alpha builds with bazel 7", "Run bazel build //... in alpha.", project=identity
    )
    assert first["scope"] == "alpha"
    assert "New scope alpha (kb/projects.yaml)." in git(kb, "log", "-1", "--format=%B")
    assert "projects.yaml" in git(kb, "show", "--name-only", "--format=", "HEAD").split()
    written = (kb / "projects.yaml").stat()
    for title, scope in (
        ("Alpha tests run with pytest", None),
        ("Alpha lints with ruff", identity),
    ):
        added = gateway.add(title, f"{title}: the team's rule.", scope=scope, project=identity)
        assert added["scope"] == "alpha"
        assert "New scope" not in git(kb, "log", "-1", "--format=%B")
        assert git(kb, "show", "--name-only", "--format=", "HEAD").split() == [
            f"note/{added['id']}.md"
        ]
    now = (kb / "projects.yaml").stat()
    assert (now.st_ino, now.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # not rewritten
    assert ScopeMap.read(kb).names == {"alpha": identity}
