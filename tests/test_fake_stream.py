"""The fake DingTalk's Stream Mode gateway, spoken to by a real websocket client.

The runtime's delivery guarantees (ack only after persisting, dedupe across redeliveries,
surviving dead sockets) are tested only as well as this gateway imitates DingTalk, so each
rule is pinned here over real loopback sockets: tickets, frames, acks, redelivery, SYSTEM
frames, faults and the control API.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote_plus

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus

from agent.clock import VirtualClock
from lab.fake import CALLBACK_TOPIC, FakeDingTalk

START = 1_700_000_000.0
DELAY = 0.2  # redelivery delay: long enough to ack first, short enough to wait out
SEND = {"msg": "m1", "from": "u1", "text": "hi"}

Connect = Callable[[], Awaitable[ClientConnection]]


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
async def make_fake(clock: VirtualClock) -> AsyncIterator[Callable[..., Awaitable[FakeDingTalk]]]:
    started: list[FakeDingTalk] = []

    async def make(**options: Any) -> FakeDingTalk:
        platform = FakeDingTalk(clock, **{"redelivery_delay_s": DELAY, **options})
        await platform.start()
        started.append(platform)
        return platform

    yield make
    for platform in started:
        await platform.stop()


@pytest.fixture
async def fake(make_fake: Callable[..., Awaitable[FakeDingTalk]]) -> FakeDingTalk:
    return await make_fake()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        yield client


async def open_connection(fake: FakeDingTalk, http: httpx.AsyncClient, **override: Any) -> Any:
    body = {
        "clientId": fake.app_key,
        "clientSecret": fake.app_secret,
        "subscriptions": [{"type": "CALLBACK", "topic": CALLBACK_TOPIC}],
        "ua": "dingtalk-sdk-python/v0.24.3-union",
        "localIp": "127.0.0.1",
        **override,
    }
    return await http.post(f"{fake.base_url}/v1.0/gateway/connections/open", json=body)


def ws_connect(endpoint: str, ticket: str) -> Any:
    """As the SDK connects, minus its keepalive (the tests ping by hand)."""
    return websockets.connect(
        f"{endpoint}?ticket={quote_plus(ticket)}", ping_interval=None, close_timeout=0.5
    )


@pytest.fixture
async def connect(fake: FakeDingTalk, http: httpx.AsyncClient) -> AsyncIterator[Connect]:
    clients: list[ClientConnection] = []

    async def connect_once() -> ClientConnection:
        answer = (await open_connection(fake, http)).json()
        client = await ws_connect(answer["endpoint"], answer["ticket"])
        clients.append(client)
        return client

    yield connect_once
    for client in clients:
        await client.close()


async def recv(ws: ClientConnection, timeout: float = 2.0) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def silent(ws: ClientConnection, seconds: float) -> bool:
    """True when nothing arrives for ``seconds`` (cancelling ``recv`` loses nothing)."""
    try:
        await asyncio.wait_for(ws.recv(), seconds)
    except TimeoutError:
        return True
    return False


async def ack(
    ws: ClientConnection, frame: dict[str, Any], code: int = 200, data: Any = None
) -> None:
    """The ack the SDK sends: same messageId, the data as a JSON *string*."""
    body = {
        "code": code,
        "headers": {"contentType": "application/json", "messageId": frame["headers"]["messageId"]},
        "message": "OK",
        "data": json.dumps({"response": "OK"} if data is None else data),
    }
    await ws.send(json.dumps(body))


def record(fake: FakeDingTalk, frame_id: str) -> dict[str, Any]:
    return next(r for r in fake.stream_stats()["frames"] if r["frame_id"] == frame_id)


# ---------------------------------------------------------------------------- open, tickets


async def test_open_hands_out_a_ws_endpoint_and_ticket(fake, http) -> None:
    answer = await open_connection(fake, http)
    port = fake.base_url.rsplit(":", 1)[1]
    assert answer.status_code == 200
    assert answer.json()["endpoint"] == f"ws://127.0.0.1:{port}/connect"
    assert answer.json()["ticket"] and set(answer.json()) == {"endpoint", "ticket"}


@pytest.mark.parametrize(
    ("override", "status"),
    [
        ({"clientSecret": "wrong-secret"}, 401),
        ({"clientId": "someone-else"}, 401),
        ({"subscriptions": None}, 400),
        ({"subscriptions": "CALLBACK"}, 400),
        ({"subscriptions": [{"type": "CALLBACK"}]}, 400),
        ({"subscriptions": [{"type": "", "topic": CALLBACK_TOPIC}]}, 400),
    ],
)
async def test_open_refuses_bad_requests(fake, http, override: dict[str, Any], status: int) -> None:
    answer = await open_connection(fake, http, **override)
    assert answer.status_code == status and "wrong-secret" not in answer.text
    if status == 401:
        assert answer.json()["code"] == "InvalidAuthentication"


async def test_open_refuses_a_body_that_is_not_json(fake, http) -> None:
    url = f"{fake.base_url}/v1.0/gateway/connections/open"
    assert (await http.post(url, content=b"{nope")).status_code == 400


async def test_a_ticket_is_good_for_one_connection(fake, http) -> None:
    answer = (await open_connection(fake, http)).json()
    async with ws_connect(answer["endpoint"], answer["ticket"]):
        assert await fake.wait_connected(1.0)
        for ticket in (answer["ticket"], "made-up", ""):
            with pytest.raises(InvalidStatus) as refused:
                await ws_connect(answer["endpoint"], ticket)
            assert refused.value.response.status_code == 401


async def test_a_ticket_expires_on_the_platform_clock(fake, http, clock) -> None:
    late = (await open_connection(fake, http)).json()
    clock.advance_to(START + 89)
    timely = (await open_connection(fake, http)).json()
    clock.advance_to(START + 91)
    with pytest.raises(InvalidStatus) as refused:
        await ws_connect(late["endpoint"], late["ticket"])
    assert refused.value.response.status_code == 401
    async with ws_connect(timely["endpoint"], timely["ticket"]):
        assert await fake.wait_connected(1.0)


# ---------------------------------------------------------------------------- delivery, acks


async def test_inject_sends_a_callback_frame(fake, connect) -> None:
    ws = await connect()
    sent = fake.inject({**SEND, "group": "cid-g1", "at_bot": True})
    frame = await recv(ws)
    connection_id = fake.stream_stats()["connections"][0]["id"]
    assert (frame["specVersion"], frame["type"]) == ("1.0", "CALLBACK")
    headers = frame["headers"]
    assert headers["topic"] == CALLBACK_TOPIC and headers["messageId"] == sent["frame_message_id"]
    assert headers["connectionId"] == connection_id and headers["time"] == str(int(START * 1000))
    data = json.loads(frame["data"])
    assert sent["msg"] == data["msgId"] == "m1" and data["conversationId"] == "cid-g1"
    assert data == fake.inbound["m1"]


async def test_an_ack_is_recorded_with_its_latency_and_ends_redelivery(fake, connect) -> None:
    ws = await connect()
    sent = fake.inject(SEND)
    await ack(ws, await recv(ws))
    assert await fake.wait_acked(["m1"], 1.0) and await fake.wait_idle(1.0)
    stats = fake.stream_stats()
    kept = record(fake, sent["frame_message_id"])
    assert kept["ack_code"] == 200 and kept["latency_ms"] >= 0 and kept["acked_at"] == START
    assert kept["connection_id"] == stats["connections"][0]["id"] and kept["delivery"] == 1
    assert stats["connections"][0]["acked"] == 1 and stats["unacked"] == 0
    assert stats["ack_latency_ms"]["count"] == 1 and stats["ack_latency_ms"]["max"] >= 0
    assert await silent(ws, DELAY + 0.1)


async def test_an_unacked_callback_comes_back_under_a_new_frame_id(fake, connect) -> None:
    ws = await connect()
    fake.inject(SEND)
    first = await recv(ws)
    again = await recv(ws, DELAY + 0.5)
    assert again["headers"]["messageId"] != first["headers"]["messageId"]
    assert again["data"] == first["data"]
    assert not await fake.wait_acked(["m1"], 0.01)
    await ack(ws, again)
    assert not await fake.wait_acked(["m1"], 0.05)  # the first delivery is still owed an ack
    await ack(ws, first)
    assert await fake.wait_acked(["m1"], 1.0)
    assert [r["delivery"] for r in fake.stream_stats()["frames"]] == [1, 2]


async def test_a_non_200_ack_does_not_count(fake, connect) -> None:
    ws = await connect()
    fake.inject(SEND)
    await ack(ws, await recv(ws), code=500)
    assert not await fake.wait_idle(0.05) and fake.stream_stats()["unacked"] == 1
    assert (await recv(ws, DELAY + 0.5))["type"] == "CALLBACK"


async def test_redelivery_stops_after_max_redeliveries(make_fake, http) -> None:
    fake = await make_fake(redelivery_delay_s=0.05, max_redeliveries=2)
    answer = (await open_connection(fake, http)).json()
    async with ws_connect(answer["endpoint"], answer["ticket"]) as ws:
        fake.inject(SEND)
        ids = {(await recv(ws))["headers"]["messageId"] for _ in range(3)}
        assert len(ids) == 3 and await silent(ws, 0.2)
        assert fake.stream_stats()["unacked"] == 0  # given up, no longer owed


async def test_frames_wait_for_a_connection_in_order(fake, connect) -> None:
    fake.inject(SEND)
    fake.inject({**SEND, "msg": "m2"})
    assert not fake.connected and fake.stream_stats()["queued"] == 2
    ws = await connect()
    frames = [await recv(ws), await recv(ws)]
    connection_id = fake.stream_stats()["connections"][0]["id"]
    assert [json.loads(f["data"])["msgId"] for f in frames] == ["m1", "m2"]
    assert {f["headers"]["connectionId"] for f in frames} == {connection_id}


async def test_the_newest_connection_gets_the_frames(fake, connect) -> None:
    older, newer = await connect(), await connect()
    fake.inject(SEND)
    assert json.loads((await recv(newer))["data"])["msgId"] == "m1"
    assert await silent(older, 0.1)


async def test_stray_acks_are_kept_and_ignored(fake, connect) -> None:
    ws = await connect()
    fake.inject(SEND)
    frame = await recv(ws)
    await ws.send("not an ack")
    await ack(ws, {"headers": {"messageId": "nobody-sent-this"}})
    await ack(ws, frame)
    await ack(ws, frame)
    assert await fake.stream.wait_until(lambda: len(fake.stream.stray_acks) == 3, 1.0)
    assert await fake.wait_acked(["m1"], 1.0)
    reasons = [s["reason"] for s in fake.stream_stats()["stray_acks"]]
    assert reasons == ["malformed ack", "unknown frame", "duplicate ack"]


async def test_inject_raw_sends_text_as_is_and_never_again(fake, connect) -> None:
    ws = await connect()
    fake.inject_raw("this is not json")
    assert await asyncio.wait_for(ws.recv(), 1.0) == "this is not json"
    shaped = {"type": "CALLBACK", "headers": {"messageId": "raw-1"}, "data": "{"}
    assert fake.inject_raw(json.dumps(shaped)) == {"frame_message_id": "raw-1"}
    await ack(ws, await recv(ws))
    assert await silent(ws, DELAY + 0.1)
    assert record(fake, "raw-1")["ack_code"] == 200 and fake.stream_stats()["unacked"] == 0


# ---------------------------------------------------------------------------- SYSTEM frames


async def test_ping_must_be_echoed(fake, connect) -> None:
    ws = await connect()
    assert fake.send_ping() is not None
    ping = await recv(ws)
    assert (ping["type"], ping["headers"]["topic"]) == ("SYSTEM", "ping")
    assert set(ping["headers"]) == {"messageId", "topic", "contentType", "time"}
    await ack(ws, ping, data=json.loads(ping["data"]))
    fake.send_ping()
    careless = await recv(ws)
    await ack(ws, careless, data={})
    await fake.stream.wait_until(
        lambda: record(fake, careless["headers"]["messageId"])["ack_code"] is not None, 1.0
    )
    assert record(fake, ping["headers"]["messageId"])["echo_ok"] is True
    assert record(fake, careless["headers"]["messageId"])["echo_ok"] is False


async def test_periodic_pings(make_fake, http) -> None:
    fake = await make_fake(ping_interval_s=0.05)
    answer = (await open_connection(fake, http)).json()
    async with ws_connect(answer["endpoint"], answer["ticket"]) as ws:
        topics = [(await recv(ws))["headers"]["topic"] for _ in range(2)]
    assert topics == ["ping", "ping"]


async def test_disconnect_moves_new_frames_to_the_next_connection(fake, connect) -> None:
    ws = await connect()
    fake.arm_fault({"disconnect": True})
    bye = await recv(ws)
    assert (bye["type"], bye["headers"]["topic"]) == ("SYSTEM", "disconnect")
    await ack(ws, bye, data=json.loads(bye["data"]))
    await ws.close()  # what the SDK does: close with 1000, then reconnect
    fake.inject(SEND)
    assert not fake.connected and fake.stream_stats()["queued"] == 1
    fresh = await connect()
    assert json.loads((await recv(fresh))["data"])["msgId"] == "m1"
    assert record(fake, bye["headers"]["messageId"])["echo_ok"] is True


# ---------------------------------------------------------------------------- faults


async def test_drop_cuts_the_socket_without_a_close_handshake(fake, connect) -> None:
    ws = await connect()
    fake.arm_fault({"stream": {"drop": True}})
    with pytest.raises(ConnectionClosed) as cut:
        await recv(ws)
    assert cut.value.rcvd is None and ws.close_code != 1000
    assert not fake.connected


async def test_a_zombie_goes_silent_and_its_callbacks_return_elsewhere(fake, connect) -> None:
    ws = await connect()
    fake.inject(SEND)
    lost = await recv(ws)  # received, but the ack will never count
    fake.arm_fault({"stream": {"zombie": True}})
    await ack(ws, lost)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(await ws.ping(), 0.1)
    fake.inject({**SEND, "msg": "m2"})
    assert await silent(ws, 0.05) and not fake.connected
    fresh = await connect()
    frames = [await recv(fresh, DELAY + 1.0), await recv(fresh, DELAY + 1.0)]
    assert sorted(json.loads(f["data"])["msgId"] for f in frames) == ["m1", "m2"]
    assert lost["headers"]["messageId"] not in {f["headers"]["messageId"] for f in frames}
    for frame in frames:
        await ack(fresh, frame)
    assert await fake.wait_acked(["m1", "m2"], 1.0) and await fake.wait_idle(1.0)
    assert fake.stream_stats()["stray_acks"][0]["reason"] == "ack on a zombie connection"


async def test_refuse_answers_503_for_a_while(fake, http) -> None:
    early = (await open_connection(fake, http)).json()
    fake.arm_fault({"stream": {"refuse_s": 0.3}})
    assert (await open_connection(fake, http)).status_code == 503
    with pytest.raises(InvalidStatus) as refused:
        await ws_connect(early["endpoint"], early["ticket"])
    assert refused.value.response.status_code == 503
    for _ in range(100):
        if (await open_connection(fake, http)).status_code == 200:
            break
        await asyncio.sleep(0.02)
    async with ws_connect(early["endpoint"], early["ticket"]):  # refusal did not use it up
        assert await fake.wait_connected(1.0)


def test_stream_faults_with_nothing_connected_are_only_recorded(fake) -> None:
    for spec in ({"stream": {"drop": True}}, {"stream": {"zombie": True}}, {"disconnect": True}):
        fake.arm_fault(spec)
    assert len(fake.faults_seen) == 3
    assert fake.send_ping() is None and fake.send_disconnect() is None


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"stream": {"drop": False}}, "drop"),
        ({"stream": {"zombi": True}}, "zombi"),
        ({"stream": {"drop": True, "zombie": True}}, "zombie"),
        ({"stream": {"refuse_s": 0}}, "refuse_s"),
        ({"stream": {"refuse_s": True}}, "refuse_s"),
        ({"stream": {}}, "stream"),
    ],
)
def test_bad_stream_faults_are_named(fake, spec: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        fake.arm_fault(spec)
    assert fake.faults_seen == []


# ---------------------------------------------------------------------------- control API


async def test_control_api(fake, http, connect) -> None:
    base = fake.base_url
    assert (await http.post(f"{base}/_lab/ping")).status_code == 409
    ws = await connect()
    sent = (await http.post(f"{base}/_lab/messages", json=SEND)).json()
    frame = await recv(ws)
    assert frame["headers"]["messageId"] == sent["frame_message_id"] and sent["msg"] == "m1"
    assert (await http.post(f"{base}/_lab/messages", json={"msg": "m2"})).status_code == 400
    again = (await http.post(f"{base}/_lab/redeliver", json={"msg": "m1"})).json()
    assert (await recv(ws))["headers"]["messageId"] == again["frame_message_id"]
    assert (await http.post(f"{base}/_lab/redeliver", json={"msg": "m9"})).status_code == 404
    assert (await http.post(f"{base}/_lab/redeliver", json={})).status_code == 400
    await http.post(f"{base}/_lab/frames", json={"frame": "{broken"})
    await http.post(f"{base}/_lab/frames", json={"frame": {"type": "EVENT"}})
    assert [await ws.recv(), json.loads(await ws.recv())] == ["{broken", {"type": "EVENT"}]
    assert (await http.post(f"{base}/_lab/frames", json={"x": 1})).status_code == 400
    ping = (await http.post(f"{base}/_lab/ping")).json()
    assert (await recv(ws))["headers"]["messageId"] == ping["frame_message_id"]
    bad = await http.post(f"{base}/_lab/faults", json={"stream": {"zap": True}})
    assert bad.status_code == 400 and "zap" in bad.json()["error"]
    stats = (await http.get(f"{base}/_lab/stream")).json()
    assert stats == fake.stream_stats() and stats["unacked"] == 1
    connection = stats["connections"][0]
    assert {"id", "open", "zombie", "sent", "acked"} <= set(connection) and connection["open"]
    assert set(stats["ack_latency_ms"]) == {"count", "p50", "p99", "max"}
    paths = [r["path"] for r in (await http.get(f"{base}/_lab/requests")).json()]
    assert paths == ["/v1.0/gateway/connections/open"]  # /connect is logged when it ends
    assert (await http.post(f"{base}/_lab/faults", json={"stream": {"zombie": True}})).is_success
    assert fake.stream_stats()["connections"][0]["zombie"]
    assert (await http.post(f"{base}/_lab/reset")).is_success
    assert fake.stream_stats()["frames"] == [] and fake.stream_stats()["unacked"] == 0


# ---------------------------------------------------------------------------- the real client


async def test_the_real_sdk_opens_parses_and_acks(fake, monkeypatch) -> None:
    """The SDK's own open_connection, frame parsing and ack building, minus its endless loop."""
    from dingtalk_stream import (
        AckMessage,
        CallbackHandler,
        ChatbotMessage,
        Credential,
        DingTalkStreamClient,
    )

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    api = f"{fake.base_url}/v1.0/gateway/connections/open"
    monkeypatch.setattr(DingTalkStreamClient, "OPEN_CONNECTION_API", api)
    seen: list[ChatbotMessage] = []

    class Handler(CallbackHandler):
        async def process(self, message: Any) -> tuple[int, str]:
            seen.append(ChatbotMessage.from_dict(message.data))
            return AckMessage.STATUS_OK, "OK"

    client = DingTalkStreamClient(Credential(fake.app_key, fake.app_secret))
    client.register_callback_handler(ChatbotMessage.TOPIC, Handler())
    opened = await asyncio.to_thread(client.open_connection)  # blocking requests, as in the SDK
    assert opened is not None
    async with ws_connect(opened["endpoint"], opened["ticket"]) as ws:
        client.websocket = ws
        fake.inject({**SEND, "text": "你好"})
        ping = fake.send_ping()
        for _ in range(2):
            await client.route_message(json.loads(await asyncio.wait_for(ws.recv(), 2.0)))
        assert await fake.wait_acked(["m1"], 1.0)
        await fake.stream.wait_until(lambda: record(fake, ping)["echo_ok"] is not None, 1.0)
    assert seen[0].message_id == "m1" and seen[0].text.content == "你好"
    assert record(fake, ping)["echo_ok"] is True
    assert fake.stream_stats()["connections"][0]["subscriptions"] == [
        {"type": "CALLBACK", "topic": CALLBACK_TOPIC}
    ]


# ---------------------------------------------------------------------------- shutdown


async def test_stop_closes_sockets_and_leaves_no_tasks(clock, http) -> None:
    fake = FakeDingTalk(clock, redelivery_delay_s=30.0, ping_interval_s=30.0)
    await fake.start()
    answer = (await open_connection(fake, http)).json()
    async with ws_connect(answer["endpoint"], answer["ticket"]) as ws:
        fake.inject(SEND)
        await recv(ws)  # a redelivery timer is now armed
        started = asyncio.get_running_loop().time()
        await fake.stop()
        assert asyncio.get_running_loop().time() - started < 1.0
        with pytest.raises(ConnectionClosed):
            await recv(ws)
        assert ws.close_code == 1001
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []
