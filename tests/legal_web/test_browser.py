"""The page in a real headless Chromium (Debian's), driven by Playwright."""

import pytest

from tests.browser import launch, needs_chromium
from tests.legal_web.server_helpers import ROOT, WebProcess

ARTIFACTS = ROOT / "test-artifacts"


@pytest.mark.slow
@needs_chromium
def test_ask_a_question_in_the_browser_and_see_cited_passages(tmp_path, shared_cache):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    web = WebProcess(tmp_path / "home", shared_cache)
    try:
        with sync_api.sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.goto(web.url + "/")
            page.wait_for_selector("#kb option", state="attached")
            assert page.locator("#kb option").count() == 3
            page.select_option("#kb", "data-protection")
            page.fill("#question", "敏感个人信息包括哪些？")
            page.press("#question", "Enter")  # Enter submits
            page.wait_for_selector("#passages li", timeout=60_000)
            assert page.locator("#result").is_visible()
            assert "[1]" in page.locator("#answer").inner_text()
            titles = page.locator("#passages .doc").all_inner_texts()
            assert titles and all(titles)
            assert "个人信息" in page.locator("#passages").inner_text()  # Chinese rendered
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "legal_web.png"), full_page=True)
            # the error state: an empty question is refused in the page
            page.fill("#question", "   ")
            page.press("#question", "Enter")
            assert "Type a question" in page.locator("#status").inner_text()
            browser.close()
    finally:
        assert web.stop() == 0
    assert (ARTIFACTS / "legal_web.png").stat().st_size > 10_000
