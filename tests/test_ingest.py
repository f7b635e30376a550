import base64
import json

import pytest

from agent.contracts import ConversationType, QuarantineReason
from agent.dingtalk.ingest import (
    KEPT_HEAD_CHARS,
    FrameKind,
    Ingestor,
    frame_text,
    parse_frame,
    peek_frame_message_id,
)
from storage import Store
from tests.factories import T0, callback, frame


def test_dm_callback_becomes_event():
    parsed = parse_frame(frame(callback(text="  7 + 5 等于多少  ")), T0)
    assert parsed.kind is FrameKind.EVENT
    ev = parsed.event
    assert ev.event_id == "m1"
    assert ev.conversation.type is ConversationType.DM
    assert ev.actor.user_id == "u1"
    assert ev.text == "7 + 5 等于多少"
    assert ev.session_webhook.expires_at == pytest.approx(T0 + 5400)
    assert ev.frame_message_id == "f1"


def test_group_mention_and_at_users():
    data = callback(group="cid-g", at_bot=True, atUsers=[{"dingtalkId": "x", "staffId": "u9"}])
    ev = parse_frame(frame(data), T0).event
    assert ev.conversation.type is ConversationType.GROUP
    assert ev.mentioned and ev.at_users == ["u9"]
    assert ev.thread_key == "cid-g|u1"


def test_richtext_and_audio_text_extracted():
    rich = callback(
        msgtype="richText",
        content={"richText": [{"text": "a"}, {"downloadCode": "d"}, {"text": "b"}]},
    )
    rich.pop("text")
    ev = parse_frame(frame(rich), T0).event
    assert ev.text == "ab"
    assert ev.attachments == [{"kind": "picture", "part_of": "message", "downloadCode": "d"}]
    audio = callback(msgtype="audio", content={"recognition": "你好", "downloadCode": "a1"})
    audio.pop("text")
    assert parse_frame(frame(audio), T0).event.text == "你好"


def test_quote_fields_kept_raw():
    data = callback(originalProcessQueryKey="pqk-1")
    data["text"] = {
        "content": "看这个",
        "isReplyMsg": True,
        "repliedMsg": {"msgId": "m0", "content": {"text": "原文"}},
    }
    ev = parse_frame(frame(data), T0).event
    assert ev.quote["repliedMsg"]["msgId"] == "m0"
    assert ev.quote["originalProcessQueryKey"] == "pqk-1"


@pytest.mark.parametrize(
    ("raw", "reason", "fragment"),
    [
        ("this is not json", QuarantineReason.NOT_JSON, "Expecting value"),
        ("[1, 2]", QuarantineReason.BAD_SHAPE, "list"),
        ('{"type": "CALLBACK"}', QuarantineReason.BAD_SHAPE, "headers"),
        (frame("{not json"), QuarantineReason.DATA_NOT_JSON, ""),
        (
            json.dumps(
                {
                    "type": "CALLBACK",
                    "headers": {"topic": "/v1.0/im/bot/messages/get"},
                    "data": {"msgId": "x"},
                }
            ),
            QuarantineReason.DATA_NOT_JSON,
            "string",
        ),
        (frame("[]"), QuarantineReason.BAD_SHAPE, "list"),
        (
            frame({k: v for k, v in callback().items() if k != "msgId"}),
            QuarantineReason.MISSING_FIELD,
            "msgId",
        ),
        (frame(callback(createAt="yesterday")), QuarantineReason.BAD_FIELD, "createAt"),
        (frame(callback(conversationType="3")), QuarantineReason.BAD_FIELD, "conversationType"),
    ],
)
def test_malformed_frames_are_classified(raw, reason, fragment):
    parsed = parse_frame(raw, T0)
    assert parsed.kind is FrameKind.QUARANTINED
    assert parsed.reason is reason
    assert fragment in parsed.error


def test_system_and_other_topics_are_not_events():
    ping = json.dumps(
        {
            "type": "SYSTEM",
            "headers": {"topic": "ping", "messageId": "p"},
            "data": json.dumps({"opaque": "x"}),
        }
    )
    assert parse_frame(ping, T0).kind is FrameKind.SYSTEM
    other = json.dumps({"type": "EVENT", "headers": {"topic": "chat_update"}, "data": "{}"})
    assert parse_frame(other, T0).kind is FrameKind.IGNORED


def test_ingest_stores_event_and_counts_duplicates(store):
    ingestor = Ingestor(store)
    first = ingestor.ingest(frame(callback(), "f1"), T0)
    again = ingestor.ingest(frame(callback(), "f2"), T0 + 61)
    assert first.kind is FrameKind.EVENT
    assert again.kind is FrameKind.DUPLICATE
    assert store.counts().events == 1
    assert store.counts().duplicates == 1
    assert store.events.deliveries("m1") == 2


def test_bad_frame_quarantined_with_reason_and_id(store):
    result = Ingestor(store).ingest(frame("{broken", "f-bad"), T0)
    assert result.kind is FrameKind.QUARANTINED
    rows = store.events.quarantined()
    assert rows[0]["reason"] == "data_not_json"
    assert rows[0]["frame_message_id"] == "f-bad"
    assert rows[0]["raw"].startswith("{")


def test_dedupe_survives_reopening_the_store(tmp_path):
    path = tmp_path / "dta.db"
    first = Store(path)
    Ingestor(first).ingest(frame(callback()), T0)
    first.close()
    reopened = Store(path)
    try:
        assert Ingestor(reopened).ingest(frame(callback(), "f9"), T0).kind is FrameKind.DUPLICATE
        assert reopened.counts().duplicates == 1
    finally:
        reopened.close()


def test_a_duplicate_this_ingestor_never_saw_is_still_one(store):
    """Only msgIds an ingestor stored lately are looked for first; any other duplicate (from
    before a restart, or another replica's) is found by the insert, and undone whole."""
    Ingestor(store).ingest(frame(callback("m1"), "f1"), T0)
    generation = store.events.thread_generation("cid-dm-u1|u1")
    assert generation == 1
    again = Ingestor(store).ingest(frame(callback("m1"), "f2"), T0 + 61)  # a new process
    assert again.kind is FrameKind.DUPLICATE and again.generation == generation
    assert store.events.thread_generation("cid-dm-u1|u1") == generation  # the bump was rolled back
    assert store.counts().events == 1 and store.events.deliveries("m1") == 2


def test_addressed_messages_bump_the_thread_generation(store):
    ingestor = Ingestor(store)
    assert ingestor.ingest(frame(callback("m1")), T0).generation == 1
    assert ingestor.ingest(frame(callback("m2")), T0).generation == 2
    # an un-mentioned group message does not supersede anything
    ingestor.ingest(frame(callback("g1", group="cid-g")), T0)
    assert store.events.thread_generation("cid-g|u1") == 0


# --------------------------------------------------------------------------- size and bytes

LIMIT = 64 * 1024


def big_frame(size: int, message_id: str = "f-big") -> str:
    """A well-formed callback frame of exactly ``size`` bytes (padded in the text)."""
    base = frame(callback("m-big", text=""), message_id)
    padded = frame(callback("m-big", text="x" * (size - len(base))), message_id)
    assert len(padded.encode()) == size
    return padded


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_frame_at_the_limit_is_read_and_one_byte_more_is_quarantined(as_bytes):
    def parse(raw: str):
        return parse_frame(raw.encode() if as_bytes else raw, T0, LIMIT)

    assert parse(big_frame(LIMIT)).kind is FrameKind.EVENT
    over = parse(big_frame(LIMIT + 1))
    assert over.kind is FrameKind.QUARANTINED
    assert over.reason is QuarantineReason.FRAME_TOO_LARGE
    assert over.frame_message_id == "f-big"
    assert f"{LIMIT + 1} bytes, over the {LIMIT}-byte limit" in over.error


def test_the_limit_counts_utf8_bytes_not_characters():
    document = json.loads(frame(callback()))
    document["data"] = json.dumps(callback(text="好" * 30_000), ensure_ascii=False)
    text = json.dumps(document, ensure_ascii=False)  # ~90 kB of UTF-8 in 30 k characters
    assert len(text) < LIMIT < len(text.encode())
    parsed = parse_frame(text, T0, LIMIT)
    assert parsed.reason is QuarantineReason.FRAME_TOO_LARGE


def test_an_oversize_frame_is_stored_as_a_bounded_head(store):
    raw = big_frame(5 * 1024 * 1024, "f-5mb")
    result = Ingestor(store, max_frame_bytes=4 * 1024 * 1024).ingest(raw, T0)
    assert result.kind is FrameKind.QUARANTINED and result.frame_message_id == "f-5mb"
    (row,) = store.events.quarantined()
    assert row["reason"] == "frame_too_large" and row["frame_message_id"] == "f-5mb"
    assert row["raw"] == raw[:KEPT_HEAD_CHARS]
    assert store.counts().events == 0


def test_the_id_of_an_oversize_frame_is_found_at_its_tail_too():
    tail_headers = json.dumps(
        {
            "type": "CALLBACK",
            "data": json.dumps(callback(text="x" * 300_000)),
            "headers": {"topic": "/v1.0/im/bot/messages/get", "messageId": "f-tail"},
        }
    )
    assert parse_frame(tail_headers, T0, LIMIT).frame_message_id == "f-tail"
    no_id = json.dumps({"type": "CALLBACK", "data": "x" * 300_000})
    parsed = parse_frame(no_id, T0, LIMIT)
    assert parsed.reason is QuarantineReason.FRAME_TOO_LARGE and parsed.frame_message_id is None


def test_a_messageid_inside_the_data_is_not_taken_for_the_frames():
    data = callback(text='"headers": {"messageId": "forged"}')
    raw = json.dumps({"type": "CALLBACK", "data": json.dumps(data), "pad": "x" * 300_000})
    assert peek_frame_message_id(raw) is None


def test_binary_frames_are_read_when_utf8_and_quarantined_when_not(store):
    text = frame(callback(text="你好"), "f-bin")
    assert frame_text(text.encode(), None) == text
    assert parse_frame(text.encode(), T0).kind is FrameKind.EVENT
    junk = text.encode()[:-1] + b"\xff\xfe}"
    assert frame_text(junk, None) == junk
    result = Ingestor(store).ingest(junk, T0)
    assert result.reason is QuarantineReason.NOT_UTF8 and result.frame_message_id == "f-bin"
    assert "invalid start byte" in result.error
    (row,) = store.events.quarantined()
    assert row["reason"] == "not_utf8" and base64.b64decode(row["raw"]) == junk


def test_frame_text_leaves_an_oversize_frame_as_bytes():
    data = big_frame(LIMIT + 1).encode()
    assert frame_text(data, LIMIT) is data
    assert isinstance(frame_text(data, LIMIT + 1), str)


def test_a_truncated_frame_still_gives_its_id_for_the_ack():
    truncated = frame(callback(), "f-cut")[:-40]
    parsed = parse_frame(truncated, T0)
    assert parsed.reason is QuarantineReason.NOT_JSON and parsed.frame_message_id == "f-cut"
