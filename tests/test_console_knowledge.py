"""The console's knowledge page: each DingTalk source with its last good sync and its
problem (a later sync throttled: the last snapshot is still served), its docs with their
as-of times, from the store a lab case left (the real server on 127.0.0.1), and as Chromium
renders it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import Settings
from tests.console_pages import fetch, in_browser, keep_screenshot, seen, store_of_case

pytestmark = pytest.mark.slow
CASE = "conversation-contract/dingtalk-knowledge/unreadable-source-keeps-its-last-snapshot.json"


def _settings(store_path: Path) -> Settings:
    """The console as the case's daemon was configured: its source, named."""
    source = {"wiki": "ws-lab", "name": "团队知识库"}
    return Settings(
        store_path=store_path, client_id="lab", client_secret="lab",
        knowledge_reader="union-lab-reader", knowledge_sources=[source],
    )  # fmt: skip


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return store_of_case(tmp_path_factory, CASE)


async def test_the_knowledge_page_shows_each_source_its_docs_and_its_problem(
    store_path: Path,
) -> None:
    (html,) = await fetch(store_path, _settings(store_path), "/knowledge")
    assert 'data-source="wiki:ws-lab"' in html and 'data-problem="yes"' in html
    assert "throttled" in html and "《差旅制度》" in html and 'data-doc-status="active"' in html
    text = seen(html)
    assert "as of 2025-11-28 10:00:00 +08:00" in text
    assert "last good sync 2026-01-01 08:00:00" in text
    assert "团队知识库" in text and "served in dm" in text and "no longer configured" not in text
    assert "+0000" not in text


async def test_the_knowledge_page_in_a_browser(store_path: Path) -> None:
    """``DTA_CONSOLE_SCREENSHOTS=DIR`` saves the view (lab/screenshots/ keeps it)."""
    async with in_browser(store_path, _settings(store_path)) as (browser, base):
        await browser.goto(base + "/knowledge")
        await browser.wait_for("!!document.querySelector('[data-source]')")
        seen = await browser.wait_for("document.querySelector('main').innerText")
        assert "差旅制度" in seen and "throttled" in seen and "+08:00" in seen
        await keep_screenshot(browser, "console-knowledge")
