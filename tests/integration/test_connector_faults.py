"""The connector under faults, over real loopback sockets against the fake DingTalk.

Each fault here once cost deliveries: a ``--record`` writer that raised dropped every
frame; a frame over the websocket limit dropped the connection on every redelivery; a
binary frame that was not UTF-8 ended the connection as an "unexpected error". And the
store-health monitor needs the connector to stop taking frames (and hold no socket) while
the store cannot take writes. The connector runs on its own thread as in ``dta run``; the
fake runs on the test's loop, and the store is read through a second connection.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType

from agent.components import connector_config
from agent.config import Settings
from agent.contracts import Event
from agent.daemon.recorder import FrameRecorder
from agent.dingtalk.connector import (
    PAUSED_CHECK_FAILED,
    PAUSED_NOT_ACCEPTING,
    Accepting,
    Connector,
    FrameSink,
)
from agent.dingtalk.ingest import KEPT_HEAD_CHARS
from lab.fake import FakeDingTalk
from storage import Store
from tests.environment import unavailable
from tests.factories import callback, frame

MiB = 1024 * 1024
DEV_FULL = Path("/dev/full")

MakeConnector = Callable[..., Awaitable[Connector]]


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def record(fake: FakeDingTalk, frame_id: str) -> dict[str, Any]:
    return next(r for r in fake.stream_stats()["frames"] if r["frame_id"] == frame_id)


def stray_ack_ids(fake: FakeDingTalk) -> list[str | None]:
    """Acks for frames the fake's ledger did not send (e.g. written to the socket by hand)."""
    return [s["frame_id"] for s in fake.stream_stats()["stray_acks"]]


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """Opened (and migrated) before the connector opens its own connection to it."""
    opened = Store(tmp_path / "dta.db")
    yield opened
    opened.close()


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
async def make_connector(
    fake: FakeDingTalk, store: Store, tmp_path: Path, events: list[Event]
) -> AsyncIterator[MakeConnector]:
    started: list[Connector] = []

    async def make(
        on_frame: FrameSink | None = None,
        accepting: Accepting | None = None,
        **config: Any,
    ) -> Connector:
        connector = Connector(
            replace(
                connector_config(Settings(client_id=fake.app_key, client_secret=fake.app_secret)),
                endpoint=fake.base_url,
                store_path=tmp_path / "dta.db",
                ping_interval_s=1.0,
                ping_timeout_s=1.0,
                backoff_base_s=0.05,
                backoff_max_s=0.2,
                accepting_poll_s=0.1,
                **config,
            ),
            on_event=lambda event, generation: events.append(event),
            on_frame=on_frame,
            accepting=accepting,
        )
        connector.start()
        started.append(connector)
        assert await fake.wait_connected(5.0)
        assert await eventually(lambda: connector.connected, 5.0)
        return connector

    yield make
    loop = asyncio.get_running_loop()
    for connector in started:
        assert await loop.run_in_executor(None, connector.stop, 5.0)


def send(fake: FakeDingTalk, msg: str) -> None:
    fake.inject({"msg": msg, "from": "u1", "text": f"hello {msg}"})


# ---------------------------------------------------------------------------- the recorder


def _raising_sink(raw: str | bytes, received_at: float) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("sink", ["raising-sink", "recorder-on-full-disk"])
async def test_a_failing_recorder_never_stops_ingest(
    fake, store, make_connector, events, sink: str, caplog
) -> None:
    if sink == "recorder-on-full-disk" and not DEV_FULL.exists():
        unavailable("needs /dev/full (Linux)")
    recorder = FrameRecorder(DEV_FULL, []) if sink == "recorder-on-full-disk" else None
    with caplog.at_level(logging.WARNING, logger="dta"):
        connector = await make_connector(on_frame=recorder or _raising_sink)
        for n in range(1, 6):
            send(fake, f"m{n}")
        assert await fake.wait_acked([f"m{n}" for n in range(1, 6)], 10.0)
    assert store.counts().events == 5 and len(events) == 5
    assert connector.stats.connects == 1 and connector.stats.disconnects == 0
    if recorder is not None:
        recorder.close()
        assert recorder.failures == 5 and connector.stats.frame_sink_failures == 0
        logged = [r for r in caplog.records if r.name == "dta.recorder"]
    else:
        assert connector.stats.frame_sink_failures == 5
        logged = [r for r in caplog.records if "frame sink failed" in r.getMessage()]
    assert len(logged) == 1  # the first failure; the rest are counted, not logged each


# ---------------------------------------------------------------------------- frame size


async def test_a_5_mib_frame_is_quarantined_acked_and_the_connection_kept(
    fake, store, make_connector, events
) -> None:
    connector = await make_connector()  # max_frame_bytes: the 4 MiB default
    big = frame(callback("m-big", text="x" * (5 * MiB)), "big-1")
    assert fake.inject_raw(big) == {"frame_message_id": "big-1"}
    assert await fake.stream.wait_until(lambda: record(fake, "big-1")["ack_code"] == 200, 10.0)
    (row,) = store.events.quarantined()
    assert row["reason"] == "frame_too_large" and row["frame_message_id"] == "big-1"
    assert row["raw"] == big[:KEPT_HEAD_CHARS]
    assert str(len(big)) in row["error"]
    send(fake, "m-after")
    assert await fake.wait_acked(["m-after"], 5.0)
    assert [e.event_id for e in events] == ["m-after"]
    assert connector.stats.connects == 1 and connector.stats.disconnects == 0
    assert connector.stats.frames["quarantined"] == 1 and connector.connected


async def test_a_frame_beyond_the_socket_ceiling_costs_one_reconnect(
    fake, store, make_connector, events
) -> None:
    """Documented limit: past ``socket_max_bytes`` a frame cannot be read, so not acked."""
    connector = await make_connector(max_frame_bytes=64 * 1024)
    assert connector.config.socket_max_bytes == 256 * 1024
    fake.inject_raw(frame(callback("m-huge", text="x" * (300 * 1024)), "huge-1"))
    assert await eventually(lambda: connector.stats.connects == 2)
    assert connector.stats.oversize_disconnects == 1
    assert record(fake, "huge-1")["ack_code"] is None and store.events.quarantined() == []
    send(fake, "m-after")
    assert await fake.wait_acked(["m-after"], 5.0)
    assert [e.event_id for e in events] == ["m-after"]


# ---------------------------------------------------------------------------- binary frames


async def test_binary_frames_are_read_or_quarantined_and_the_connection_kept(
    fake, store, make_connector, events
) -> None:
    connector = await make_connector()
    socket = fake.stream.current
    assert socket is not None
    junk = frame(callback("m-junk"), "bin-1").encode()[:-1] + b"\xff\xfe}"
    await socket.ws.send_bytes(junk)
    await socket.ws.send_bytes(frame(callback("m-utf8", text="你好"), "bin-2").encode())
    # A *text* frame that is not UTF-8 (a broken proxy): websockets itself would fail the
    # connection with 1007 if the connector let it decode.
    mangled = frame(callback("m-mangled"), "txt-1").encode()[:-1] + b"\xc3}"
    await socket.ws.send_frame(mangled, WSMsgType.TEXT)
    assert await eventually(lambda: {"bin-1", "bin-2", "txt-1"} <= set(stray_ack_ids(fake)))
    rows = store.events.quarantined()
    assert [(r["reason"], r["frame_message_id"]) for r in rows] == [
        ("not_utf8", "bin-1"),
        ("not_utf8", "txt-1"),
    ]
    assert base64.b64decode(rows[0]["raw"]) == junk
    assert [e.event_id for e in events] == ["m-utf8"] and events[0].text == "你好"
    send(fake, "m-after")
    assert await fake.wait_acked(["m-after"], 5.0)
    assert connector.stats.connects == 1 and connector.stats.disconnects == 0


# ---------------------------------------------------------------------------- readiness


async def test_a_frame_arriving_while_not_accepting_is_left_for_redelivery(
    fake, store, make_connector, events
) -> None:
    state: dict[str, Any] = {"ok": True, "flipped_at": float("inf")}
    holder: list[Connector] = []

    def accepting() -> bool:
        # Turns False the moment a frame arrives after the flip, so the frame itself (not
        # the periodic watcher) meets the closed gate.
        last = holder[0].stats.last_frame_at if holder else None
        return state["ok"] or last is None or last <= state["flipped_at"]

    connector = await make_connector(accepting=accepting)
    holder.append(connector)
    state["flipped_at"], state["ok"] = time.time(), False
    send(fake, "m1")
    assert await eventually(lambda: not fake.connected and connector.stats.paused)
    assert connector.stats.refused_while_paused == 1
    assert connector.stats.paused_reason == PAUSED_NOT_ACCEPTING
    assert not connector.connected
    await asyncio.sleep(1.5)  # past the fake's redelivery delay: m1 waits for a connection
    assert store.counts().events == 0 and events == []
    assert connector.stats.connects == 1 and len(fake.stream.connections) == 1
    assert not await fake.wait_acked(["m1"], 0.01)

    state["ok"] = True
    assert await eventually(lambda: connector.stats.connects == 2 and connector.connected)
    assert await fake.wait_acked(["m1"], 10.0)
    assert not connector.stats.paused and connector.stats.paused_reason is None
    assert store.counts().events == 1 and store.events.deliveries("m1") == 1
    assert [e.event_id for e in events] == ["m1"]


async def test_not_accepting_closes_the_socket_and_holds_off_reconnecting(
    fake, store, make_connector, events
) -> None:
    state = {"ok": True, "fail": False}

    def accepting() -> bool:
        if state["fail"]:
            raise RuntimeError("probe exploded")
        return state["ok"]

    connector = await make_connector(accepting=accepting)
    state["ok"] = False
    assert await eventually(lambda: not fake.connected and connector.stats.paused, 5.0)
    assert not connector.connected and connector.stats.paused_reason == PAUSED_NOT_ACCEPTING
    send(fake, "m2")
    await asyncio.sleep(1.0)
    assert fake.stream_stats()["queued"] == 1  # waiting for a connection, not sent
    assert connector.stats.connects == 1 and len(fake.stream.connections) == 1
    assert connector.stats.refused_while_paused == 0 and events == []

    state["fail"] = True  # a readiness check that raises counts as "not ready"
    assert await eventually(lambda: connector.stats.paused_reason == PAUSED_CHECK_FAILED)
    assert connector.stats.connects == 1

    state["fail"], state["ok"] = False, True
    assert await fake.wait_acked(["m2"], 10.0)
    assert connector.stats.connects == 2 and not connector.stats.paused
    assert store.counts().events == 1 and [e.event_id for e in events] == ["m2"]


async def test_without_a_readiness_hook_nothing_pauses(fake, store, make_connector) -> None:
    connector = await make_connector()
    send(fake, "m1")
    assert await fake.wait_acked(["m1"], 5.0)
    assert not connector.stats.paused and connector.connected
    assert store.events.quarantined() == [] and connector.stats.refused_while_paused == 0


# ---------------------------------------------------------------------------- disconnect


async def test_a_system_disconnect_opens_the_next_connection_before_closing_this_one(
    fake, store, make_connector, events
) -> None:
    """DingTalk's SYSTEM disconnect: the next connection is up before the old one closes,
    so pushes just before, during and after the hand-over each land, once."""
    connector = await make_connector()
    for n in range(1, 4):
        send(fake, f"before{n}")
    assert await fake.wait_acked([f"before{n}" for n in range(1, 4)], 10.0)
    fake.stream.send_system("disconnect", {"reason": "lab: server going away"})
    for n in range(1, 6):
        send(fake, f"during{n}")
    assert await eventually(lambda: len(fake.stream.connections) >= 2, 10.0)
    for n in range(1, 4):
        send(fake, f"after{n}")
    wanted = [
        f"{p}{n}" for p, k in (("before", 3), ("during", 5), ("after", 3)) for n in range(1, k + 1)
    ]
    assert await fake.wait_acked(wanted, 10.0)
    assert await eventually(lambda: not fake.stream.connections[0].open, 10.0)
    old, new = fake.stream.connections[:2]
    assert old.closed_mono is not None and new.opened_mono < old.closed_mono, "overlap"
    assert new.open and connector.connected
    assert sorted(e.event_id for e in events) == sorted(wanted)  # each once
    assert await eventually(lambda: connector.stats.disconnects == 1, 5.0)
    assert connector.stats.connects == 2
