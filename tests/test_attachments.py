"""Pictures and files out: the gate types them by their bytes, the transport uploads once."""

import asyncio
import json

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.components import action_policy, transport_config
from agent.contracts import (
    AttemptOutcome,
    Channel,
    ConversationType,
    MessageContent,
    Origin,
    RefusalReason,
    SessionWebhook,
)
from agent.crashpoints import Crash, CrashPoints
from agent.dingtalk.transport import DingTalkTransport
from gates.action import ActionFacts, ActionGate, Approval, Refusal, RunTally
from gates.attachments import AttachmentLimits, AttachmentProblem, check_attachments
from lab.eval.cases import Case
from lab.eval.runner import CaseRun
from lab.fixtures.attachments import csv, entry, pdf, png, xlsx
from storage import Store
from tests.factories import ROBOT, T0, built, event, run_for

API = "https://api.test"
OAPI = "https://oapi.test"
LIMITS = AttachmentLimits(per_reply=4, max_bytes=20 * 1024 * 1024)


def items(*files):
    from agent.contracts import OutboundAttachment

    return [OutboundAttachment.model_validate(entry(name, data)) for name, data in files]


def test_each_attachment_is_typed_by_its_bytes_not_its_name():
    checked = check_attachments(
        items(("chart.png", png()), ("export.pdf", pdf()), ("q3.xlsx", xlsx()), ("a.doc", xlsx())),
        LIMITS,
        (),
    )
    assert not isinstance(checked, AttachmentProblem)
    forms = [(c.ref.kind, c.ref.file_type) for c in checked]
    # a zip named .doc is sent as what it is: a zip
    assert forms == [("image", "png"), ("file", "pdf"), ("file", "xlsx"), ("file", "zip")]
    assert checked[0].data == png() and checked[0].ref.size == len(png())


@pytest.mark.parametrize(
    ("files", "limits", "secrets", "reason"),
    [
        ([("rows.png", csv())], LIMITS, (), RefusalReason.ATTACHMENT_UNSUPPORTED),
        (
            [("a.png", b"RIFF\x00\x00\x00\x00WEBPVP8 ")],
            LIMITS,
            (),
            RefusalReason.ATTACHMENT_UNSUPPORTED,
        ),
        ([("a.png", png())] * 3, AttachmentLimits(2, 1 << 20), (), RefusalReason.CONTENT_TOO_LARGE),
        (
            [("big.png", png(pad=3000))],
            AttachmentLimits(4, 1024),
            (),
            RefusalReason.CONTENT_TOO_LARGE,
        ),
        (
            [("a.pdf", pdf("key sk-live-1"))],
            LIMITS,
            ("sk-live-1",),
            RefusalReason.SECRET_IN_CONTENT,
        ),
    ],
    ids=["text-named-png", "webp", "too-many", "too-large", "secret-inside"],
)
def test_what_dingtalk_cannot_take_is_a_problem_with_its_code(files, limits, secrets, reason):
    problem = check_attachments(items(*files), limits, secrets)
    assert isinstance(problem, AttachmentProblem)
    assert problem.reason is reason


def test_broken_base64_is_unsupported():
    from agent.contracts import OutboundAttachment

    bad = [OutboundAttachment(name="a.png", data_base64="***not base64***")]
    problem = check_attachments(bad, LIMITS, ())
    assert isinstance(problem, AttachmentProblem)
    assert problem.reason is RefusalReason.ATTACHMENT_UNSUPPORTED


def facts(**kw):
    base = {"now": T0, "thread_generation": 1, "writes_last_minute": 0, "writes_last_day": 0}
    return ActionFacts(**{**base, **kw})


def decide(raw, **policy):
    policy.setdefault("robot_code", ROBOT)
    gate = ActionGate(built(action_policy, **policy))
    return gate.decide(raw, run_for(event()), RunTally(), facts())


def test_a_reply_with_attachments_is_its_text_then_each_attachment_in_one_slot():
    raw = {
        "kind": "reply",
        "text": "图表和明细",
        "attachments": [entry("chart.png", png()), entry("export.pdf", pdf())],
    }
    approval = decide(raw)
    assert isinstance(approval, Approval)
    kinds = [(i.content.msgtype, i.idempotency_key) for i in approval.intents]
    assert kinds == [("text", "m1:terminal"), ("image", "m1:terminal#2"), ("file", "m1:terminal#3")]
    image = approval.intents[1]
    assert image.content.attachment.name == "chart.png"
    assert approval.payload(image) == png()
    assert approval.payload(approval.intents[0]) is None
    # the intent records what the bytes are, never the bytes
    assert "data_base64" not in image.model_dump_json()


def test_attachments_count_against_the_write_budget():
    raw = {"kind": "reply", "text": "图表", "attachments": [entry("a.png", png())] * 2}
    refused = decide(raw, write_budget_per_conversation_per_minute=2)
    assert isinstance(refused, Refusal) and refused.reason is RefusalReason.WRITE_BUDGET


def test_only_a_reply_carries_attachments():
    raw = {"kind": "ask", "text": "哪张？", "attachments": [entry("a.png", png())]}
    refused = decide(raw)
    assert isinstance(refused, Refusal) and refused.reason is RefusalReason.SCHEMA_INVALID


# ---------------------------------------------------------------------------- on the wire


@pytest.fixture
def transport():
    config = built(
        transport_config,
        openapi_base_url=API,
        oapi_base_url=OAPI,
        directory_base_url=None,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        send_retries=2,
    )
    return DingTalkTransport(config, VirtualClock(T0))


def attachment_intent(kind="image", name="chart.png", data=None):
    approval = decide({"kind": "reply", "text": "x", "attachments": [entry(name, data or png())]})
    assert isinstance(approval, Approval)
    intent = approval.intents[1]
    target = Origin(
        conversation_id="cid-dm",
        conversation_type=ConversationType.DM,
        user_id="u1",
        robot_code="robot-1",
        session_webhook=SessionWebhook(url=f"{OAPI}/robot/sendBySession?s=1", expires_at=T0 + 60),
    )
    return intent.model_copy(update={"target": target}), approval.payload(intent)


def routes():
    token = respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "tok-1", "expireIn": 7200})
    )
    upload = respx.post(f"{OAPI}/media/upload").mock(
        return_value=httpx.Response(200, json={"errcode": 0, "media_id": "@lAmedia1"})
    )
    send = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend")
    return token, upload, send


@respx.mock
async def test_an_attachment_goes_by_the_openapi_after_one_upload(transport):
    _, upload, send = routes()
    send.mock(return_value=httpx.Response(200, json={"processQueryKey": "pqk-1"}))
    intent, payload = attachment_intent()
    # a live session webhook cannot carry it: the OpenAPI does
    assert transport.channel_for_intent(intent) is Channel.OPENAPI_OTO
    request = transport.build_request(intent, Channel.OPENAPI_OTO, payload)
    digest = request.digest
    delivery = await transport.deliver(request)
    assert delivery.outcome is AttemptOutcome.ACCEPTED
    assert delivery.evidence.media_id == "@lAmedia1"
    sent = upload.calls.last.request
    assert sent.url.params["type"] == "image" and sent.url.params["access_token"] == "tok-1"
    assert png() in sent.content and b'name="media"' in sent.content
    body = json.loads(send.calls.last.request.content)
    assert body["msgKey"] == "sampleImageMsg"
    assert json.loads(body["msgParam"]) == {"photoURL": "@lAmedia1"}
    assert request.digest == digest  # the attempt's digest covers the bytes, stored before I/O


@respx.mock
async def test_a_file_message_names_its_type(transport):
    _, _, send = routes()
    send.mock(return_value=httpx.Response(200, json={"processQueryKey": "pqk-1"}))
    intent, payload = attachment_intent(name="导出", data=pdf())
    await transport.deliver(transport.build_request(intent, Channel.OPENAPI_OTO, payload))
    param = json.loads(json.loads(send.calls.last.request.content)["msgParam"])
    assert param == {"mediaId": "@lAmedia1", "fileName": "导出.pdf", "fileType": "pdf"}


@respx.mock
async def test_a_refused_upload_is_a_definite_failure_and_nothing_is_sent(transport):
    _, upload, send = routes()
    upload.mock(
        return_value=httpx.Response(200, json={"errcode": 40004, "errmsg": "不合法的媒体文件类型"})
    )
    intent, payload = attachment_intent()
    delivery = await transport.deliver(
        transport.build_request(intent, Channel.OPENAPI_OTO, payload)
    )
    assert delivery.outcome is AttemptOutcome.FAILED and delivery.upload_failed
    assert delivery.evidence.errcode == 40004 and "不合法" in delivery.evidence.errmsg
    assert not send.called


@respx.mock
async def test_an_upload_that_never_answers_is_failed_not_uncertain(transport):
    _, upload, send = routes()
    upload.mock(side_effect=httpx.ReadTimeout("slow"))
    intent, payload = attachment_intent()
    delivery = await transport.deliver(
        transport.build_request(intent, Channel.OPENAPI_OTO, payload)
    )
    # nothing can have reached the person without a message naming the media
    assert delivery.outcome is AttemptOutcome.FAILED and delivery.upload_failed
    assert not send.called


@respx.mock
async def test_a_throttled_send_is_retried_without_uploading_again(transport):
    _, upload, send = routes()
    send.side_effect = [
        httpx.Response(429, json={"code": "Throttling"}),
        httpx.Response(200, json={"processQueryKey": "pqk-2"}),
    ]
    intent, payload = attachment_intent()
    delivery = await transport.deliver(
        transport.build_request(intent, Channel.OPENAPI_OTO, payload)
    )
    assert delivery.outcome is AttemptOutcome.ACCEPTED and delivery.evidence.retries == 1
    assert upload.call_count == 1 and send.call_count == 2


def test_without_openapi_credentials_an_attachment_has_no_channel():
    config = built(
        transport_config, client_secret=None, directory_base_url=None, webhook_origins=(OAPI,)
    )
    transport = DingTalkTransport(config, VirtualClock(T0))
    intent, _ = attachment_intent()
    assert transport.channel_for_intent(intent) is Channel.NONE
    text = intent.model_copy(update={"content": MessageContent(msgtype="text", text="x")})
    assert transport.channel_for_intent(text) is Channel.SESSION_WEBHOOK


# ---------------------------------------------------------------------------- after a crash


class CrashOnSecondAttempt(CrashPoints):
    """Dies at the second send's ``after_attempt_started``: the attachment's, after the text."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def hit(self, point):  # type: ignore[no-untyped-def]
        if point == "after_attempt_started":
            self.seen += 1
            if self.seen == 2:
                raise Crash(point)


def test_a_crash_while_sending_an_attachment_leaves_the_run_done_and_sends_nothing_twice(
    tmp_path,
):
    case = Case.model_validate(
        {
            "schema": "dta.lab.case/1",
            "id": "attachment-crash",
            "category": "workspace-and-artifacts",
            "title": "a crash between the text and its picture",
            "fixtures": {
                "provider_script": {
                    "m1": [
                        {
                            "kind": "reply",
                            "text": "图表如下。",
                            "attachments": [entry("a.png", png())],
                        }
                    ]
                }
            },
            "steps": [{"at": 0, "send": {"msg": "m1", "from": "u1", "text": "把图表发我"}}],
            "expect": {"processed": ["m1"]},
        }
    )
    run = CaseRun(case, tmp_path)
    run.crash = CrashOnSecondAttempt()
    result = asyncio.run(run.run())
    assert result.error is None, result.error
    with Store(tmp_path / "dta.db") as store:
        assert store.events.get_run("m1").state.value == "done"  # the words reached the person
        statuses = sorted(r.status.value for r in store.actions.receipts("m1"))
    assert statuses == ["accepted", "uncertain"]  # the picture's cut attempt, owned up to
    assert [m.msgtype for m in run.fake.received] == ["text"]  # nothing sent twice
