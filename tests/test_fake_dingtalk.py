"""The fake DingTalk over real loopback HTTP: its rules, its faults and its callbacks.

Lab verdicts are only as good as this fake's fidelity, so every rule a runtime leans on
(error styles, what is kept, what a fault does) is pinned here against a started server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

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
from agent.dingtalk.ingest import callback_to_event
from agent.dingtalk.transport import DingTalkTransport
from lab.fake import FakeDingTalk, build_callback, callback_frame
from lab.fake.platform import SESSION_TTL_S
from tests.factories import fake_transport_config

START = 1_700_000_000.0
USERS = {"u1": {"name": "张三", "title": "工程师", "dept_names": ["研发部"]}}
TEXT = {"msgtype": "text", "text": {"content": "你好"}}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
async def fake(clock: VirtualClock) -> AsyncIterator[FakeDingTalk]:
    platform = FakeDingTalk(clock, timeout_fault_s=0.3, users=USERS)
    await platform.start()
    try:
        yield platform
    finally:
        await platform.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        yield client


def hook(fake: FakeDingTalk, group: str | None = None, user: str = "u1") -> str:
    send: dict[str, Any] = {"msg": f"m-{len(fake.inbound)}", "from": user, "text": "hi"}
    if group:
        send["group"] = group
    return build_callback(fake, send, fake.clock.now())["sessionWebhook"]


async def token(fake: FakeDingTalk, http: httpx.AsyncClient) -> str:
    answer = await http.post(
        f"{fake.base_url}/v1.0/oauth2/accessToken",
        json={"appKey": fake.app_key, "appSecret": fake.app_secret},
    )
    return answer.json()["accessToken"]


def oto(fake: FakeDingTalk, **override: Any) -> dict[str, Any]:
    body = {
        "robotCode": fake.robot_code,
        "userIds": ["u1"],
        "msgKey": "sampleText",
        "msgParam": json.dumps({"content": "你好"}),
    }
    return {**body, **override}


async def api(
    fake: FakeDingTalk,
    http: httpx.AsyncClient,
    path: str,
    body: Any,
    tok: str | None = "auto",
    **kw: Any,
) -> httpx.Response:
    headers = {}
    if tok == "auto":
        tok = await token(fake, http)
    if tok is not None:
        headers["x-acs-dingtalk-access-token"] = tok
    return await http.post(f"{fake.base_url}/v1.0/robot/{path}", json=body, headers=headers, **kw)


# ---------------------------------------------------------------------------- lifecycle


async def test_async_context_manager_serves_then_stops(clock) -> None:
    async with FakeDingTalk(clock) as platform:
        url = platform.base_url
        async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
            answer = await client.post(
                f"{url}/v1.0/oauth2/accessToken",
                json={"appKey": platform.app_key, "appSecret": platform.app_secret},
            )
            assert answer.status_code == 200
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        with pytest.raises(httpx.ConnectError):
            await client.post(f"{url}/v1.0/oauth2/accessToken", json={})
    await platform.stop()  # idempotent after the block


def test_the_fake_has_no_import_circle() -> None:
    """Every ``lab.fake`` module imports only modules below it (type-only imports too)."""
    import ast
    from pathlib import Path

    import lab.fake

    folder = Path(lab.fake.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        if path.stem == "__init__":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[path.stem] = {
            node.module.removeprefix("lab.fake.")
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("lab.fake.")
        }
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import circle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for dep in graph.get(name, ()):
            visit(dep, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


# ---------------------------------------------------------------------------- token


async def test_token_issued_then_expires_by_clock(fake, http, clock) -> None:
    answer = await http.post(
        f"{fake.base_url}/v1.0/oauth2/accessToken",
        json={"appKey": "dta-lab-app", "appSecret": "dta-lab-secret"},
    )
    assert answer.status_code == 200 and answer.json()["expireIn"] == 7200
    tok = answer.json()["accessToken"]
    assert (await api(fake, http, "oToMessages/batchSend", oto(fake), tok)).status_code == 200
    clock.advance_to(START + 7200)
    late = await api(fake, http, "oToMessages/batchSend", oto(fake), tok)
    assert late.status_code == 401 and late.json()["code"] == "InvalidAuthentication"


async def test_wrong_secret_is_refused_without_echo(fake, http) -> None:
    answer = await http.post(
        f"{fake.base_url}/v1.0/oauth2/accessToken",
        json={"appKey": "dta-lab-app", "appSecret": "guess-XYZ"},
    )
    assert answer.status_code == 400 and answer.json()["code"] == "invalidClientIdOrSecret"
    assert "guess-XYZ" not in answer.text


async def test_each_robot_speaks_only_as_itself(fake, http) -> None:
    """Several robots on one fake: a token is its app's, and the robotCode it sends with
    must be that app's robot; its messages are recorded as that robot's."""
    hr = fake.add_robot("hr")
    answer = await http.post(
        f"{fake.base_url}/v1.0/oauth2/accessToken",
        json={"appKey": hr.app_key, "appSecret": hr.app_secret},
    )
    hr_token = answer.json()["accessToken"]
    as_other = await api(fake, http, "oToMessages/batchSend", oto(fake), hr_token)
    assert as_other.status_code == 400 and as_other.json()["code"] == "invalidParameter.robotCode"
    own = await api(fake, http, "oToMessages/batchSend", oto(fake, robotCode="hr"), hr_token)
    assert own.status_code == 200
    assert [m.robot_code for m in fake.received] == ["hr"]
    # a callback to hr carries hr's code and chatbot id, and its webhook speaks as hr
    data = build_callback(fake, {"msg": "m9", "from": "u1", "robot": "hr"}, fake.clock.now())
    assert (data["robotCode"], data["chatbotUserId"]) == ("hr", hr.chatbot_user_id)
    sent = await http.post(
        data["sessionWebhook"], json={"msgtype": "text", "text": {"content": "x"}}
    )
    assert sent.json()["errcode"] == 0 and fake.received[-1].robot_code == "hr"
    with pytest.raises(ValueError, match="no robot 'ops'"):
        build_callback(fake, {"msg": "m10", "from": "u1", "robot": "ops"}, fake.clock.now())


# ---------------------------------------------------------------------------- webhook


async def test_webhook_send_is_recorded_with_at_users(fake, http) -> None:
    body = {
        "msgtype": "markdown",
        "markdown": {"title": "T", "text": "**hi**"},
        "at": {"atUserIds": ["u1"], "isAtAll": False},
    }
    answer = await http.post(hook(fake, group="cid-g1"), json=body)
    assert answer.json() == {"errcode": 0, "errmsg": "ok"}
    [got] = fake.received
    assert (got.channel, got.conversation_id, got.conversation_type) == (
        "session_webhook",
        "cid-g1",
        "group",
    )
    assert (got.msgtype, got.title, got.text, got.at_user_ids, got.user_ids) == (
        "markdown",
        "T",
        "**hi**",
        ["u1"],
        [],
    )
    assert got.time == START and got.seq == 1


async def test_dm_webhook_targets_the_user(fake, http) -> None:
    await http.post(hook(fake, user="u7"), json=TEXT)
    [got] = fake.received
    assert (got.conversation_id, got.user_ids, got.text) == ("cid-dm-u7", ["u7"], "你好")


async def test_expired_or_unknown_session_is_gone(fake, http, clock) -> None:
    url = hook(fake)
    clock.advance_to(START + SESSION_TTL_S)
    for target in (url, f"{fake.base_url}/robot/sendBySession?session=nope"):
        answer = await http.post(target, json=TEXT)
        assert answer.status_code == 200
        assert answer.json() == {"errcode": 300001, "errmsg": "session 不存在"}
    assert fake.received == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"text": {"content": "x"}}, 40035),
        ({"msgtype": "video", "video": {}}, 40008),
        ({"msgtype": "file", "file": {"media_id": "@lA1"}}, 401102),
        ({"msgtype": "text"}, 40035),
        ({"msgtype": "text", "text": {"content": "  "}}, 40035),
        ({"msgtype": "markdown", "markdown": {"text": "no title"}}, 40035),
        ({**TEXT, "at": {"atUserIds": "u1"}}, 40035),
        ({"msgtype": "text", "text": {"content": "长" * 7000}}, 460101),
        ("not json", 40035),
    ],
)
async def test_webhook_body_validation(fake, http, body: Any, code: int) -> None:
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    answer = await http.post(hook(fake), content=content)
    assert answer.status_code == 200 and answer.json()["errcode"] == code
    assert answer.json()["errmsg"] and fake.received == []


# ---------------------------------------------------------------------------- faults


async def test_webhook_status_fault_counts_down_and_keeps_nothing(fake, http) -> None:
    url = hook(fake)
    fake.arm_fault({"webhook": {"status": 500, "times": 2}})
    statuses = [(await http.post(url, json=TEXT)).status_code for _ in range(3)]
    assert statuses == [500, 500, 200]
    assert len(fake.received) == 1 and fake.faults == []


async def test_delivered_fault_keeps_message_yet_answers_500(fake, http) -> None:
    fake.arm_fault({"webhook": {"status": 500, "delivered": True}})
    answer = await http.post(hook(fake), json=TEXT)
    assert answer.status_code == 500 and answer.json()["errcode"] != 0
    assert len(fake.received) == 1


@pytest.mark.parametrize("delivered", [False, True])
async def test_timeout_fault_makes_client_time_out(fake, http, delivered: bool) -> None:
    fake.arm_fault({"webhook": {"timeout": True, "delivered": delivered}})
    with pytest.raises(httpx.ReadTimeout):
        await http.post(hook(fake), json=TEXT, timeout=httpx.Timeout(5.0, read=0.1))
    assert len(fake.received) == int(delivered)


async def test_timeout_fault_answers_504_to_a_patient_client(fake, http) -> None:
    fake.arm_fault({"webhook": {"timeout": True}})
    assert (await http.post(hook(fake), json=TEXT)).status_code == 504


async def test_expired_fault_is_persistent(fake, http, clock) -> None:
    before = hook(fake)
    fake.arm_fault({"webhook": {"expired": True}})
    data = build_callback(fake, {"msg": "late", "from": "u1"}, clock.now())
    assert data["sessionWebhookExpiredTime"] == (START - 1) * 1000
    for url in (before, data["sessionWebhook"], before):
        assert (await http.post(url, json=TEXT)).json()["errcode"] == 300001
    assert fake.received == []


async def test_openapi_429_carries_retry_after(fake, http) -> None:
    tok = await token(fake, http)
    fake.arm_fault({"openapi": {"status": 429, "times": 2, "retry_after": 1}})
    first = await api(fake, http, "oToMessages/batchSend", oto(fake), tok)
    assert first.status_code == 429 and first.headers["Retry-After"] == "1"
    group = {
        "robotCode": fake.robot_code,
        "openConversationId": "cid-g1",
        "msgKey": "sampleText",
        "msgParam": json.dumps({"content": "x"}),
    }
    assert (await api(fake, http, "groupMessages/send", group, tok)).status_code == 429
    assert (await api(fake, http, "oToMessages/batchSend", oto(fake), tok)).status_code == 200
    assert len(fake.received) == 1


async def test_openapi_qps_limit_is_dingtalks_403(fake, http) -> None:
    """DingTalk throttles the OpenAPI with 403 and a QpsLimit code, keeping nothing."""
    tok = await token(fake, http)
    fake.arm_fault({"openapi": {"qps_limit": True, "times": 2}})
    for _ in range(2):
        answer = await api(fake, http, "oToMessages/batchSend", oto(fake), tok)
        assert answer.status_code == 403
        assert answer.json()["code"] == "Forbidden.AccessDenied.QpsLimitForApi"
    assert fake.received == []
    assert (await api(fake, http, "oToMessages/batchSend", oto(fake), tok)).status_code == 200
    fake.arm_fault({"openapi": {"status": 403, "qps_limit": True, "retry_after": 1}})
    answer = await api(fake, http, "oToMessages/batchSend", oto(fake), tok)
    assert answer.status_code == 403 and answer.headers["Retry-After"] == "1"
    assert len(fake.received) == 1


async def test_transport_retries_a_qps_limit_until_it_passes(fake, clock) -> None:
    config = fake_transport_config(fake)
    transport = DingTalkTransport(config, clock)
    try:
        fake.arm_fault({"openapi": {"status": 403, "qps_limit": True, "times": 2}})
        dm = build_callback(fake, {"msg": "m1", "from": "u1"}, START)
        sent = await transport.deliver(transport.build_request(_intent(dm), Channel.OPENAPI_OTO))
        assert sent.outcome is AttemptOutcome.ACCEPTED and sent.evidence.retries == 2
        assert [m.channel for m in fake.received] == ["openapi_oto"]
        statuses = [r["status"] for r in fake.request_log if "batchSend" in r["path"]]
        assert statuses == [403, 403, 200]
    finally:
        await transport.aclose()


async def test_openapi_delivered_500(fake, http) -> None:
    fake.arm_fault({"openapi": {"status": 503, "delivered": True}})
    answer = await api(fake, http, "oToMessages/batchSend", oto(fake))
    assert answer.status_code == 503 and len(fake.received) == 1


async def test_token_fault(fake, http) -> None:
    fake.arm_fault({"token": {"status": 500}})
    url = f"{fake.base_url}/v1.0/oauth2/accessToken"
    creds = {"appKey": fake.app_key, "appSecret": fake.app_secret}
    assert (await http.post(url, json=creds)).status_code == 500
    assert (await http.post(url, json=creds)).status_code == 200


async def test_identity_faults(fake, http) -> None:
    url = f"{fake.base_url}/topapi/v2/user/get?access_token={await token(fake, http)}"
    fake.arm_fault({"identity": {"status": 500}})
    fake.arm_fault({"identity": {"timeout": True}})
    assert (await http.post(url, json={"userid": "u1"})).status_code == 500
    with pytest.raises(httpx.ReadTimeout):
        await http.post(url, json={"userid": "u1"}, timeout=0.1)
    assert (await http.post(url, json={"userid": "u1"})).json()["errcode"] == 0


def test_disconnect_is_recorded(fake) -> None:
    fake.arm_fault({"disconnect": True})
    assert fake.faults_seen == [{"disconnect": True}] and fake.faults == []


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"webhok": {"status": 500}}, "webhok"),
        ({"webhook": {"status": 500, "tims": 1}}, "tims"),
        ({"token": {"status": 500, "delivered": True}}, "delivered"),
        ({"webhook": {"status": "500"}}, "status"),
        ({"openapi": {"status": 429, "times": 0}}, "times"),
        ({"webhook": {"times": 1}}, "status"),
        ({"webhook": {"expired": True, "status": 500}}, "expired"),
        ({"disconnect": "yes"}, "disconnect"),
        ({"openapi": {"status": 429, "qps_limit": True}}, "qps_limit"),
        ({"openapi": {"qps_limit": True, "delivered": True}}, "qps_limit"),
        ({"openapi": {"qps_limit": "yes"}}, "qps_limit"),
        ({"webhook": {"status": 403, "qps_limit": True}}, "qps_limit"),
    ],
)
def test_bad_fault_specs_are_named(fake, spec: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        fake.arm_fault(spec)
    assert fake.faults == [] and fake.faults_seen == []


# ---------------------------------------------------------------------------- openapi


@pytest.mark.parametrize(
    ("override", "code"),
    [
        ({"robotCode": "other"}, "invalidParameter.robotCode"),
        ({"msgParam": "{not json"}, "invalidParameter.msgParam"),
        ({"msgParam": {"content": "x"}}, "invalidParameter.msgParam"),
        ({"msgParam": json.dumps({"text": "x"})}, "invalidParameter.msgParam"),
        ({"msgKey": "sampleFancy"}, "invalidParameter.msgKey"),
        ({"userIds": [f"u{i}" for i in range(21)]}, "invalidParameter.userIds"),
        ({"userIds": []}, "MissinguserIds"),
    ],
)
async def test_batch_send_validation(fake, http, override: dict[str, Any], code: str) -> None:
    answer = await api(fake, http, "oToMessages/batchSend", oto(fake, **override))
    assert answer.status_code == 400 and answer.json()["code"] == code
    assert fake.received == []


@pytest.mark.parametrize("tok", [None, "bogus"])
async def test_openapi_needs_a_valid_token(fake, http, tok: str | None) -> None:
    answer = await api(fake, http, "oToMessages/batchSend", oto(fake), tok)
    assert answer.status_code == 401 and answer.json()["code"] == "InvalidAuthentication"


async def test_sends_and_readback(fake, http) -> None:
    tok = await token(fake, http)
    md = json.dumps({"title": "周报", "text": "## 完成"})
    sent = await api(
        fake,
        http,
        "oToMessages/batchSend",
        oto(fake, userIds=["u1", "u2"], msgKey="sampleMarkdown", msgParam=md),
        tok,
    )
    assert sent.json()["invalidStaffIdList"] == [] == sent.json()["flowControlledStaffIdList"]
    key = sent.json()["processQueryKey"]
    group = {
        "robotCode": fake.robot_code,
        "openConversationId": "cid-g1",
        "msgKey": "sampleText",
        "msgParam": json.dumps({"content": "大家好"}),
    }
    gkey = (await api(fake, http, "groupMessages/send", group, tok)).json()["processQueryKey"]
    one, two = fake.received
    assert (one.channel, one.user_ids, one.msgtype, one.title, one.process_query_key) == (
        "openapi_oto",
        ["u1", "u2"],
        "markdown",
        "周报",
        key,
    )
    assert (two.channel, two.conversation_id, two.text) == ("openapi_group", "cid-g1", "大家好")

    headers = {"x-acs-dingtalk-access-token": tok}
    url = f"{fake.base_url}/v1.0/robot/oToMessages/readStatus"
    read = await http.get(
        url, params={"robotCode": fake.robot_code, "processQueryKey": key}, headers=headers
    )
    assert read.json() == {
        "sendStatus": "SUCCESS",
        "readStatus": {"readUserIdList": [], "unreadUserIdList": ["u1", "u2"]},
    }
    for unknown in ("nope", gkey):
        bad = await http.get(
            url, params={"robotCode": fake.robot_code, "processQueryKey": unknown}, headers=headers
        )
        assert bad.status_code == 400
    query = {"robotCode": fake.robot_code, "openConversationId": "cid-g1", "processQueryKey": gkey}
    answer = await api(fake, http, "groupMessages/query", query, tok)
    assert answer.json() == {"sendStatus": "SUCCESS", "readUserIds": [], "hasMore": False}
    for wrong in ({"processQueryKey": key}, {"openConversationId": "cid-g2"}):
        assert (
            await api(fake, http, "groupMessages/query", {**query, **wrong}, tok)
        ).status_code == 400


# ---------------------------------------------------------------------------- identity


async def test_user_detail(fake, http) -> None:
    url = f"{fake.base_url}/topapi/v2/user/get"
    tok = await token(fake, http)
    found = (await http.post(url, params={"access_token": tok}, json={"userid": "u1"})).json()
    assert found["errcode"] == 0 and found["result"]["name"] == "张三"
    assert found["result"]["dept_names"] == ["研发部"] and len(found["result"]["dept_id_list"]) == 1
    missing = await http.post(url, params={"access_token": tok}, json={"userid": "ghost"})
    assert missing.json()["errcode"] == 60121
    bad = await http.post(url, params={"access_token": "x"}, json={"userid": "u1"})
    assert bad.json() == {"errcode": 40014, "errmsg": "不合法的access_token"}


# ---------------------------------------------------------------------------- control API


async def test_control_api(fake, http) -> None:
    base = fake.base_url
    await http.post(hook(fake), json=TEXT)
    tok = await token(fake, http)
    received = (await http.get(f"{base}/_lab/received")).json()
    assert [m["text"] for m in received] == ["你好"] and received[0]["seq"] == 1
    log = (await http.get(f"{base}/_lab/requests")).json()
    assert [(r["method"], r["path"], r["status"]) for r in log] == [
        ("POST", "/robot/sendBySession", 200),
        ("POST", "/v1.0/oauth2/accessToken", 200),
    ]
    assert tok not in json.dumps(log) and "session=" not in json.dumps(log)
    bad = await http.post(f"{base}/_lab/faults", json={"webhook": {"oops": 1}})
    assert bad.status_code == 400 and "oops" in bad.json()["error"]
    ok = await http.post(f"{base}/_lab/faults", json={"webhook": {"status": 502}})
    assert ok.status_code == 200 and fake.faults[0].status == 502
    assert (await http.post(f"{base}/_lab/reset")).status_code == 200
    assert fake.received == [] and fake.faults == [] and fake.request_log == []


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/nowhere"), ("GET", "/v1.0/robot/groupMessages/send")]
)
async def test_unknown_routes_are_json_404(fake, http, method: str, path: str) -> None:
    answer = await http.request(method, f"{fake.base_url}{path}")
    assert answer.status_code == 404 and answer.json()["code"] == "InvalidAction.NotFound"


# ---------------------------------------------------------------------------- callbacks


def test_dm_callback(fake) -> None:
    data = build_callback(fake, {"msg": "m1", "from": "u1", "text": "hi", "age": 5}, START)
    assert data["conversationType"] == "1" and data["conversationId"] == "cid-dm-u1"
    assert data["senderId"] == "$:LWCP_v1:$u1" and data["senderNick"] == "u1"
    assert data["createAt"] == (START - 5) * 1000 and data["text"] == {"content": "hi"}
    assert data["sessionWebhookExpiredTime"] == (START + 5400) * 1000
    assert data["isInAtList"] is False and data["atUsers"] == []
    assert "conversationTitle" not in data and fake.inbound["m1"] is data


def test_group_callback_with_mentions(fake) -> None:
    send = {
        "msg": "m1",
        "from": "u1",
        "nick": "张三",
        "group": "cid-g1",
        "text": " 查一下",
        "at_bot": True,
        "at": ["u2"],
    }
    data = build_callback(fake, send, START)
    assert data["conversationType"] == "2" and data["conversationId"] == "cid-g1"
    assert data["conversationTitle"] and data["senderNick"] == "张三"
    assert data["isInAtList"] is True
    assert data["atUsers"] == [
        {"dingtalkId": fake.chatbot_user_id},
        {"dingtalkId": "$:LWCP_v1:$u2", "staffId": "u2"},
    ]
    assert data["robotCode"] == fake.robot_code and data["chatbotCorpId"] == fake.corp_id


def test_quotes(fake) -> None:
    build_callback(fake, {"msg": "m1", "from": "u1", "text": "原话"}, START)
    user_quote = build_callback(
        fake, {"msg": "m2", "from": "u2", "quote": {"msg": "m1"}}, START + 1
    )["text"]
    assert user_quote["isReplyMsg"] is True
    assert user_quote["repliedMsg"] == {
        "msgType": "text",
        "msgId": "m1",
        "senderId": "$:LWCP_v1:$u1",
        "createdAt": START * 1000,
        "content": {"text": "原话"},
    }
    bot = build_callback(fake, {"msg": "m3", "from": "u1", "quote": {"msg": "out-1"}}, START)
    assert bot["text"]["repliedMsg"]["msgId"] == "out-1"
    assert "content" not in bot["text"]["repliedMsg"]
    raw = {"msgId": "x", "msgType": "text", "content": {"text": "raw"}}
    assert (
        build_callback(fake, {"msg": "m4", "from": "u1", "quote": raw}, START)["text"]["repliedMsg"]
        == raw
    )


def test_non_text_and_raw_override(fake) -> None:
    audio = build_callback(
        fake, {"msg": "a", "from": "u1", "msgtype": "audio", "text": "语音"}, START
    )
    assert audio["content"]["recognition"] == "语音" and "text" not in audio
    rich = build_callback(
        fake, {"msg": "r", "from": "u1", "msgtype": "richText", "text": "t"}, START
    )
    assert rich["content"] == {"richText": [{"text": "t"}]}
    raw = build_callback(fake, {"msg": "o", "from": "u1", "raw": {"conversationType": "9"}}, START)
    assert raw["conversationType"] == "9"


@pytest.mark.parametrize(
    ("send", "named"),
    [
        ({"msg": "m", "from": "u", "colour": "red"}, "colour"),
        ({"from": "u"}, "msg"),
        ({"msg": "m"}, "from"),
        ({"msg": "m", "from": "u", "at": "u2"}, "at"),
        ({"msg": "m", "from": "u", "age": -1}, "age"),
        ({"msg": "m", "from": "u", "msgtype": "picture", "quote": {"msg": "x"}}, "quote"),
    ],
)
def test_bad_send_steps_are_named(fake, send: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        build_callback(fake, send, START)
    assert fake.inbound == {}


def test_callback_frame_shape(fake) -> None:
    data = build_callback(fake, {"msg": "m1", "from": "u1", "text": "hi"}, START)
    frame = json.loads(callback_frame(data, "frame-1"))
    assert frame["specVersion"] == "1.0" and frame["type"] == "CALLBACK"
    headers = frame["headers"]
    assert headers["messageId"] == "frame-1" and headers["time"] == str(int(START * 1000))
    assert headers["topic"] == "/v1.0/im/bot/messages/get"
    assert headers["contentType"] == "application/json" and headers["appId"]
    assert json.loads(frame["data"]) == data
    again = json.loads(callback_frame(data))["headers"]["messageId"]
    assert again and again != json.loads(callback_frame(data))["headers"]["messageId"]


# ---------------------------------------------------------------------------- the real client


def _intent(data: dict[str, Any], text: str = "好的") -> ActionIntent:
    """An ActionIntent aimed where ``data`` came from, as the broker would build it."""
    group = data["conversationType"] == "2"
    origin = Origin(
        conversation_id=data["conversationId"],
        conversation_type=ConversationType.GROUP if group else ConversationType.DM,
        user_id=data["senderStaffId"],
        robot_code=data["robotCode"],
        session_webhook=SessionWebhook(
            url=data["sessionWebhook"], expires_at=data["sessionWebhookExpiredTime"] / 1000
        ),
    )
    return ActionIntent(
        intent_id="i1",
        run_id="r1",
        event_id=data["msgId"],
        kind=ActionKind.REPLY,
        idempotency_key="k1",
        target=origin,
        content=MessageContent(msgtype="text", text=text),
        gate_checks=[],
        created_at=START,
    )


async def test_transport_round_trip(fake, clock) -> None:
    """The runtime's own transport is accepted as-is, on both channels, through a 429."""
    # the lab allows exactly the fake's origin
    config = fake_transport_config(fake, webhook_origins=(fake.base_url,))
    transport = DingTalkTransport(config, clock)
    try:
        data = build_callback(
            fake, {"msg": "m1", "from": "u1", "group": "cid-g1", "at_bot": True}, START
        )
        hooked = await transport.deliver(
            transport.build_request(_intent(data), Channel.SESSION_WEBHOOK)
        )
        assert hooked.outcome is AttemptOutcome.ACCEPTED
        fake.arm_fault({"openapi": {"status": 429, "retry_after": 2}})
        dm = build_callback(fake, {"msg": "m2", "from": "u2"}, START)
        sent = await transport.deliver(transport.build_request(_intent(dm), Channel.OPENAPI_OTO))
        assert sent.outcome is AttemptOutcome.ACCEPTED and sent.evidence.retries == 1
        assert clock.now() == START + 2  # the Retry-After was honoured on the virtual clock
        assert sent.evidence.process_query_key == fake.received[1].process_query_key
        assert [(m.channel, m.at_user_ids, m.user_ids) for m in fake.received] == [
            ("session_webhook", ["u1"], []),
            ("openapi_oto", [], ["u2"]),
        ]
        fake.arm_fault({"webhook": {"expired": True}})
        gone = await transport.deliver(
            transport.build_request(_intent(data), Channel.SESSION_WEBHOOK)
        )
        assert gone.outcome is AttemptOutcome.FAILED and gone.session_gone
    finally:
        await transport.aclose()


def test_callbacks_parse_as_the_runtime_reads_them(fake) -> None:
    build_callback(fake, {"msg": "m0", "from": "u2", "text": "原话"}, START)
    data = build_callback(
        fake,
        {
            "msg": "m1",
            "from": "u1",
            "group": "cid-g1",
            "text": "问",
            "at_bot": True,
            "at": ["u2"],
            "quote": {"msg": "m0"},
        },
        START,
    )
    event = callback_to_event(data, START + 1, "frame-1")
    assert (event.event_id, event.conversation.id, event.actor.user_id) == ("m1", "cid-g1", "u1")
    assert event.mentioned and "u2" in event.at_users and event.quote is not None
    assert event.session_webhook is not None
    assert event.session_webhook.expires_at == START + SESSION_TTL_S


def test_calls_are_counted_by_kind_leaving_out_the_gateway_and_the_controls():
    from lab.fake.calls import CALL_KINDS, call_counts

    log = [
        {"path": path}
        for path in (
            "/v1.0/gateway/connections/open",
            "/connect",
            "/_lab/messages",
            "/v1.0/oauth2/accessToken",
            "/topapi/v2/user/get",
            "/robot/sendBySession",
            "/v1.0/robot/oToMessages/batchSend",
            "/v1.0/robot/groupMessages/query",
            "/v1.0/card/streaming",
            "/v1.0/robot/messageFiles/download",
            "/_files/abc",
        )
    ]
    counts = call_counts(log)
    assert set(counts) == {"total", *CALL_KINDS}
    assert counts["total"] == 8  # the file's bytes count in the total, under no kind
    assert (counts["token"], counts["directory"], counts["send"]) == (1, 1, 2)
    assert (counts["readback"], counts["card"], counts["download"]) == (1, 1, 1)
    assert counts["reaction"] == counts["todo"] == 0
