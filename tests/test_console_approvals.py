"""The console's approvals page: pending and decided approvals with their snapshot and
clicks, from a store a lab case left (the real server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from agent.cli.console.server import start_console
from agent.config import Settings
from lab.cases import load_case
from lab.runner import CaseRun

pytestmark = pytest.mark.slow
CASE = Path(__file__).resolve().parents[1] / (
    "lab/cases/workspace-and-artifacts/acts/colleague-todo-waits-for-the-askers-click.json"
)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("console-approvals")
    result = asyncio.run(CaseRun(load_case(CASE), workdir).run())
    assert result.passed, (result.error, [str(p) for p in result.problems])
    return workdir / "dta.db"


async def test_the_approvals_page_shows_the_snapshot_and_every_click(store_path: Path) -> None:
    runner, url = await start_console(store_path, Settings(store_path=store_path))
    try:
        base, _, query = url.partition("/?")
        token = query.removeprefix("token=")
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(trust_env=False) as client:
            page = await client.get(base + "/approvals", headers=headers)
        assert page.status_code == 200
        html = page.text
        assert 'data-status="approved"' in html and "创建待办" in html and "整理发票" in html
        assert "not_authorizer" in html and "approved" in html  # u3's click, then the asker's
        assert json.dumps(["u2"])[1:-1] in html  # the audience
    finally:
        await runner.cleanup()
