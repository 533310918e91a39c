"""The memory browser: every page in a real headless Chromium against a real daemon and a demo home,
a supersede through preview and confirm, the security promises (the token, the host, CSRF, hostile
text rendered inert, read-only entries), and the recall activity it reads from the event log. (Issue
12.)"""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.index.memory import Memory
from tests.browser import launch, needs_chromium
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import daemon_pids, env_for
from tests.memory_agent.ui_server import ARTIFACTS, UI, request

EVIL = """---
id: evil-entry
title: An entry with hostile text
type: note
status: active
created: 2026-11-01T00:00:00Z
---
<script>window.__pwned = 1; alert("script ran")</script>

<img src="x" onerror="window.__pwned = 2; alert('img ran')">

[click me](javascript:window.__pwned=3) and <a href="javascript:alert(4)">raw link</a>

<iframe src="https://evil.example/"></iframe> **still bold**
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_cache):
    home = tmp_path_factory.mktemp("ui") / "home"
    os.environ["MEMORY_AGENT_CACHE"] = str(shared_cache)
    Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
    (home / "kb" / "note" / "evil-entry.md").write_text(EVIL)
    git(home / "kb", "add", "note/evil-entry.md")
    git(home / "kb", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "hostile")
    env = env_for(home, shared_cache)
    for event, payload in (
        ("prompt", {"prompt": "why did the nightly reconcile job run at 10am?"}),
        (
            "tool-failure",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "kubectl get cronjob"},
                "error": "Exit code 1\nerror: You must be logged in",
            },
        ),
        ("stop", {"last_assistant_message": "The CronJob had no timeZone."}),
    ):
        subprocess.run(
            [sys.executable, "-m", "memory_agent", "hook", event, "--home", str(home)],
            input=json.dumps({"session_id": "ui-session-1", **payload}),
            text=True,
            env=env,
            check=True,
            capture_output=True,
        )
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


def test_no_token_wrong_host_and_missing_csrf_are_refused(ui):
    status, headers, _ = request(ui.base + "/")
    assert status == 403
    status, _, _ = request(ui.url, headers={"Host": "evil.example:80"})
    assert status in (403, 421)
    port = ui.base.rsplit(":", 1)[1]
    status, _, _ = request(ui.url, headers={"Host": f"attacker.example:{port}"})  # rebinding
    assert status in (403, 421)
    cookie = {"Cookie": f"memory_agent_ui={ui.token}"}
    status, headers, body = request(ui.base + "/entries", headers=cookie)
    assert status == 200 and "default-src 'none'" in headers["content-security-policy"]
    form = b"id=use-uv-for-locking&reason=gone&confirm=1"
    status, _, body = request(
        ui.base + "/entry/archive",
        method="POST",
        data=form,
        headers={**cookie, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 403 and "CSRF" in body
    status, _, _ = request(
        ui.base + "/entry/archive",
        method="POST",
        data=form + b"&csrf=x",
        headers={
            **cookie,
            "Origin": "http://evil.example",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert status == 403


def test_writes_preview_first_and_read_only_entries_stay_read_only(ui, home):
    cookie = {"Cookie": f"memory_agent_ui={ui.token}"}
    form_type = {**cookie, "Content-Type": "application/x-www-form-urlencoded"}
    _, _, html = request(ui.base + "/entry?id=use-uv-for-locking", headers=cookie)
    csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)
    head = git(home / "kb", "rev-parse", "HEAD").strip()
    form = f"id=use-uv-for-locking&reason=gone&csrf={csrf}".encode()
    status, _, body = request(
        ui.base + "/entry/archive", method="POST", data=form, headers=form_type
    )
    assert status == 200 and "Nothing is written yet" in body and "status: archived" in body
    assert git(home / "kb", "rev-parse", "HEAD").strip() == head
    # an episode is read-only here as in the tools: no change form, and a forged post is refused
    _, _, listing = request(ui.base + "/entries?source=episodes", headers=cookie)
    episode = re.search(r'href="/entry\?id=([^"]+)"', listing).group(1)
    _, _, page = request(ui.base + f"/entry?id={episode}", headers=cookie)
    assert "read-only" in page and 'action="/entry/archive"' not in page
    form = f"id={episode}&reason=gone&csrf={csrf}&confirm=1".encode()
    status, _, body = request(
        ui.base + "/entry/archive", method="POST", data=form, headers=form_type
    )
    assert status >= 400 and "read-only" in body.lower(), body
    assert git(home / "kb", "rev-parse", "HEAD").strip() == head


@pytest.mark.slow
@needs_chromium
def test_every_page_in_a_browser_a_supersede_and_a_hostile_entry(ui, home):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        dialogs, errors = [], []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(ui.url)  # the token becomes a cookie; the URL loses it
        assert "token=" not in page.url
        assert page.locator("#health").inner_text().count("yes") == 1
        assert page.locator("#writes tr").count() >= 3
        page.screenshot(path=str(ARTIFACTS / "ui-overview.png"), full_page=True)
        # search: the same search the agents get, with every signal drawn
        page.click("nav >> text=Search")
        page.fill("form.search input[name=q]", "why are order timestamps 8 hours off")
        page.click("form.search button[type=submit]")
        page.wait_for_selector("#hits .hit")
        first = page.locator("#hits .hit").first
        assert "store-timestamps-as-utc" in first.locator("a").first.get_attribute("href")
        assert first.locator("tr.signal").count() == 5 and first.locator("svg.bar").count() >= 7
        page.screenshot(path=str(ARTIFACTS / "ui-search.png"))
        # entries, paginated, and one entry with its history and its git diff
        page.goto(ui.base + "/entries?source=kb")
        assert page.locator("#entries tr").count() > 20
        page.goto(ui.base + "/entry?id=store-timestamps-as-utc")
        assert page.locator("#history li").count() == 2
        assert page.locator("pre.diff").first.inner_text().count("+") > 3
        page.screenshot(path=str(ARTIFACTS / "ui-entry.png"))
        # episodes: the captured session, turn by turn
        page.goto(ui.base + "/episodes")
        page.click("#sessions a")
        assert "kubectl get cronjob" in page.locator("#turns").inner_text()
        assert page.locator("#turns .steps li.bad").count() == 1
        page.goto(ui.base + "/inbox")
        assert page.locator("#empty").is_visible()
        # a supersede: preview (nothing written), then confirm (one commit)
        head = git(home / "kb", "rev-parse", "HEAD").strip()
        page.goto(ui.base + "/entry?id=branch-naming")
        page.click("text=Supersede (replace with a corrected entry)")
        page.fill("#supersede input[name=title]", "Branches are named <type>/<ticket>-<slug>")
        page.fill("#supersede textarea[name=body]", "feat/KES-123-short-slug, fix/..., chore/...")
        page.click("#supersede button")
        page.wait_for_load_state()
        page.wait_for_selector("#confirm")
        assert page.locator("pre.file").count() == 2
        assert git(home / "kb", "rev-parse", "HEAD").strip() == head
        page.screenshot(path=str(ARTIFACTS / "ui-preview.png"), full_page=True)
        page.click("#confirm button")
        page.wait_for_selector("#done")
        commit = page.locator("#commit").inner_text()
        assert git(home / "kb", "rev-parse", "HEAD").strip() == commit != head
        subject = git(home / "kb", "log", "-1", "--format=%s")
        assert subject.startswith("memory: supersede branch-naming with branches-are-named")
        # hostile text renders inert
        page.goto(ui.base + "/entry?id=evil-entry")
        body = page.locator("#body")
        assert "<script>window.__pwned" in body.inner_text()  # shown as text
        assert page.evaluate("window.__pwned") is None
        assert body.locator("script, iframe, img[onerror]").count() == 0
        assert body.locator("a[href^='javascript']").count() == 0
        assert body.locator("strong").inner_text() == "still bold"
        page.screenshot(path=str(ARTIFACTS / "ui-hostile.png"))
        assert dialogs == [] and errors == []
        browser.close()
    for name in ("ui-overview", "ui-search", "ui-entry", "ui-preview", "ui-hostile"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000


def test_recall_activity_reads_a_compacted_event_file_once(tmp_path):
    """Regression: the browser read both a `.jsonl` and its `.gz` twin (a compaction in
    progress) and counted every recall twice; it now reads events as the daemon's fold does."""
    import gzip

    from memory_agent.ui.data import UIData

    home = tmp_path / "home"
    (home / "events").mkdir(parents=True)
    line = json.dumps({"kind": "recall", "entry": "a", "ts": 1_780_000_000.0}) + "\n"
    (home / "events" / "s1.jsonl").write_text(line)
    with gzip.open(home / "events" / "s1.jsonl.gz", "wt") as fh:
        fh.write(line)
    (home / "events" / "s2.jsonl").write_text(line.replace('"a"', '"b"'))
    days = dict(UIData(home).activity(3))
    assert sum(days.values()) == 2 and days["2026-05-28"] == 2
