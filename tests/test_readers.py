"""Per-msgtype readers, the createAt fallback, quotes in every shape, and the @ of a sender
DingTalk gave no staff id."""

from __future__ import annotations

import json

import pytest

from agent.clock import VirtualClock
from agent.components import invocation_limits, transport_config
from agent.contracts import (
    ActionIntent,
    ActionKind,
    Channel,
    MessageContent,
    Origin,
    QuarantineReason,
)
from agent.dingtalk.callback import FRAME_TIME
from agent.dingtalk.ingest import FrameKind, parse_frame
from agent.dingtalk.readers import quoted_text, read_message, strip_mentions
from agent.dingtalk.transport import DingTalkTransport
from agent.run.invocation import InvocationBuilder
from storage import Store
from tests.factories import BOT_USER, T0, built, callback, event, frame


def test_richtext_at_names_are_removed_as_dingtalk_does_for_text():
    text, pictures = read_message(
        "richText",
        None,
        {
            "richText": [
                {"text": "@小钉 "},
                {"text": "看下这个"},
                {"type": "picture", "downloadCode": "d"},
            ]
        },
        mentions=1,
    )
    assert text == "看下这个" and pictures[0]["kind"] == "picture"
    # only as many @names as were mentioned, and never an e-mail address
    assert strip_mentions("@a @b 写信给 x@y.com", 1) == "@b 写信给 x@y.com"
    assert strip_mentions("@a 你好", 0) == "@a 你好"


def test_at_bot_with_only_a_picture_has_no_text_left():
    data = callback(
        group="cid-g",
        at_bot=True,
        msgtype="richText",
        atUsers=[{"dingtalkId": BOT_USER}],
        content={"richText": [{"text": "@Bot "}, {"downloadCode": "d"}]},
    )
    data.pop("text")
    ev = parse_frame(frame(data), T0).event
    assert ev.text == "" and ev.at_users == [BOT_USER] and len(ev.attachments) == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"text": "a"}, "a"),
        ({"content": "b"}, "b"),
        (
            {
                "richText": [
                    {"msgType": "text", "content": "c"},
                    {"msgType": "emoji", "content": "😀"},
                ]
            },
            "c😀",
        ),
        ({"recognition": "d"}, "d"),
        ({}, ""),
    ],
)
def test_quoted_text_in_every_shape(content, expected):
    assert quoted_text({"content": content}) == expected


def test_a_richtext_quote_lives_under_content():
    data = callback(
        msgtype="richText",
        content={
            "richText": [{"text": "看这个"}],
            "isReplyMsg": True,
            "repliedMsg": {
                "msgId": "q",
                "senderId": "$:LWCP_v1:$u2",
                "msgType": "file",
                "content": {"downloadCode": "dc", "fileName": "a.pdf"},
            },
        },
    )
    data.pop("text")
    ev = parse_frame(frame(data), T0).event
    assert ev.quote["repliedMsg"]["msgId"] == "q"
    assert ev.attachments == [
        {"kind": "file", "part_of": "quote", "downloadCode": "dc", "fileName": "a.pdf"}
    ]


def test_missing_createat_uses_the_frame_time_and_says_so():
    data = callback()
    del data["createAt"]
    raw = json.loads(frame(data))
    raw["headers"]["time"] = str(int(T0 * 1000) - 1500)
    ev = parse_frame(json.dumps(raw), T0).event
    assert ev.created_at == T0 - 1.5 and ev.created_at_source == FRAME_TIME
    raw["headers"].pop("time")
    parsed = parse_frame(json.dumps(raw), T0)
    assert parsed.kind is FrameKind.QUARANTINED
    assert parsed.reason is QuarantineReason.MISSING_FIELD and "createAt" in parsed.error


def _quoting(sender: str):
    data = callback()
    data["text"] = {
        "content": "这个?",
        "isReplyMsg": True,
        "repliedMsg": {"msgId": "x", "senderId": sender},
    }
    return parse_frame(frame(data), T0).event


def test_a_person_s_empty_quote_is_not_called_a_robot_message(tmp_path):
    store = Store(tmp_path / "dta.db")
    try:
        builder = InvocationBuilder(store, VirtualClock(T0), None, built(invocation_limits))
        quote = builder.quote(_quoting("$:LWCP_v1:$u2"))
        assert not quote.from_robot and "robot" not in quote.missing
        assert builder.quote(_quoting(BOT_USER)).from_robot
    finally:
        store.close()


def _intent(ev) -> ActionIntent:
    return ActionIntent(
        intent_id="i1",
        run_id="r1",
        event_id=ev.event_id,
        kind=ActionKind.REPLY,
        idempotency_key="k",
        target=Origin.of(ev),
        content=MessageContent(msgtype="text", text="好的"),
        gate_checks=[],
        created_at=T0,
    )


def test_a_sender_without_staff_id_is_at_by_dingtalk_id():
    transport = DingTalkTransport(
        built(
            transport_config,
            directory_base_url=None,
            openapi_base_url="http://127.0.0.1:9",
            client_id="a",
            client_secret="b",
            robot_code="r",
        ),
        VirtualClock(T0),
    )
    external = event(group="cid-g", at_bot=True, senderStaffId=None, user="x1")
    assert not external.actor.has_staff_id
    body = transport.build_request(_intent(external), Channel.SESSION_WEBHOOK).body
    assert body["at"] == {"atDingtalkIds": ["$:LWCP_v1:$x1"], "isAtAll": False}
    staff = event(group="cid-g", at_bot=True)
    body = transport.build_request(_intent(staff), Channel.SESSION_WEBHOOK).body
    assert body["at"] == {"atUserIds": ["u1"], "isAtAll": False}
    openapi = transport.build_request(_intent(external), Channel.OPENAPI_GROUP)
    assert "no staff id" in (openapi.note or "")
