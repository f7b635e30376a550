"""The web console end to end: a real store, the real server on 127.0.0.1, headless Chromium.

Under CI (``CI=true``) a missing Chromium fails the browser test; elsewhere it is skipped
with the reason. ``DTA_CONSOLE_SCREENSHOT=path.png`` saves the screenshot README shows.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.cli.console.server import start_console
from agent.config import Settings
from agent.run.memory import review
from lab.eval.cases import Case
from lab.eval.runner import CaseRun
from storage import Store
from tests.browser import Browser, find_chromium
from tests.environment import unavailable

pytestmark = pytest.mark.slow

STEPS: list[dict[str, Any]] = [
    {"at": 0, "send": {"msg": "dm1", "from": "u1", "nick": "王芳", "text": "7 + 5 等于多少？"}},
    {
        "at": 1,
        "send": {
            "msg": "g1",
            "from": "u2",
            "nick": "李雷",
            "group": "cid-team",
            "text": "大家好，今天下午三点开会",
        },
    },
    {
        "at": 2,
        "send": {
            "msg": "g2",
            "from": "u2",
            "nick": "李雷",
            "group": "cid-team",
            "at_bot": True,
            "text": "(3+4)×6 是多少",
        },
    },
    {
        "at": 3,
        "send": {"msg": "mem1", "from": "u1", "nick": "王芳", "text": "记住 周五下午三点例会"},
    },
    {"at": 4, "send": {"msg": "mem2", "from": "u1", "nick": "王芳", "text": "记住 报销走钉钉审批"}},
    {"at": 5, "fault": {"webhook": {"timeout": True, "times": 1}}},
    {"at": 5, "fault": {"openapi": {"timeout": True, "times": 9}}},
    {"at": 6, "send": {"msg": "dm2", "from": "u3", "nick": "韩梅梅", "text": "1 + 1 等于多少？"}},
]


def run_steps(workdir: Path, steps: list[dict[str, Any]], case_id: str = "console") -> None:
    case = Case.model_validate(
        {
            "schema": "dta.lab.case/1",
            "id": case_id,
            "category": "platform-reliability",
            "title": case_id,
            "steps": steps,
            "expect": {"processed": [steps[0]["send"]["msg"]]},
        }
    )
    result = asyncio.run(CaseRun(case, workdir).run())
    assert result.error is None, result.error


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("console")
    run_steps(workdir, STEPS)
    return workdir / "dta.db"


@pytest.fixture
async def console(store_path: Path):
    runner, url = await start_console(store_path, Settings(store_path=store_path))
    yield url
    await runner.cleanup()


async def test_the_console_wants_its_token_and_loopback(console, store_path):
    base, token = console.split("/?token=")
    async with httpx.AsyncClient(trust_env=False) as client:
        assert (await client.get(base + "/")).status_code == 401
        assert (await client.get(base + "/?token=wrong")).status_code == 401
        assert (await client.get(base + "/api/trace/g1")).status_code == 401
        evil = await client.get(
            base + "/", headers={"Authorization": f"Bearer {token}", "Host": "evil.example:80"}
        )
        assert evil.status_code == 403
        bearer = {"Authorization": f"Bearer {token}"}
        trace = (await client.get(base + "/api/trace/g1", headers=bearer)).json()
        assert trace["cause"] == "silent_by_gate"
        with Store(store_path) as store:
            proposed = store.context.memory_candidates("proposed")[0]
        stale = await client.post(
            f"{base}/memory/{proposed.candidate_id}",
            data={"action": "approve", "revision": str(proposed.revision - 1)},
            headers={**bearer, "Accept": "application/json"},
        )
        assert stale.json() == {
            "ok": False,
            "message": f"{proposed.candidate_id} moved: it is at revision {proposed.revision},"
            f" you reviewed {proposed.revision - 1}",
        }
        cross = await client.post(
            base + "/memory/x",
            data={"action": "approve", "revision": "1"},
            headers={**bearer, "Origin": "http://evil.example"},
        )
        assert cross.status_code == 403
        entered = await client.get(console, follow_redirects=False)
        assert entered.status_code == 303 and "token" not in entered.headers["Location"]
        assert "HttpOnly" in entered.headers["Set-Cookie"]
        assert "SameSite=Strict" in entered.headers["Set-Cookie"]


async def test_the_console_in_a_browser(console, store_path, tmp_path):
    binary = find_chromium()
    if binary is None:
        unavailable("chromium not found (Debian: apt-get install chromium; or set DTA_CHROMIUM)")
    async with Browser(binary) as browser:
        await browser.goto(console)
        await browser.wait_for("document.querySelectorAll('article.msg').length > 0")
        assert "token" not in await browser.evaluate("location.href")
        sidebar = await browser.wait_for("document.querySelector('nav.side').innerText")
        assert "cid-team" in sidebar and "cid-dm-u1" in sidebar
        assert "silent: group_not_mentioned" in sidebar and "uncertain" in sidebar

        # a conversation as a thread: each message with its decision, reply and receipts
        await browser.goto(console.split("/?")[0] + "/?c=cid-team")
        team = await browser.wait_for("document.querySelector('section.thread').innerText")
        assert "大家好，今天下午三点开会" in team and "silent: group_not_mentioned" in team
        assert "engage: mentioned" in team and "(3 + 4) × 6 = 42" in team
        assert "reply accepted" in team

        # the filters: silences by reason, uncertain receipts
        await browser.click('[data-filter="uncertain"]')
        shown = await browser.wait_for(
            "location.search.includes('only=uncertain') && document.readyState === 'complete'"
            " && [...document.querySelectorAll('article.msg')].map(a => a.dataset.msg)"
        )
        assert shown == ["dm2"]

        # dta trace for any message
        await browser.click("#msg-dm2 a")
        cause = "location.pathname === '/trace/dm2' && document.getElementById('cause').innerText"
        assert await browser.wait_for(cause) == "uncertain"  # may have arrived: not "failed"
        assert "uncertain" in await browser.wait_for("document.getElementById('chain').innerText")

        # live updates: a message stored now appears without a reload
        await browser.goto(console.split("/?")[0] + "/?c=cid-live")
        later = [
            {
                "at": 30,
                "send": {
                    "msg": "live1",
                    "from": "u9",
                    "group": "cid-live",
                    "at_bot": True,
                    "text": "2 + 2 等于多少？",
                },
            }
        ]
        await asyncio.to_thread(run_steps, store_path.parent, later, "live")
        await browser.wait_for("document.body.innerText.includes('2 + 2 = 4')", timeout=20)
        assert int(await browser.evaluate("document.body.dataset.updates")) >= 1

        # the memory queue: approve by click; a stale revision is refused (compare-and-set)
        await browser.goto(console.split("/?")[0] + "/memory")
        ids = await browser.wait_for(
            "[...document.querySelectorAll('[data-status=proposed]')].map(a => a.dataset.candidate)"
        )
        assert len(ids) == 2
        await browser.click(f'[data-candidate="{ids[0]}"] button.approve')
        notice = await browser.wait_for(
            "location.search.includes('notice') && document.getElementById('notice').innerText"
        )
        assert "approved (revision 2)" in notice
        with Store(store_path) as store:
            assert review(store, ids[1], 1, True, io.StringIO()) == 0  # the CLI moves it
        answer = await browser.evaluate(
            f"fetch('/memory/{ids[1]}', {{method: 'POST', headers: {{Accept:"
            " 'application/json'}, body: new URLSearchParams({action: 'reject', revision: '1'})})"
            ".then(r => r.json())"
        )
        assert answer["ok"] is False and "already approved" in answer["message"]
        with Store(store_path) as store:
            statuses = {
                c.candidate_id: (c.status.value, c.revision)
                for c in store.context.memory_candidates()
            }
        assert statuses == {ids[0]: ("approved", 2), ids[1]: ("approved", 2)}

        shot = os.environ.get("DTA_CONSOLE_SCREENSHOT")
        if shot:
            await browser.goto(console.split("/?")[0] + "/?c=cid-team")
            await browser.wait_for("document.querySelectorAll('article.msg').length > 1")
            await browser.screenshot(Path(shot))
