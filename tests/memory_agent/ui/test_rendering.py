"""The memory browser's rendering defects, each pinned on the rendered page in a real headless
Chromium against a real daemon and a demo home (the clock pinned): the health card, the recalls
chart, the type checkboxes, plain-text snippets, external images as links, the diff's spacing, and a
bad importance as a 400 with the error shape. (Issue 18, item 10.)"""

import json
import os
import re
import signal

import pytest

from memory_agent import config
from memory_agent.client import DaemonClient
from memory_agent.clock import parse_time
from memory_agent.index.memory import Memory
from memory_agent.kb.entries import ENTRY_TYPES
from tests.browser import launch, needs_chromium
from tests.memory_agent.helpers import git
from tests.memory_agent.mcp_helpers import daemon_pids
from tests.memory_agent.ui_server import ARTIFACTS, UI, request

NOW = "2026-11-30T09:00:00Z"
MARKDOWN = """---
id: vacuum-before-the-dump
title: Vacuum before the nightly dump
type: process
status: active
created: 2026-11-20T00:00:00Z
---
**Run `VACUUM ANALYZE` first**: the [nightly dump](https://wiki.example/dump) of a bloated
table takes _three times_ as long.

![tracking pixel](https://evil.example/pixel.png?who=reader)
"""
RECALLS = {"2026-11-28": 3, "2026-11-30": 1}  # recalls per day written to the event log


@pytest.fixture(scope="module")
def home(tmp_path_factory, shared_cache):
    home = tmp_path_factory.mktemp("ui18") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMORY_AGENT_CLOCK", NOW)  # the events and the chart's 30 days end here
        mp.setenv("MEMORY_AGENT_CACHE", str(shared_cache))
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm", sync=False)
        (home / "kb" / "process" / "vacuum-before-the-dump.md").write_text(MARKDOWN)
        git(home / "kb", "add", "process/vacuum-before-the-dump.md")
        git(home / "kb", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "vacuum")
        lines = [
            {
                "kind": "recall",
                "entry": "vacuum-before-the-dump",
                "rank": 1,
                "ts": parse_time(day) + 3600 + i,
            }
            for day, n in RECALLS.items()
            for i in range(n)
        ]
        (home / "events" / "s18.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
        client = DaemonClient(home)
        client.ensure()
        client.admin("refresh")
        server = UI(home, shared_cache)
        yield home, server
        assert server.stop() == 0
        client.stop(wait=True)
        for pid in daemon_pids(home):
            os.kill(pid, signal.SIGKILL)


def test_an_importance_that_is_not_a_number_is_a_400_with_the_error_shape(home):
    _, ui = home
    cookie = {"Cookie": f"memory_agent_ui={ui.token}"}
    _, _, html = request(ui.base + "/entry?id=vacuum-before-the-dump", headers=cookie)
    csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)
    form = f"id=vacuum-before-the-dump&importance=abc&csrf={csrf}".encode()
    status, _, body = request(
        ui.base + "/entry/importance",
        method="POST",
        data=form,
        headers={**cookie, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 400, body
    assert "<h1>invalid</h1>" in body and "whole number" in body and "Fix: give" in body
    assert "internal" not in body and "Traceback" not in body


@pytest.mark.slow
@needs_chromium
def test_the_rendered_pages(home):
    kb_home, ui = home
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        outside = []
        page.on("request", lambda r: outside.append(r.url) if "127.0.0.1" not in r.url else None)
        page.goto(ui.url)

        # the overview: the health card holds its text at a desktop and a narrow width
        for width in (1200, 700):
            page.set_viewport_size({"width": width, "height": 900})
            spill = page.evaluate(
                """() => { const card = document.querySelector('#health');
                           const right = card.getBoundingClientRect().right;
                           const over = [...card.querySelectorAll('*')]
                             .filter(e => e.getBoundingClientRect().right > right + 0.5)
                             .map(e => e.tagName + ': ' + e.textContent.slice(0, 40));
                           return {over, scroll: card.scrollWidth - card.clientWidth}; }"""
            )
            assert spill == {"over": [], "scroll": 0}, (width, spill)
        page.set_viewport_size({"width": 1200, "height": 900})
        # the recalls chart says its numbers: one count above each day that had recalls
        counts = page.locator("svg.chart text.count").evaluate_all(
            "els => els.map(e => e.textContent)"
        )
        assert sorted(counts) == sorted(str(n) for n in RECALLS.values())
        page.screenshot(path=str(ARTIFACTS / "ui18-overview.png"), full_page=True)

        # search: types are checkboxes a plain click toggles, snippets are plain text
        page.goto(ui.base + "/search")
        boxes = page.locator("#types input[type=checkbox][name=type]")
        assert boxes.count() == len(ENTRY_TYPES)
        page.click("#types label:has-text('process')")
        page.click("#types label:has-text('decision')")
        page.fill("form.search input[name=q]", "vacuum before the nightly dump")
        page.click("form.search button[type=submit]")
        page.wait_for_selector("#hits .hit")
        assert sorted(re.findall(r"type=(\w+)", page.url)) == ["decision", "process"]
        hit_types = set(page.locator("#hits .hit .head .tag:not(.scope)").all_inner_texts())
        assert hit_types <= {"process", "decision", "active"} and "process" in hit_types
        checked = page.locator("#types input:checked")
        assert sorted(checked.evaluate_all("els => els.map(e => e.value)")) == [
            "decision",
            "process",
        ]
        snippet = page.locator("#hits .hit").first.locator(".snippet").inner_text()
        assert "VACUUM ANALYZE" in snippet and "nightly dump" in snippet, snippet
        for markup in ("**", "`", "](", "![", "_three"):
            assert markup not in snippet, (markup, snippet)
        page.screenshot(path=str(ARTIFACTS / "ui18-search.png"))

        # an entry: its external image is a link, never loaded; its diff is single-spaced
        page.goto(ui.base + "/entry?id=vacuum-before-the-dump")
        body = page.locator("#body")
        assert body.locator("img").count() == 0
        image = body.locator("a.image")
        assert image.inner_text() == "[image: tracking pixel]"
        assert image.get_attribute("href") == "https://evil.example/pixel.png?who=reader"
        assert body.locator("strong").first.inner_text().startswith("Run")
        page.goto(ui.base + "/entry?id=store-timestamps-as-utc")
        spacing = page.evaluate(
            """() => { const pre = document.querySelector('pre.diff');
                       const style = getComputedStyle(pre);
                       const lines = pre.querySelectorAll('span').length;
                       const inner = pre.clientHeight - parseFloat(style.paddingTop)
                                     - parseFloat(style.paddingBottom);
                       return {lines, perLine: inner / lines,
                               lineHeight: parseFloat(style.lineHeight)}; }"""
        )
        assert spacing["lines"] > 5
        assert spacing["perLine"] < 1.3 * spacing["lineHeight"], spacing
        text = page.locator("pre.diff").first.inner_text()
        assert "\n\n" not in text.strip()
        page.screenshot(path=str(ARTIFACTS / "ui18-entry.png"), full_page=True)
        browser.close()
    assert not [u for u in outside if "evil.example" in u or "wiki.example" in u], outside
