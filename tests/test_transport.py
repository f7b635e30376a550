"""Transport behaviour against DingTalk's answers, with respx standing in for the network."""

import asyncio
import json

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.components import transport_config
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
from agent.dingtalk.openapi import TokenError
from agent.dingtalk.transport import DingTalkTransport, webhook_origin
from tests.factories import T0, built

API = "https://api.test"
HOOK = "https://oapi.test/robot/sendBySession?session=abc"
ORIGIN = "https://oapi.test"


def intent(
    group: bool = False,
    webhook_expires: float = T0 + 3600,
    text: str = "12",
    hook: str = HOOK,
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
            session_webhook=SessionWebhook(url=hook, expires_at=webhook_expires),
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
    cfg = built(
        transport_config,
        directory_base_url=None,
        openapi_base_url=API,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        send_retries=3,
        read_timeout_s=1,
        webhook_origins=(ORIGIN,),
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

    from agent.dingtalk.transport import _retry_after

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


# ---------------------------------------------------------------------------- webhook origins


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://oapi.dingtalk.com/robot/sendBySession?session=x", "https://oapi.dingtalk.com"),
        ("HTTPS://OAPI.DingTalk.COM:443/robot/sendBySession", "https://oapi.dingtalk.com"),
        ("http://127.0.0.1:80/x", "http://127.0.0.1"),
        ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080"),
        ("http://[::1]:9/x", "http://[::1]:9"),
        ("file:///etc/passwd", None),
        ("ftp://oapi.dingtalk.com/x", None),
        ("//oapi.dingtalk.com/x", None),
        ("not a url", None),
        ("https://oapi.dingtalk.com@evil.test/x", None),  # user info: never DingTalk's
        ("https://oapi.dingtalk.com\\@evil.test/x", None),
        ("https://oapi.dingtalk.com.evil.test/x", "https://oapi.dingtalk.com.evil.test"),
    ],
)
def test_webhook_origin_is_what_httpx_would_contact(url, origin):
    assert webhook_origin(url) == origin


def test_default_config_allows_only_dingtalk(clock):
    transport = DingTalkTransport(
        built(transport_config, directory_base_url=None, openapi_base_url=API), clock
    )
    dingtalk = "https://oapi.dingtalk.com/robot/sendBySession?session=abc"
    assert transport.channel_for(intent(hook=dingtalk).target) is Channel.SESSION_WEBHOOK
    assert transport.channel_for(intent().target) is Channel.NONE  # oapi.test: not allowed


FOREIGN = [
    ("http://127.0.0.1:1/steal?session=abc", "http://127.0.0.1:1"),
    ("file:///etc/passwd", "file://"),
    ("http://oapi.test/robot/sendBySession?session=abc", "http://oapi.test"),  # wrong scheme
    ("https://oapi.test:8443/robot/sendBySession?session=abc", "https://oapi.test:8443"),
    ("https://oapi.test.evil.test/robot/sendBySession?session=abc", "https://oapi.test.evil.test"),
    ("https://oapi.test@evil.test/robot/sendBySession?session=abc", "https://evil.test"),
]


@respx.mock
@pytest.mark.parametrize(("url", "shown"), FOREIGN)
async def test_foreign_webhook_is_never_contacted_reply_goes_by_openapi(transport, url, shown):
    elsewhere = respx.route(host__regex=r"^(?!api\.test$)")  # anything but the OpenAPI
    token_route()
    oto = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(200, json={"processQueryKey": "pqk-1"})
    )
    item = intent(hook=url)
    channel = transport.channel_for(item.target)
    assert channel is Channel.OPENAPI_OTO
    delivery = await deliver(transport, item, channel)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert oto.call_count == 1 and elsewhere.call_count == 0
    assert delivery.evidence.detail == f"session webhook host not allowed: {shown}"
    said = delivery.evidence.model_dump_json()
    assert "session=abc" not in said and "steal" not in said and "passwd" not in said


async def test_allowed_origin_matches_with_explicit_default_port(transport):
    hook = "https://OAPI.test:443/robot/sendBySession?session=abc"
    assert transport.channel_for(intent(hook=hook).target) is Channel.SESSION_WEBHOOK
    assert transport.webhook_problem(intent(hook=hook).target) is None


async def test_foreign_group_webhook_goes_by_group_openapi(transport):
    item = intent(group=True, hook="http://127.0.0.1:1/steal")
    assert transport.channel_for(item.target) is Channel.OPENAPI_GROUP
    request = transport.build_request(item, Channel.OPENAPI_GROUP)
    assert request.note == "session webhook host not allowed: http://127.0.0.1:1"
    assert request.url.startswith(API)


async def test_foreign_webhook_without_openapi_credentials_has_no_channel(clock):
    cfg = built(
        transport_config, directory_base_url=None, openapi_base_url=API, webhook_origins=(ORIGIN,)
    )
    transport = DingTalkTransport(cfg, clock)
    item = intent(hook="file:///etc/passwd")
    assert transport.channel_for(item.target) is Channel.NONE
    assert transport.webhook_problem(item.target) == "session webhook host not allowed: file://"
    assert transport.webhook_problem(intent(webhook_expires=T0).target) == (
        "session webhook expired"
    )


@respx.mock
async def test_a_foreign_webhook_request_built_anyway_is_not_sent(transport):
    foreign = respx.route(host="127.0.0.1")
    item = intent(hook="http://127.0.0.1:1/steal")
    delivery = await deliver(transport, item, Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.FAILED and foreign.call_count == 0
    assert delivery.evidence.detail == "session webhook host not allowed: http://127.0.0.1:1"


# ---------------------------------------------------------------------------- throttling

QPS_LIMITED = {"code": "Forbidden.AccessDenied.QpsLimitForApi", "message": "qps limit"}


@respx.mock
async def test_openapi_qps_limit_403_is_retried_with_backoff(transport, clock):
    token_route()
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        side_effect=[
            httpx.Response(403, json=QPS_LIMITED),
            httpx.Response(403, json=QPS_LIMITED),
            httpx.Response(200, json={"processQueryKey": "pqk-1"}),
        ]
    )
    request = transport.build_request(intent(), Channel.OPENAPI_OTO)
    delivery = await transport.deliver(request)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert send.call_count == 3 and delivery.evidence.retries == 2
    assert clock.now() >= T0 + 2  # a QPS window is a second: never retried sooner
    assert request.may_have_arrived


@respx.mock
async def test_qps_limit_403_honours_retry_after(transport, clock):
    token_route()
    respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        side_effect=[
            httpx.Response(403, json=QPS_LIMITED, headers={"Retry-After": "4"}),
            httpx.Response(200, json={"processQueryKey": "pqk-1"}),
        ]
    )
    delivery = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert clock.now() == pytest.approx(T0 + 4)


@respx.mock
async def test_qps_limit_forever_is_a_definite_failure_never_sent(transport):
    token_route()
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(403, json=QPS_LIMITED)
    )
    request = transport.build_request(intent(), Channel.OPENAPI_OTO)
    delivery = await transport.deliver(request)
    assert delivery.outcome is AttemptOutcome.FAILED
    assert send.call_count == 4 and delivery.evidence.retries == 3
    assert delivery.evidence.http_status == 403
    assert delivery.evidence.errmsg == "qps limit"
    assert delivery.evidence.detail == (
        "throttled (Forbidden.AccessDenied.QpsLimitForApi); retries exhausted"
    )
    assert not request.may_have_arrived  # a throttle is a no: nothing reached anyone


@respx.mock
@pytest.mark.parametrize(
    "body",
    [
        {"code": "Forbidden.AccessDenied.ApiCountLimitForOrg", "message": "monthly quota"},
        {"code": "Forbidden.AccessDenied.AccessTokenPermissionDenied", "message": "no scope"},
        {"message": "QpsLimit in the message only is not DingTalk's throttle code"},
    ],
)
async def test_other_403s_are_not_retried(transport, body):
    token_route()
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(403, json=body)
    )
    delivery = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert delivery.outcome is AttemptOutcome.FAILED and send.call_count == 1


@respx.mock
async def test_webhook_send_too_fast_is_retried(transport, clock):
    route = respx.post(HOOK).mock(
        side_effect=[
            httpx.Response(200, json={"errcode": 130101, "errmsg": "send too fast"}),
            httpx.Response(200, json={"errcode": 0, "errmsg": "ok"}),
        ]
    )
    delivery = await deliver(transport, intent(), Channel.SESSION_WEBHOOK)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert route.call_count == 2 and delivery.evidence.retries == 1


# ---------------------------------------------------------------------------- one token fetch


@respx.mock
async def test_concurrent_sends_share_one_token_fetch(transport, clock):
    release = asyncio.Event()

    async def slow_token(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, json={"accessToken": "tok-1", "expireIn": 7200})

    tokens = respx.post(f"{API}/v1.0/oauth2/accessToken").mock(side_effect=slow_token)
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(200, json={"processQueryKey": "k"})
    )
    sends = [
        asyncio.create_task(deliver(transport, intent(), Channel.OPENAPI_OTO)) for _ in "x" * 10
    ]
    await asyncio.sleep(0.01)
    sends[0].cancel()  # a caller that gives up does not take the fetch down for the others
    release.set()
    done = await asyncio.gather(*sends, return_exceptions=True)
    assert isinstance(done[0], asyncio.CancelledError)
    assert all(d.outcome is AttemptOutcome.ACCEPTED for d in done[1:])
    assert tokens.call_count == 1 and send.call_count == 9
    # expired: again exactly one fetch for everyone
    clock.advance_to(T0 + 7200)
    await asyncio.gather(*(deliver(transport, intent(), Channel.OPENAPI_OTO) for _ in "x" * 5))
    assert tokens.call_count == 2


@respx.mock
async def test_a_failed_token_fetch_fails_every_waiter_and_the_next_call_retries(transport):
    tokens = respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        side_effect=[
            httpx.Response(500, json={"code": "ServiceUnavailable"}),
            httpx.Response(200, json={"accessToken": "tok-2", "expireIn": 7200}),
        ]
    )
    results = await asyncio.gather(
        *(transport.access_token() for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, TokenError) for r in results)
    assert tokens.call_count == 1
    assert await transport.access_token() == "tok-2"
    assert await transport.access_token() == "tok-2"
    assert tokens.call_count == 2


@respx.mock
async def test_a_token_refused_for_a_while_delays_the_send_and_it_goes_once(transport, clock):
    """Credentials revoked for 15 s: nothing can be sent, so the send asks for a token
    again with back-off (token_wait_s) and goes out once it is given — not failed."""
    started = clock.now()

    def token(request: httpx.Request) -> httpx.Response:
        if clock.now() < started + 15:
            return httpx.Response(403, json={"code": "Forbidden.AccessDenied"})
        return httpx.Response(200, json={"accessToken": "tok-back", "expireIn": 7200})

    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(side_effect=token)
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(200, json={"processQueryKey": "pqk-1"})
    )
    delivery = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert delivery.outcome is AttemptOutcome.ACCEPTED and send.call_count == 1
    assert clock.now() >= started + 15


@respx.mock
async def test_a_token_never_given_fails_the_send_as_provably_not_sent(transport, clock):
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(403, json={"code": "Forbidden.AccessDenied"})
    )
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend")
    started = clock.now()
    delivery = await deliver(transport, intent(), Channel.OPENAPI_OTO)
    assert delivery.outcome is AttemptOutcome.FAILED and delivery.evidence.error == "TokenError"
    assert send.call_count == 0 and clock.now() - started >= transport.config.token_wait_s - 5


def test_loading_the_stream_sdk_leaves_the_environment_alone(monkeypatch):
    """Connections open with dta's own request to the configured endpoint; the SDK's own
    endpoint (read from the environment when it is first imported) is never written."""
    from agent.dingtalk.connector import load_sdk

    monkeypatch.delenv("DINGTALK_OPENAPI_ENDPOINT", raising=False)
    load_sdk()
    import os

    assert "DINGTALK_OPENAPI_ENDPOINT" not in os.environ
