"""The console's approvals page: pending and decided approvals with their snapshot, what
became of each act (the outcome vocabulary), people by name, arguments as read and times in
the configured zone, from a store a lab case left (the real server on 127.0.0.1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.config import Settings
from tests.console_pages import fetch, in_browser, keep_screenshot, seen, store_of_case

pytestmark = pytest.mark.slow
CASE = "workspace-and-artifacts/acts/colleague-todo-waits-for-the-askers-click.json"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return store_of_case(tmp_path_factory, CASE)


async def test_the_approvals_page_shows_the_snapshot_and_every_click(store_path: Path) -> None:
    (html,) = await fetch(store_path, Settings(store_path=store_path), "/approvals")
    assert 'data-status="approved"' in html and "创建待办" in html and "整理发票" in html
    assert "not_authorizer" in html and "approved" in html  # u3's click, then the asker's
    text = seen(html)
    assert "for 张三" in text and "asked by 李四" in text  # the audience and the asker, by name
    assert "u2" not in text and "u1" not in text, "names, not staff ids"


async def test_the_approvals_page_tells_the_outcome_and_reads_the_arguments(
    store_path: Path,
) -> None:
    (html,) = await fetch(store_path, Settings(store_path=store_path), "/approvals")
    assert 'data-outcome="verified"' in html
    assert re.search(r'class="badge outcome verified [a-z]+"[^>]*>done, read back<', html)
    assert "<dt>主题</dt><dd>整理发票</dd>" in html and "<dt>执行人</dt><dd>张三</dd>" in html
    assert "\\u" not in html and "['" not in html and "{&#34;" not in html, "no JSON, no repr"
    assert "2026-01-01 08:00:00 +08:00" in html, "asked, in Asia/Shanghai"
    assert "+0000" not in html and "UTC" not in html


async def test_every_page_shows_times_in_the_configured_zone(store_path: Path) -> None:
    settings = Settings(store_path=store_path, timezone="Europe/Berlin")
    approvals, threads, trace = await fetch(
        store_path, settings, "/approvals", "/?c=g1", "/trace/m1"
    )
    assert "2026-01-01 01:00:00 +01:00" in approvals
    for html in (threads, trace):
        assert "+01:00" in html and "+08:00" not in html and "+0000" not in html
    assert "act dingtalk.todo.create 「整理发票」 → done, read back" in threads
    assert "&#34;outcome&#34;: &#34;verified&#34;" in trace and "\\u" not in trace


async def test_the_team_sees_its_zone_its_words_and_the_acts_outcome_in_a_browser(
    store_path: Path,
) -> None:
    """The thread, the approval and the trace as Chromium renders them: times in the team's
    zone, arguments as read (names, not ids), the act shown as an act with its outcome.
    ``DTA_CONSOLE_SCREENSHOTS=DIR`` saves the three views (lab/screenshots/ keeps them)."""
    async with in_browser(store_path, Settings(store_path=store_path)) as (browser, base):
        for name, path, ready in (
            ("thread", "/?c=g1", "document.querySelector('[data-form=act]')"),
            ("approvals", "/approvals", "document.querySelector('[data-outcome]')"),
            ("trace", "/trace/m1", "document.getElementById('chain')"),
        ):
            await browser.goto(base + path)
            await browser.wait_for(f"!!{ready}")
            seen = await browser.wait_for("document.querySelector('main').innerText")
            assert "+08:00" in seen and "+0000" not in seen and "\\u" not in seen, name
            if name == "thread":
                act = await browser.wait_for("document.querySelector('[data-form=act]').innerText")
                assert act.startswith("act dingtalk.todo.create") and "done, read back" in act
            if name == "approvals":
                assert "done, read back" in seen and "张三" in seen and "整理发票" in seen
            await keep_screenshot(browser, f"console-{name}")
