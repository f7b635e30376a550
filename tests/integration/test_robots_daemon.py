"""Several robots in one ``dta run``: one Stream connection and one store per robot, one
health port. A robot whose credentials DingTalk refuses, or whose store is lost, is named
by ``/readyz`` while the others go on answering; the process exits 3 only when every
robot's store is lost."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk

pytestmark = pytest.mark.slow


def robot(fake: FakeDingTalk, code: str, **keys: Any) -> dict[str, Any]:
    """A ``[[robots]]`` table with the robot's own app on the fake (``keys`` win)."""
    app = fake.add_robot(code)
    return {"robot_code": code, "client_id": app.app_key, "client_secret": app.app_secret, **keys}


def from_robot(fake: FakeDingTalk, code: str) -> list[str]:
    return [m.text for m in fake.received if m.robot_code == code]


def readyz(proc: DaemonProcess) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(proc.url("/readyz"), trust_env=False, timeout=2)
    return answer.status_code, answer.json()


@pytest.mark.timeout(90)
async def test_a_robot_whose_credentials_are_refused_does_not_stop_the_other(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    config = {
        "robots": [
            robot(fake, "finance", agent={"name": "小财", "role": "财务助理"}),
            robot(fake, "hr", client_secret="not-the-secret"),
        ]
    }
    proc = DaemonProcess(fake, tmp_path, config)
    try:
        await proc.start(30, robots=["finance"])
        fake.inject({"msg": "m1", "from": "u1", "robot": "finance", "text": "介绍一下你自己"})
        fake.inject({"msg": "m2", "from": "u2", "robot": "finance", "text": "7 + 5 等于多少"})
        assert await until(lambda: len(from_robot(fake, "finance")) == 2, 10), proc.log_tail()
        assert any("小财" in text for text in from_robot(fake, "finance"))
        status, body = readyz(proc)
        assert status == 503 and body["not_ready"] == ["hr"]
        (problem,) = body["problems"]
        assert problem.startswith("hr: stream not connected") and "HTTP 401" in problem
        assert body["robots"]["finance"]["ready"] is True
        metrics = httpx.get(proc.url("/metrics"), trust_env=False).text
        assert 'dta_stream_connected{robot="finance"} 1.0' in metrics
        assert 'dta_stream_connected{robot="hr"} 0.0' in metrics
        # each robot's records in its own file, named after its code
        assert (tmp_path / "finance.db").exists() and (tmp_path / "hr.db").exists()
        with proc.store("finance") as store:
            assert store.work.runs_per_event() == {"m1": 1, "m2": 1}
        with proc.store("hr") as store:
            assert store.work.runs_per_event() == {}
        assert "not-the-secret" not in proc.log_tail(100_000)
    finally:
        await proc.stop()


@pytest.mark.timeout(120)
async def test_a_lost_store_stops_its_robot_alone_and_the_last_one_exits_3(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    config = {"robots": [robot(fake, "finance"), robot(fake, "hr")]}
    proc = DaemonProcess(fake, tmp_path, config)
    try:
        await proc.start(30)
        fake.inject({"msg": "f1", "from": "u1", "robot": "finance", "text": "1 + 1 等于几"})
        fake.inject({"msg": "h1", "from": "u2", "robot": "hr", "text": "2 + 2 等于几"})
        assert await until(lambda: len(fake.received) == 2, 10), proc.log_tail()
        assert fake.received[0].robot_code != fake.received[1].robot_code
        fake.redeliver("h1")  # deduped by hr, the robot that has it
        assert await until(lambda: fake.stream_stats()["unacked"] == 0, 10)
        with proc.store("hr") as store:
            assert store.counts().duplicates == 1

        os.unlink(tmp_path / "finance.db")

        def finance_stopped() -> bool:
            problems = readyz(proc)[1]["robots"]["finance"]["problems"]
            return bool(problems) and problems[0].startswith("store lost (store_deleted")

        assert await until(finance_stopped, 10), proc.log_tail()
        status, body = readyz(proc)
        assert status == 503 and body["not_ready"] == ["finance"]
        fake.inject({"msg": "h2", "from": "u2", "robot": "hr", "text": "3 + 3 等于几"})
        assert await until(lambda: "3 + 3 = 6" in from_robot(fake, "hr"), 10), proc.log_tail()
        assert proc.running  # one robot lost: the process goes on for the other

        os.unlink(tmp_path / "hr.db")
        assert proc.proc is not None
        assert await until(lambda: not proc.running, 20), proc.log_tail()
        assert proc.proc.returncode == 3
    finally:
        await proc.stop()
