"""Property tests of the ingest boundary: whatever arrives, it is classified and accounted for.

The connector hands ``Ingestor.ingest`` whatever the socket delivered and acks only after it
returns, so an exception here is either a frame DingTalk redelivers forever or a dead
connection; a frame that is stored twice is a reply sent twice. Hence the properties, over
arbitrary text and bytes, arbitrary JSON, frames with a wrong type in each field, missing
fields, huge and non-ASCII strings, and valid callbacks with random mutations:

- ``parse_frame`` and ``Ingestor.ingest`` never raise;
- each frame is exactly one of event / duplicate / quarantined / system / ignored, and the
  store moved by exactly that (one event row, one duplicate delivery, one quarantine row,
  or nothing);
- a quarantined frame is in the quarantine table with its ``QuarantineReason``, its
  (non-empty) error text and its raw text (bytes that are not UTF-8 in base64, and only the
  head of a frame over the size limit);
- bytes are read as UTF-8 or quarantined as ``not_utf8``; with a size limit, a frame is
  ``frame_too_large`` exactly when its UTF-8 size is over it, and its messageId is still
  found for the ack;
- a valid callback is stored once however often it is delivered, with the raw frame of its
  first delivery exactly as received.

Each example gets a fresh SQLite store in a temporary directory (a real file, WAL).
Inputs that currently break ingest are kept out of the generators and pinned as strict
expected failures at the end of the file, so fixing them turns those into passes.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.contracts import QuarantineReason
from agent.dingtalk.ingest import KEPT_HEAD_CHARS, FrameKind, Ingestor, IngestResult, parse_frame
from storage import Store
from tests.factories import T0, callback, frame

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REASONS = {reason.value for reason in QuarantineReason}
REQUIRED = ("msgId", "msgtype", "conversationId", "conversationType", "senderId", "createAt")
OPTIONAL = (
    *("senderStaffId", "senderNick", "senderCorpId", "isAdmin", "conversationTitle"),
    *("chatbotUserId", "robotCode", "isInAtList", "atUsers", "text", "content"),
    *("quoteMessage", "originalMsgId", "originalProcessQueryKey", "sessionWebhook"),
    "sessionWebhookExpiredTime",
)
# What one frame of each kind adds to the store: (events, duplicate deliveries, quarantine).
MOVES = {
    FrameKind.EVENT: (1, 0, 0),
    FrameKind.DUPLICATE: (0, 1, 0),
    FrameKind.QUARANTINED: (0, 0, 1),
    FrameKind.SYSTEM: (0, 0, 0),
    FrameKind.IGNORED: (0, 0, 0),
}
FRAME_FIELDS = ("type", "headers", "headers.messageId", "headers.topic", "data", "specVersion")

# Integers beyond about 10**308 overflow ``createAt / 1000`` and JSON integer literals over
# 4300 digits are refused by Python itself: both are pinned below, so they stay out here.
integers = st.integers(min_value=-(10**300), max_value=10**300)
leaves = st.none() | st.booleans() | integers | st.floats() | st.text(max_size=30)
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@contextmanager
def fresh_store() -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "dta.db")
        try:
            yield store
        finally:
            store.close()


def stored_raw(store: Store, event_id: str) -> str:
    row = store.conn.execute("SELECT raw FROM events WHERE event_id = ?", (event_id,)).fetchone()
    return row[0]


def ingest_and_check(
    store: Store, raw: str | bytes, max_frame_bytes: int | None = None
) -> IngestResult:
    """Ingest one frame and check the store moved by exactly what the result claims."""
    before = store.counts()
    result = Ingestor(store, max_frame_bytes=max_frame_bytes).ingest(raw, T0)
    after = store.counts()
    moved = tuple(getattr(after, k) - getattr(before, k) for k in ("events", "duplicates"))
    moved += (after.quarantined - before.quarantined,)
    assert moved == MOVES[result.kind], (result.kind, moved)
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if result.kind is FrameKind.QUARANTINED:
        row = store.events.quarantined()[-1]
        assert result.reason is not None and row["reason"] == result.reason.value
        assert row["reason"] in REASONS
        assert result.error and row["error"] == result.error
        assert row["frame_message_id"] == result.frame_message_id
        if result.reason is QuarantineReason.NOT_UTF8:
            assert isinstance(raw, bytes) and base64.b64decode(row["raw"]) == raw
        elif result.reason is QuarantineReason.FRAME_TOO_LARGE:
            assert len(row["raw"]) <= KEPT_HEAD_CHARS and text.startswith(row["raw"][:-1])
        else:
            assert row["raw"] == text
    else:
        assert result.reason is None and result.error is None
    if result.kind is FrameKind.EVENT:
        assert result.event is not None
        assert stored_raw(store, result.event.event_id) == text
    return result


def is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_parse(raw: str | bytes) -> None:
    parsed = parse_frame(raw, T0)
    assert parsed.kind in set(FrameKind)
    if parsed.kind is FrameKind.QUARANTINED:
        assert parsed.reason in set(QuarantineReason) and parsed.error
    if parsed.kind is FrameKind.EVENT:
        assert parsed.event is not None


def set_path(document: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        if not isinstance(document.get(key), dict):
            document[key] = {}
        document = document[key]
    document[last] = value


def frame_document(data: Any, message_id: str = "f1") -> dict[str, Any]:
    return json.loads(frame(data, message_id))


# --------------------------------------------------------------------------- strategies


@st.composite
def valid_callbacks(draw: st.DrawFn) -> dict[str, Any]:
    """Callbacks the wire parser must accept: DM or group, unicode throughout."""
    group = draw(st.none() | st.text(min_size=1, max_size=20))
    data = callback(
        msg_id=draw(st.text(min_size=1, max_size=40)),
        user=draw(st.text(min_size=1, max_size=20)),
        text=draw(st.text(max_size=200)),
        group=group,
        at_bot=draw(st.booleans()),
        created_at=draw(st.floats(min_value=0, max_value=4e9)),
    )
    data["senderNick"] = draw(st.text(max_size=20))
    return data


mutations = st.lists(
    st.tuples(
        st.sampled_from(["delete", "replace", "add"]),
        st.sampled_from(REQUIRED + OPTIONAL),
        json_values,
    ),
    min_size=1,
    max_size=4,
)


# --------------------------------------------------------------------------- properties


@FUZZ
@given(st.text() | st.binary())
def test_arbitrary_text_and_bytes(raw: str | bytes) -> None:
    check_parse(raw)
    with fresh_store() as store:
        result = ingest_and_check(store, raw)
    if isinstance(raw, bytes) and not is_utf8(raw):
        assert result.reason is QuarantineReason.NOT_UTF8


@FUZZ
@given(
    valid_callbacks(),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=3000),
    st.integers(min_value=200, max_value=6000),
    st.booleans(),
)
def test_size_limit_is_exact_and_keeps_the_ack(
    data: dict[str, Any], padding: str, limit: int, as_bytes: bool
) -> None:
    data["senderNick"] = padding
    text = frame(data, message_id="f-size")
    raw: str | bytes = text.encode() if as_bytes else text
    size = len(text.encode())
    with fresh_store() as store:
        result = ingest_and_check(store, raw, max_frame_bytes=limit)
    if size > limit:
        assert result.reason is QuarantineReason.FRAME_TOO_LARGE and str(size) in result.error
        assert result.frame_message_id == "f-size"  # so the connector can ack it
    else:
        assert result.kind is FrameKind.EVENT


@FUZZ
@given(st.binary(min_size=1, max_size=200), st.text(min_size=1, max_size=30))
def test_bytes_that_are_not_utf8_keep_their_id(junk: bytes, message_id: str) -> None:
    raw = frame("{}", message_id).encode()[:-1] + b"\xff" + junk + b"}"
    with fresh_store() as store:
        result = ingest_and_check(store, raw)
    assert result.reason is QuarantineReason.NOT_UTF8
    assert result.frame_message_id == message_id


@FUZZ
@given(json_values, st.booleans())
def test_arbitrary_json_documents(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only)
    check_parse(raw)
    with fresh_store() as store:
        result = ingest_and_check(store, raw)
    if not isinstance(value, dict):
        assert result.kind is FrameKind.QUARANTINED
        assert result.reason is QuarantineReason.BAD_SHAPE


@FUZZ
@given(
    st.sampled_from(FRAME_FIELDS + tuple(f"data.{f}" for f in REQUIRED + OPTIONAL)),
    json_values,
)
def test_wrong_type_in_each_field(path: str, value: Any) -> None:
    data = callback(msg_id="m-wrong")
    if path.startswith("data."):
        data[path.removeprefix("data.")] = value
        document = frame_document(data)
    else:
        document = frame_document(data)
        set_path(document, path, value)
    raw = json.dumps(document, ensure_ascii=False)
    check_parse(raw)
    with fresh_store() as store:
        ingest_and_check(store, raw)


@FUZZ
@given(st.sets(st.sampled_from(REQUIRED), min_size=1), st.sets(st.sampled_from(OPTIONAL)))
def test_missing_required_fields_are_quarantined_as_missing(
    required: set[str], optional: set[str]
) -> None:
    data = {k: v for k, v in callback(msg_id="m-missing").items() if k not in required | optional}
    with fresh_store() as store:
        result = ingest_and_check(store, frame(data))
    assert result.kind is FrameKind.QUARANTINED
    assert result.reason is QuarantineReason.MISSING_FIELD
    assert result.error and result.error.split(":")[0] in required


@FUZZ
@given(st.sets(st.sampled_from(("type", "headers"))), st.sampled_from(["CALLBACK", "SYSTEM", "X"]))
def test_frame_envelope_fields(missing: set[str], kind: str) -> None:
    document = frame_document(callback(msg_id="m-env"))
    document["type"] = kind
    for key in missing:
        del document[key]
    with fresh_store() as store:
        result = ingest_and_check(store, json.dumps(document))
    if missing:
        assert result.reason is QuarantineReason.BAD_SHAPE
    elif kind == "SYSTEM":
        assert result.kind is FrameKind.SYSTEM
    elif kind == "X":
        assert result.kind is FrameKind.IGNORED


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["text", "msgId", "senderNick", "conversationId", "unknownField"]),
    st.integers(min_value=10_000, max_value=1_500_000),
    st.characters(exclude_categories=("Cs",)),
)
def test_huge_and_unicode_strings(field: str, length: int, char: str) -> None:
    huge = char * length
    data = callback(msg_id="m-huge")
    if field == "text":
        data["text"] = {"content": huge}
    else:
        data[field] = huge
    raw = frame(data)
    with fresh_store() as store:
        result = ingest_and_check(store, raw)
        assert result.kind is FrameKind.EVENT
        if field == "text":
            assert result.event is not None and result.event.text == huge.strip()


@FUZZ
@given(valid_callbacks(), st.integers(min_value=1, max_value=6), st.booleans())
def test_valid_callback_is_stored_once_however_often_delivered(
    data: dict[str, Any], deliveries: int, as_bytes: bool
) -> None:
    frames = [frame(data, message_id=f"f{n}") for n in range(deliveries)]
    with fresh_store() as store:
        kinds = []
        for raw in frames:
            result = ingest_and_check(store, raw.encode() if as_bytes else raw)
            kinds.append(result.kind)
        assert kinds == [FrameKind.EVENT] + [FrameKind.DUPLICATE] * (deliveries - 1)
        assert store.counts().events == 1 and store.events.deliveries(data["msgId"]) == deliveries
        assert stored_raw(store, data["msgId"]) == frames[0]
        event = store.events.get_event(data["msgId"])
        assert event is not None and event.event_id == data["msgId"]
        assert event.frame_message_id == "f0"


@FUZZ
@given(valid_callbacks(), mutations, st.integers(min_value=1, max_value=3))
def test_mutated_callbacks(data: dict[str, Any], ops: list[Any], deliveries: int) -> None:
    for op, key, value in ops:
        if op == "delete":
            data.pop(key, None)
        elif op == "replace":
            data[key] = value
        else:
            data[f"x-{key}"] = value
    raw = json.dumps(frame_document(data), ensure_ascii=False)
    check_parse(raw)
    with fresh_store() as store:
        results = [ingest_and_check(store, raw) for _ in range(deliveries)]
        if results[0].kind is FrameKind.EVENT:
            assert all(r.kind is FrameKind.DUPLICATE for r in results[1:])
            assert store.counts().events == 1
        else:
            assert all(r.kind is results[0].kind for r in results)
            assert store.counts().events == 0


# --------------------------------------------------------------------------- hostile frames
# Each of these once made ingest raise (and the connector's thread die); all are
# quarantined now.

_DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE = {
    "deeply-nested-frame": _DEEP,
    "deeply-nested-data": frame(_DEEP),
    "int-literal-over-4300-digits-in-frame": '{"type": ' + "1" * 5000 + "}",
    "int-literal-over-4300-digits-in-data": frame('{"msgId": ' + "1" * 5000 + "}"),
    "createAt-beyond-float-range": frame(callback(msg_id="m-o1", createAt=10**400)),
    "webhook-expiry-beyond-float-range": frame(
        callback(msg_id="m-o2", sessionWebhookExpiredTime=10**400)
    ),
    # json.dumps escapes it: the frame is valid UTF-8 and valid JSON, as on the wire.
    "escaped-lone-surrogate-in-text": frame(callback(msg_id="m-s1", text="\ud800")),
}


@pytest.mark.parametrize(
    "raw",
    [pytest.param(raw, id=name) for name, raw in HOSTILE.items()],
)
def test_hostile_frames_are_quarantined_not_raised(raw: str) -> None:
    check_parse(raw)
    with fresh_store() as store:
        ingest_and_check(store, raw)
