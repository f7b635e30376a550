"""Transport behaviour against DingTalk's answers, with respx standing in for the network."""

import json

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    AttemptOutcome,
    Channel,
    ConversationType,
    MessageContent,
    Origin,
    SessionWebhook,
)
from agent.openapi import TransportConfig
from agent.transport import DingTalkTransport
from tests.factories import T0

API = "https://api.test"
HOOK = "https://oapi.test/robot/sendBySession?session=abc"


def intent(
    group: bool = False, webhook_expires: float = T0 + 3600, text: str = "12"
) -> ActionIntent:
    return ActionIntent(
        intent_id="int_1",
        run_id="run_1",
        event_id="m1",
        kind=ActionKind.REPLY,
        idempotency_key="m1:terminal",
        target=Origin(
            conversation_id="cid-g" if group else "cid-dm",
            conversation_type=ConversationType.GROUP if group else ConversationType.DM,
            user_id="u1",
            robot_code="robot-1",
            session_webhook=SessionWebhook(url=HOOK, expires_at=webhook_expires),
        ),
        content=MessageContent(msgtype="text", text=text),
        gate_checks=[],
        created_at=T0,
    )


async def deliver(transport: DingTalkTransport, item: ActionIntent, channel: Channel):
    return await transport.deliver(transport.build_request(item, channel))


@pytest.fixture
def clock():
    return VirtualClock(T0)


@pytest.fixture
def transport(clock):
    cfg = TransportConfig(
        openapi_base_url=API,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        send_retries=3,
        read_timeout_s=1,
    )
    t = DingTalkTransport(cfg, clock)
    yield t


def token_route():
    return respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "tok-1", "expireIn": 7200})
    )


@respx.mock
async def test_webhook_success_in_group_ats_the_asker(transport):
    route = respx.post(HOOK).mock(return_value=httpx.Response(200, json={"errcode": 0}))
    delivery = await deliver(transport, intent(group=True), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    body = json.loads(route.calls.last.request.content)
    assert body == {
        "msgtype": "text",
        "text": {"content": "12"},
        "at": {"atUserIds": ["u1"], "isAtAll": False},
    }
    digest = transport.build_request(intent(group=True), Channel.SESSION_WEBHOOK).digest
    assert len(digest) == 32 and "abc" not in digest  # covers the body, not the session URL


@respx.mock
async def test_429_then_success_honours_retry_after(transport, clock):
    route = respx.post(HOOK).mock(
        side_effect=[
            httpx.Response(429, headers={"Retry-After": "2"}),
            httpx.Response(429, headers={"Retry-After": "3"}),
            httpx.Response(200, json={"errcode": 0}),
        ]
    )
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert route.call_count == 3
    assert delivery.evidence.retries == 2
    assert clock.now() == pytest.approx(T0 + 5)  # slept exactly what DingTalk asked


@respx.mock
async def test_429_forever_is_a_definite_failure(transport):
    respx.post(HOOK).mock(return_value=httpx.Response(429, headers={"Retry-After": "1"}))
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.FAILED
    assert delivery.evidence.http_status == 429
    assert delivery.evidence.retries == 3


@respx.mock
async def test_connect_error_then_success(transport):
    route = respx.post(HOOK).mock(
        side_effect=[httpx.ConnectError("refused"), httpx.Response(200, json={"errcode": 0})]
    )
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert route.call_count == 2


@respx.mock
async def test_read_timeout_is_uncertain_and_not_resent(transport):
    route = respx.post(HOOK).mock(side_effect=httpx.ReadTimeout("slow"))
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.UNCERTAIN
    assert route.call_count == 1
    assert delivery.evidence.error == "ReadTimeout"


@respx.mock
@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_uncertain_and_not_resent(transport, status):
    route = respx.post(HOOK).mock(return_value=httpx.Response(status))
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.UNCERTAIN
    assert route.call_count == 1
    assert delivery.evidence.http_status == status


@respx.mock
async def test_session_gone_is_a_definite_failure(transport):
    respx.post(HOOK).mock(
        return_value=httpx.Response(200, json={"errcode": 300001, "errmsg": "session 不存在"})
    )
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.FAILED
    assert delivery.session_gone
    assert delivery.evidence.errcode == 300001


async def test_expired_webhook_chooses_openapi(transport, clock):
    assert transport.channel_for(intent().target) is Channel.SESSION_WEBHOOK
    assert transport.channel_for(intent(webhook_expires=T0 + 10).target) is Channel.OPENAPI_OTO
    assert transport.channel_for(intent(True, webhook_expires=T0 - 1).target) is (
        Channel.OPENAPI_GROUP
    )


@respx.mock
async def test_openapi_dm_and_group_payloads_with_cached_token(transport):
    tokens = token_route()
    oto = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(200, json={"processQueryKey": "pqk-1"})
    )
    grp = respx.post(f"{API}/v1.0/robot/groupMessages/send").mock(
        return_value=httpx.Response(200, json={"processQueryKey": "pqk-2"})
    )
    d1 = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    d2 = await deliver(transport, intent(group=True), Channel.OPENAPI_GROUP)
    assert (d1.outcome, d1.evidence.process_query_key) == (AttemptOutcome.ACCEPTED, "pqk-1")
    assert d2.evidence.process_query_key == "pqk-2"
    assert tokens.call_count == 1
    req = oto.calls.last.request
    assert req.headers["x-acs-dingtalk-access-token"] == "tok-1"
    body = json.loads(req.content)
    assert body["robotCode"] == "robot-1" and body["userIds"] == ["u1"]
    assert body["msgKey"] == "sampleText"
    assert json.loads(body["msgParam"]) == {"content": "12"}
    assert json.loads(grp.calls.last.request.content)["openConversationId"] == "cid-g"


@respx.mock
async def test_token_refreshed_after_expiry_and_after_401(transport, clock):
    tokens = respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        side_effect=[
            httpx.Response(200, json={"accessToken": "t1", "expireIn": 7200}),
            httpx.Response(200, json={"accessToken": "t2", "expireIn": 7200}),
            httpx.Response(200, json={"accessToken": "t3", "expireIn": 7200}),
        ]
    )
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        side_effect=[
            httpx.Response(200, json={"processQueryKey": "a"}),
            httpx.Response(200, json={"processQueryKey": "b"}),
            httpx.Response(401, json={"code": "InvalidAuthentication"}),
            httpx.Response(200, json={"processQueryKey": "c"}),
        ]
    )
    await deliver(transport, intent(), Channel.OPENAPI_OTO)
    clock.advance_to(T0 + 7200 - 299)  # inside the five-minute margin
    await deliver(transport, intent(), Channel.OPENAPI_OTO)
    d = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert d.outcome is AttemptOutcome.ACCEPTED
    assert tokens.call_count == 3
    assert [c.request.headers["x-acs-dingtalk-access-token"] for c in send.calls] == [
        "t1",
        "t2",
        "t2",
        "t3",
    ]


@respx.mock
async def test_token_failure_is_definite_and_hides_the_secret(transport):
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(
            400, json={"code": "invalidClientIdOrSecret", "message": "appSecret sekret is wrong"}
        )
    )
    d = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert d.outcome is AttemptOutcome.FAILED
    assert "sekret" not in d.evidence.model_dump_json()


@respx.mock
async def test_openapi_4xx_is_failed_and_flow_control_is_failed(transport):
    token_route()
    respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        side_effect=[
            httpx.Response(400, json={"code": "invalidParameter", "message": "bad"}),
            httpx.Response(200, json={"processQueryKey": "k", "flowControlledStaffIdList": ["u1"]}),
        ]
    )
    first = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert first.outcome is AttemptOutcome.FAILED
    d = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert d.outcome is AttemptOutcome.FAILED and "flow" in d.evidence.detail


@respx.mock
async def test_token_timeout_is_a_failure_not_uncertain(transport):
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(side_effect=httpx.ReadTimeout("slow"))
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend")
    d = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert d.outcome is AttemptOutcome.FAILED and send.call_count == 0


@respx.mock
@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (httpx.DecodingError("garbled"), AttemptOutcome.UNCERTAIN),
        (httpx.WriteError("cut"), AttemptOutcome.UNCERTAIN),
        (httpx.UnsupportedProtocol("ftp"), AttemptOutcome.FAILED),
        (httpx.LocalProtocolError("bad header"), AttemptOutcome.FAILED),
    ],
)
async def test_every_http_error_is_classified(transport, error, outcome):
    respx.post(HOOK).mock(side_effect=error)
    d = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert d.outcome is outcome and d.evidence.error == type(error).__name__


def test_retry_after_http_date_is_utc(monkeypatch):
    import time

    from agent.transport import _retry_after

    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        response = httpx.Response(429, headers={"Retry-After": "Thu, 01 Jan 2026 00:00:10 -0000"})
        assert _retry_after(response, 1_767_225_600.0) == pytest.approx(10.0)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@respx.mock
@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (httpx.Response(302, headers={"Location": "https://login"}), AttemptOutcome.UNCERTAIN),
        (httpx.Response(200, text="<html>portal</html>"), AttemptOutcome.UNCERTAIN),
        (httpx.Response(200, json={"errmsg": "ok?"}), AttemptOutcome.UNCERTAIN),
        (httpx.Response(200, json={"errcode": 0}), AttemptOutcome.ACCEPTED),
    ],
)
async def test_only_dingtalks_own_yes_is_accepted_on_the_webhook(transport, answer, outcome):
    respx.post(HOOK).mock(return_value=answer)
    assert (await deliver(transport, intent(), Channel.SESSION_WEBHOOK)).outcome is outcome


@respx.mock
async def test_openapi_yes_needs_a_process_query_key(transport):
    token_route()
    respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(200, json={})
    )
    d = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert d.outcome is AttemptOutcome.UNCERTAIN
