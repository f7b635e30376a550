"""The console's feedback page in Chromium: 👍 / 👎 per conversation, skill, provider and day,
the latest ratings with their reasons, times in the team's zone — from the store a lab case
left (the real server on 127.0.0.1). ``DTA_CONSOLE_SCREENSHOTS=DIR`` saves the page as
``console-feedback.png`` (lab/screenshots/ keeps it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import Settings
from tests.console_pages import in_browser, keep_screenshot, store_of_case

pytestmark = pytest.mark.slow
CASE = "conversation-contract/feedback/two-people-in-a-group-each-count.json"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return store_of_case(tmp_path_factory, CASE)


async def test_the_team_sees_the_answers_ratings_in_a_browser(store_path: Path) -> None:
    async with in_browser(store_path, Settings(store_path=store_path)) as (browser, base):
        await browser.goto(base + "/feedback")
        await browser.wait_for("!!document.querySelector('[data-rating=down]')")
        seen = await browser.wait_for("document.querySelector('main').innerText")
        assert "没写计算过程" in seen and "+08:00" in seen and "+0000" not in seen
        assert "per conversation" in seen and "per provider" in seen and "per day" in seen
        totals = await browser.wait_for("document.getElementById('totals').innerText")
        assert "👍 1" in totals and "👎 1" in totals and "50% 👍" in totals
        rows = await browser.evaluate(
            "[...document.querySelectorAll('#by-provider tr[data-key]')]"
            ".map(r => r.innerText.split('\\t').join('|'))"
        )
        assert rows == ["rules|1|1|50%"]
        here = await browser.evaluate("document.getElementById('nav-feedback').className")
        assert here == "here"
        await keep_screenshot(browser, "console-feedback")
