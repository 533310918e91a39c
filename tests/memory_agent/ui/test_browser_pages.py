"""What a person meets in the memory browser: a fork's successors each a link of their own and a
Keep button that resolves it (preview, then one commit); an error page that speaks of the pages,
not of MCP tools; an entry nobody recalled saying so; the search page's signal bars folded under
each hit; a person's browsing logged apart from an agent's use, never counted as a recall. A real
daemon, `memory-agent ui`, and Debian's Chromium where it is installed. (Issue 31, items 1, 2, 5.)
"""

import os
import re
import signal

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from memory_agent.kb.entries import Entry, render_entry
from memory_agent.recall.events import read_events
from tests.browser import launch, needs_chromium
from tests.memory_agent.helpers import commit, git
from tests.memory_agent.mcp_helpers import daemon_pids
from tests.memory_agent.ui_server import ARTIFACTS, UI, request

WHEN = "2026-11-20T09:00:00Z"


def write(kb, entry: Entry) -> None:
    (kb / entry.type / f"{entry.id}.md").write_text(render_entry(entry), encoding="utf-8")


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_cache):
    home = tmp_path_factory.mktemp("ui-pages") / "home"
    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    kb = home / "kb"
    old, a, b = (
        "prefer-small-prs",
        "prefer-small-prs-under-400-lines",
        "prefer-small-prs-one-change",
    )
    write(
        kb,
        Entry(
            old,
            "Prefer small PRs",
            "guideline",
            "superseded",
            WHEN,
            "Keep pull requests small.",
            [],
            {"superseded_by": [b, a], "superseded_at": WHEN},
        ),
    )
    for sid, title, body in (
        (a, "Prefer small PRs (under 400 lines)", "Keep each pull request under 400 lines."),
        (b, "Prefer small PRs: one change each", "One pull request carries one logical change."),
    ):
        write(kb, Entry(sid, title, "guideline", "active", WHEN, body, [], {"supersedes": [old]}))
    git(kb, "add", "-A")
    commit(kb, "a fork, as a sync leaves it")
    client = DaemonClient(home)
    client.ensure()
    client.admin("refresh")
    yield home
    client.stop(wait=True)
    for pid in daemon_pids(home):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def ui(home, shared_cache):
    server = UI(home, shared_cache)
    yield server
    assert server.stop() == 0


def get(ui, path):
    return request(ui.base + path, headers={"Cookie": f"memory_agent_ui={ui.token}"})


def test_a_forks_successors_are_links_of_their_own_and_an_error_speaks_of_pages(ui):
    status, _, page = get(ui, "/entry?id=prefer-small-prs")
    assert status == 200
    line = re.search(r'<p class="warn" id="superseded-by">(.*?)</p>', page, re.S).group(1)
    links = re.findall(r'href="([^"]+)"', line)
    assert links == [
        "/entry?id=prefer-small-prs-one-change",
        "/entry?id=prefer-small-prs-under-400-lines",
    ]  # before: one link to /entry?id=%5B%27... (a Python list), which was not_found
    assert "[" not in line and "a fork" in line
    assert page.count('action="/entry/resolve"') == 3  # Keep for each, and the merge form
    status, _, missing = get(ui, "/entry?id=%5B%27prefer-small-prs-one-change%27%5D")
    assert status == 404 and "Search page" in missing and "memory_search" not in missing


def test_an_entry_nobody_recalled_says_none(ui):
    _, _, page = get(ui, "/entry?id=prefer-small-prs-one-change")
    assert 'id="no-recalls"' in page and "None" in page and '<svg class="chart"' not in page


def test_a_persons_browsing_is_logged_apart_and_never_counts_as_a_recall(ui, home):
    for _ in range(3):
        status, _, page = get(ui, "/search?q=why+are+order+timestamps+8+hours+off")
        assert status == 200 and "store-timestamps-as-utc" in page
        get(ui, "/entry?id=store-timestamps-as-utc")
    events = read_events(home / "events")
    looks = [e for e in events if e["kind"] == "look"]
    assert any(e.get("entry") == "store-timestamps-as-utc" and "rank" in e for e in looks)
    assert any(e.get("entry") == "store-timestamps-as-utc" and "rank" not in e for e in looks)
    assert not [e for e in events if e["kind"] in ("recall", "get")]  # before: 3 recalls at #1
    found = DaemonClient(home).call_tool(
        "memory_search", {"query": "why are order timestamps 8 hours off", "explain": True}
    )
    top = found["hits"][0]
    assert top["id"] == "store-timestamps-as-utc" and top["why"]["recall_count"] == 0


@pytest.mark.slow
@needs_chromium
def test_the_search_page_folds_its_bars_and_a_fork_is_kept_with_one_button(ui, home):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(ui.url)
        page.goto(ui.base + "/search?q=how+do+we+run+the+tests&limit=20")
        page.wait_for_selector("#hits .hit")
        assert page.locator("#hits .hit").count() == 20
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < 3500, height  # before: about 6,500 px, every hit's 13 bars open
        first = page.locator("#hits .hit").first
        assert not first.locator("table.why").is_visible()
        first.locator("details.why summary").click()
        assert first.locator("table.why").is_visible()
        page.screenshot(path=str(ARTIFACTS / "ui-search-folded.png"))
        head = git(home / "kb", "rev-parse", "HEAD").strip()
        page.goto(ui.base + "/entry?id=prefer-small-prs")
        page.click("text=Keep prefer-small-prs-one-change")
        page.wait_for_selector("#confirm")
        assert git(home / "kb", "rev-parse", "HEAD").strip() == head  # a preview first
        assert page.locator("pre.file").count() == 2
        page.click("#confirm button")
        page.wait_for_selector("#done")
        assert "prefer-small-prs-one-change" in page.locator("main").inner_text()
        browser.close()
    subject = git(home / "kb", "log", "-1", "--format=%s")
    assert subject.startswith("memory: resolve the fork of prefer-small-prs: keep")
    got = DaemonClient(home).call_tool("memory_get", {"id": "prefer-small-prs"})
    assert got["superseded_by"] == "prefer-small-prs-one-change"
    dropped = DaemonClient(home).call_tool("memory_get", {"id": "prefer-small-prs-under-400-lines"})
    assert (
        dropped["status"] == "archived" and "fork of prefer-small-prs" in dropped["archive_reason"]
    )
