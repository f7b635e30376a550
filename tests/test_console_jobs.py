"""The console's jobs page: each recurring job with its slots — dispatched and delivered,
silent ``nothing_new``, cancelled — from the store a lab case left (the real server on
127.0.0.1), and as Chromium renders it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import Settings
from tests.console_pages import fetch, in_browser, keep_screenshot, seen, store_of_case

pytestmark = pytest.mark.slow
CASE = "task-lifecycle/jobs/list-and-cancel-jobs-in-words.json"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return store_of_case(tmp_path_factory, CASE)


async def test_the_jobs_page_shows_each_job_and_what_became_of_its_slots(store_path: Path) -> None:
    (html,) = await fetch(store_path, Settings(store_path=store_path), "/jobs")
    assert 'data-status="active"' in html and 'data-status="cancelled"' in html
    assert "every day at 18:00" in html and "every Mon at 09:00" in html
    assert "cancelled by its owner" in html
    text = seen(html)
    assert "2026-01-01 18:00:00 +08:00 · dispatched" in text
    assert html.count('<span class="badge quiet">nothing_new<') == 3 and "(reply accepted)" in text
    assert "+0000" not in text


async def test_the_jobs_page_in_a_browser(store_path: Path) -> None:
    """``DTA_CONSOLE_SCREENSHOTS=DIR`` saves the view (lab/screenshots/ keeps it)."""
    async with in_browser(store_path, Settings(store_path=store_path)) as (browser, base):
        await browser.goto(base + "/jobs")
        await browser.wait_for("!!document.querySelector('[data-job]')")
        seen = await browser.wait_for("document.querySelector('main').innerText")
        assert "every day at 18:00" in seen and "nothing_new" in seen and "+08:00" in seen
        await keep_screenshot(browser, "console-jobs")
