"""Proactive work in the real daemon and CLI: a reminder survives kill -9 and restarts and is
delivered once by the OpenAPI; ``dta send`` goes through the gate and prints its receipt."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from agent.contracts import TaskStatus
from lab.daemon import ROOT, DaemonProcess, until
from lab.fake import FakeDingTalk

# An external agent that answers every message with a reminder due in three seconds.
REMIND_SOON = (
    "import json, time, datetime as d; "
    "at = d.datetime.fromtimestamp(time.time() + 3, d.timezone.utc).isoformat(); "
    "print(json.dumps({'kind': 'reply', 'text': '好的，3 秒后提醒你喝水',"
    " 'reminder': {'at': at, 'text': '喝水'}}))"
)


def reminders(fake: FakeDingTalk) -> list[str]:
    return [m.text for m in fake.received if m.text.startswith("提醒")]


async def test_a_reminder_survives_kill9_and_restarts_and_goes_once(fake, tmp_path):
    config = {
        "heartbeat_interval_s": 1,
        "provider": "command",
        "command": [sys.executable, "-c", REMIND_SOON],
    }
    daemon = DaemonProcess(fake, tmp_path, config)
    await daemon.start()
    try:
        fake.inject({"msg": "m1", "from": "u1", "text": "3秒后提醒我喝水"})
        assert await until(lambda: len(fake.received) == 1, 15), daemon.log_tail()
        await daemon.kill9()  # down before the reminder is due
        store = daemon.store()
        try:
            (task,) = store.context.tasks()
            assert (task.kind, task.status) == ("reminder", TaskStatus.SCHEDULED)
        finally:
            store.close()
        await asyncio.sleep(3.5)  # its time passes while no daemon runs
        await daemon.start()
        assert await until(lambda: len(reminders(fake)) == 1, 15), daemon.log_tail()
        (sent,) = [m for m in fake.received if m.text.startswith("提醒")]
        assert sent.channel == "openapi_oto" and sent.user_ids == ["u1"]
        assert await daemon.terminate() == 0
        await daemon.start()
        await asyncio.sleep(2.5)  # several beats of the restarted daemon
        assert reminders(fake) == ["提醒：喝水"]
        store = daemon.store()
        try:
            (task,) = store.context.tasks()
            assert task.status is TaskStatus.COMPLETED
            beats = [r for r in store.actions.receipts() if r.event_id.startswith("beat:")]
            assert beats and {r.reason for r in beats} <= {"heartbeat_idle", "heartbeat_due"}
        finally:
            store.close()
    finally:
        await daemon.stop()


async def _dta(fake: FakeDingTalk, tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    config = tmp_path / "dta.toml"
    config.write_text(f'store_path = "{tmp_path / "dta.db"}"\n', encoding="utf-8")
    env = {
        **{k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
        "DINGTALK_CLIENT_ID": fake.app_key,
        "DINGTALK_CLIENT_SECRET": fake.app_secret,
        "DINGTALK_ROBOT_CODE": fake.robot_code,
        "DINGTALK_OPENAPI_ENDPOINT": fake.base_url,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent.cli.main", "send", "--config", str(config), *argv,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_dta_send_goes_through_the_gate_and_prints_the_receipt(fake, tmp_path):
    code, out, _ = await _dta(fake, tmp_path, "--user", "u1", "今天下午系统维护")
    assert code == 0, out
    assert "reply accepted" in out and "channel=openapi_oto" in out
    (message,) = fake.received
    assert (message.text, message.user_ids) == ("今天下午系统维护", ["u1"])

    code, out, _ = await _dta(fake, tmp_path, "--json", "--group", "cid-g1", "@所有人 明天放假")
    assert code == 1
    (receipt,) = json.loads(out)["receipts"]
    assert (receipt["status"], receipt["reason"]) == ("refused", "at_all")
    assert len(fake.received) == 1

    fake.arm_fault({"recipients": {"flow_controlled": ["u2"]}})
    code, out, _ = await _dta(fake, tmp_path, "--user", "u2", "你好")
    assert code == 1 and "reply failed" in out and "flowControlledStaffIdList: u2" in out
    assert len(fake.received) == 1
