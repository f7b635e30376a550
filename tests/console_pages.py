"""What the console's page tests share: the store a lab case leaves, its pages fetched from
the real server on 127.0.0.1 with the token, and a page's text as a person sees it."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.cli.console.server import start_console
from agent.config import Settings
from lab.eval.cases import load_case
from lab.eval.runner import CaseRun

CASES = Path(__file__).resolve().parents[1] / "lab/cases"


def store_of_case(factory: pytest.TempPathFactory, case: str) -> Path:
    """Play ``lab/cases/<case>`` (it must pass) and return the store it left."""
    workdir = factory.mktemp(Path(case).stem[:40])
    result = asyncio.run(CaseRun(load_case(CASES / case), workdir).run())
    assert result.passed, (result.error, [str(p) for p in result.problems])
    return workdir / "dta.db"


async def fetch(store_path: Path, settings: Settings, *paths: str) -> list[str]:
    """Each page's HTML (status 200 asserted), from a console started for this."""
    runner, url = await start_console(store_path, settings)
    try:
        base, _, query = url.partition("/?")
        headers = {"Authorization": f"Bearer {query.removeprefix('token=')}"}
        pages = []
        async with httpx.AsyncClient(trust_env=False) as client:
            for path in paths:
                page = await client.get(base + path, headers=headers)
                assert page.status_code == 200, path
                pages.append(page.text)
        return pages
    finally:
        await runner.cleanup()


def seen(html: str) -> str:
    """The page's text as a person sees it (no tags, no attributes)."""
    main = html[html.index("<main>") : html.index("</main>")]
    return " ".join(re.sub(r"<[^>]+>", " ", main).split())


@asynccontextmanager
async def in_browser(store_path: Path, settings: Settings) -> AsyncIterator[tuple[Any, str]]:
    """Chromium (Debian's) on a console started for this, the token already a cookie:
    ``(browser, base URL)``. Without Chromium the test is skipped here and fails in CI."""
    from tests.browser import Browser, find_chromium
    from tests.environment import unavailable

    binary = find_chromium()
    if binary is None:
        unavailable("chromium not found (Debian: apt-get install chromium; or set DTA_CHROMIUM)")
    runner, url = await start_console(store_path, settings)
    try:
        async with Browser(binary) as browser:
            await browser.goto(url)  # the token becomes a cookie
            yield browser, url.split("/?")[0]
    finally:
        await runner.cleanup()


async def keep_screenshot(browser: Any, name: str) -> None:
    """``DTA_CONSOLE_SCREENSHOTS=DIR`` keeps the page as ``DIR/<name>.png`` (lab/screenshots/)."""
    shots = os.environ.get("DTA_CONSOLE_SCREENSHOTS")
    if shots:
        await browser.screenshot(Path(shots) / f"{name}.png")
