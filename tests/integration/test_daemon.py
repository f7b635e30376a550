"""The daemon as operators run it: a subprocess on real sockets, the real dingtalk-stream
client, against the fake DingTalk (HTTP + websocket gateway) running in the test."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk
from storage import Store

ROOT = Path(__file__).resolve().parents[2]


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


async def eventually(check, timeout: float = 10.0, interval: float = 0.05) -> bool:
    return await until(check, timeout, interval)


@pytest.fixture
async def daemon(fake: FakeDingTalk, tmp_path: Path) -> AsyncIterator[DaemonProcess]:
    proc = DaemonProcess(fake, tmp_path, {"log_level": "INFO"}, record=True)
    await proc.start()
    yield proc
    await proc.stop()


def replies_to(fake: FakeDingTalk, fragment: str) -> int:
    return sum(1 for m in fake.received if fragment in m.text)


async def test_dm_and_group_replies_over_the_stream(fake, daemon):
    fake.inject({"msg": "m1", "from": "u1", "text": "7 + 5 等于多少"})
    fake.inject({"msg": "m2", "from": "u2", "group": "cid-g", "text": "大家好"})
    fake.inject(
        {"msg": "m3", "from": "u3", "group": "cid-g", "at_bot": True, "text": "(3+4)×6 是多少"}
    )
    assert await eventually(lambda: len(fake.received) >= 2), daemon.log_tail()
    await asyncio.sleep(0.3)
    by_text = {m.text: m for m in fake.received}
    assert len(fake.received) == 2
    assert by_text["7 + 5 = 12"].user_ids == ["u1"]
    group = by_text["(3 + 4) × 6 = 42"]
    assert group.conversation_id == "cid-g" and group.at_user_ids == ["u3"]
    assert await fake.wait_acked(["m1", "m2", "m3"], timeout=5)
    metrics = httpx.get(daemon.url("/metrics"), trust_env=False).text
    robot = f'robot="{fake.robot_code}"'  # every sample names its robot
    assert f'dta_decisions{{reason="group_not_mentioned",{robot},verdict="silent"}} 1.0' in metrics
    assert f"dta_stream_connected{{{robot}}} 1.0" in metrics
    assert f"dta_oldest_unfinished_event_age_seconds{{{robot}}} 0.0" in metrics  # nothing waits
    # the latencies the connector and the runtime observe: three acks, three finished runs
    assert f"dta_ack_latency_seconds_count{{{robot}}} 3.0" in metrics
    assert f"dta_run_latency_seconds_count{{{robot}}} 3.0" in metrics


async def test_redelivery_is_acked_and_not_answered_again(fake, daemon):
    fake.inject({"msg": "m1", "from": "u1", "text": "1 + 1 等于几"})
    assert await eventually(lambda: len(fake.received) == 1)
    fake.redeliver("m1")
    fake.redeliver("m1")
    assert await eventually(lambda: fake.stream_stats()["unacked"] == 0)
    await asyncio.sleep(0.3)
    assert len(fake.received) == 1
    store = daemon.store()
    assert store.counts().duplicates == 2 and store.work.runs_per_event() == {"m1": 1}
    store.close()


async def test_reconnects_after_the_connection_drops(fake, daemon):
    connects = len(fake.stream_stats()["connections"])
    fake.arm_fault({"stream": {"drop": True}})
    assert await eventually(
        lambda: len(fake.stream_stats()["connections"]) > connects and fake.connected, timeout=10
    ), daemon.log_tail()
    fake.inject({"msg": "m1", "from": "u1", "text": "2 + 2 等于几"})
    assert await eventually(lambda: replies_to(fake, "= 4") == 1), daemon.log_tail()


async def test_zombie_socket_is_detected_and_nothing_is_lost(fake, daemon):
    connects = len(fake.stream_stats()["connections"])
    fake.arm_fault({"stream": {"zombie": True}})
    # sent into the silent socket: never acked there, redelivered on the next connection
    fake.inject({"msg": "m1", "from": "u1", "text": "3 + 3 等于几"})
    assert await eventually(
        lambda: len(fake.stream_stats()["connections"]) > connects, timeout=10
    ), daemon.log_tail()
    assert await eventually(lambda: replies_to(fake, "= 6") == 1, timeout=10), daemon.log_tail()
    await asyncio.sleep(1.5)
    assert replies_to(fake, "= 6") == 1


async def test_kill9_mid_stream_then_restart_loses_and_duplicates_nothing(fake, daemon):
    count = 200
    for i in range(count):
        fake.inject({"msg": f"k{i}", "from": f"u{i}", "text": f"{i} + 1000 等于多少"})
    await eventually(lambda: len(fake.received) >= 5, timeout=10, interval=0.002)
    await daemon.kill9()
    answered_before_kill = len(fake.received)
    assert answered_before_kill < count, "the kill came too late to be mid-stream"
    await daemon.start()
    await eventually(lambda: fake.stream_stats()["unacked"] == 0, timeout=15)
    store = daemon.store()
    try:
        assert await eventually(
            lambda: set(store.work.runs_per_event()) >= {f"k{i}" for i in range(count)}, timeout=15
        )
        await eventually(lambda: all(r.state.is_finished for r in _runs(store)), timeout=15)
        assert all(n == 1 for n in store.work.runs_per_event().values())
        assert len(store.events.decisions()) == count
        receipts = store.actions.receipts()
        for i in range(count):
            sent = replies_to(fake, f"{i} + 1000 = {i + 1000}")
            statuses = {r.status.value for r in receipts if r.event_id == f"k{i}"}
            assert sent <= 1, f"k{i} answered {sent} times"
            if "accepted" in statuses:
                assert sent == 1
            else:
                assert "uncertain" in statuses, (f"k{i}", statuses)
    finally:
        store.close()


def _runs(store: Store):
    return [store.events.get_run(event_id) for event_id in store.work.runs_per_event()]


async def test_sigterm_tears_down_cleanly(fake, daemon):
    fake.inject({"msg": "m1", "from": "u1", "text": "5 + 5 等于几"})
    assert await eventually(lambda: len(fake.received) == 1)
    assert await daemon.terminate(timeout=10) == 0
    assert await eventually(lambda: port_is_free(daemon.health_port), timeout=3)
    assert not fake.connected or await eventually(lambda: not fake.connected, timeout=3)
    conn = sqlite3.connect(daemon.store_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert (
            conn.execute("SELECT COUNT(*) FROM attempts WHERE outcome = 'started'").fetchone()[0]
            == 0
        )
        assert conn.execute("SELECT COUNT(*) FROM runs WHERE state = 'working'").fetchone()[0] == 0
    finally:
        conn.close()
    # the recording has every frame, and no secret
    recording = daemon.record.read_text()
    assert '"m1\\' in recording or "m1" in recording
    assert fake.app_secret not in recording


async def test_hostile_frames_never_stop_the_connector(fake, daemon):
    from tests.factories import callback, frame

    hostile = [
        "this is not json",
        '{"type": "CALLBACK", "headers": {"messageId": "p1"}, "x": ' + "1" * 5000 + "}",
        frame("[" * 100_000 + "]" * 100_000, message_id="p2"),
        frame(callback(msg_id="p3", createAt=10**400), message_id="p3"),
        frame(callback(msg_id="p4", text="\ud800"), message_id="p4"),
    ]
    connects = len(fake.stream_stats()["connections"])
    for raw in hostile:
        fake.inject_raw(raw)
    fake.inject({"msg": "m1", "from": "u1", "text": "2 + 3 等于几"})
    assert await eventually(lambda: replies_to(fake, "= 5") == 1), daemon.log_tail()
    assert len(fake.stream_stats()["connections"]) == connects  # same socket throughout
    store = daemon.store()
    try:
        assert store.counts().quarantined == len(hostile)
    finally:
        store.close()
