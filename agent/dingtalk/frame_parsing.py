"""From a raw Stream Mode frame to a ``ParsedFrame``: an event, a card click, a SYSTEM or
ignored frame, or quarantine with its reason (``agent/dingtalk/ingest.py`` stores it).

``parse_frame`` is pure: it never raises and says exactly what is wrong with a bad frame.
A frame that cannot be read whole (over the size limit, or not UTF-8) still has its frame
``messageId`` found by a bounded look at its ends, so the connector can ack it and DingTalk
stops redelivering what would never parse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agent.contracts import Event, QuarantineReason
from agent.dingtalk.callback import MissingFieldError, callback_to_event, frame_time_s

BOT_MESSAGE_TOPIC = "/v1.0/im/bot/messages/get"
CARD_CALLBACK_TOPIC = "/v1.0/card/instances/callback"  # a button pressed on a card
# Of a frame too large to read, this many characters are kept: enough to see what it was.
KEPT_HEAD_CHARS = 64 * 1024
# A frame that cannot be parsed whole is searched for its messageId only this far from each
# end, so the search costs the same for a 5 MB frame as for a 50 kB one. Header objects are
# flat and short; the bounded gap keeps the regex linear on hostile input.
_ID_WINDOW = 64 * 1024
_HEADER_ID = r'"headers"\s*:\s*\{[^{}]{0,4096}?"messageId"\s*:\s*"((?:[^"\\]|\\.){1,256})"'
_HEADER_ID_TEXT = re.compile(_HEADER_ID)
_HEADER_ID_BYTES = re.compile(_HEADER_ID.encode())


class FrameKind(StrEnum):
    EVENT = "event"  # a new chatbot message, stored
    DUPLICATE = "duplicate"  # a msgId we already have: acked, counted, not processed
    QUARANTINED = "quarantined"  # malformed: stored with the reason, acked
    SYSTEM = "system"  # ping / disconnect
    IGNORED = "ignored"  # a well-formed frame of a topic we do not handle
    CARD_CLICK = "card_click"  # a button on a card (an approval): decided, then acked


@dataclass(frozen=True)
class ParsedFrame:
    kind: FrameKind
    frame_message_id: str | None = None
    event: Event | None = None
    topic: str | None = None
    reason: QuarantineReason | None = None
    error: str | None = None
    # The frame as parsed JSON (SYSTEM, IGNORED and EVENT frames), so whoever routes it
    # next (the SDK, for its ack) need not parse it again.
    document: dict[str, Any] | None = None


# --------------------------------------------------------------------------- wire shapes


class _Wire(BaseModel):
    # DingTalk adds fields over time; unknown ones are kept in the raw frame, not refused.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _FrameHeaders(_Wire):
    messageId: str | None = None
    topic: str | None = None
    time: Any = None  # ms as a string: stands in for a callback without createAt


class _Frame(_Wire):
    type: str
    headers: _FrameHeaders
    data: Any = None


# --------------------------------------------------------------------------- parsing


def _describe(exc: ValidationError) -> tuple[QuarantineReason, str]:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(frame)"
    reason = (
        QuarantineReason.MISSING_FIELD
        if first["type"] == "missing"
        else (QuarantineReason.BAD_FIELD)
    )
    return reason, f"{field}: {first['msg']}"


def frame_text(data: bytes, max_bytes: int | None) -> str | bytes:
    """A frame as it came off the socket, as text when it is UTF-8 within the size limit.

    DingTalk sends text frames, but a proxy may re-frame them as binary; either way the text
    is what gets parsed, stored and recorded. Anything else stays bytes, for ``parse_frame``
    to quarantine with the reason (``frame_too_large`` or ``not_utf8``).
    """
    if max_bytes is not None and len(data) > max_bytes:
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def peek_frame_message_id(raw: str | bytes) -> str | None:
    """The frame's ``headers.messageId`` found near either end, without parsing the frame.

    For frames that cannot be parsed whole (too large, not UTF-8, not JSON): the id is what
    the ack needs, and a bounded regex over the first and last ``_ID_WINDOW`` characters
    finds it at a cost independent of the frame's size. Best effort: None when not found.
    """
    windows = (raw[:_ID_WINDOW], raw[-_ID_WINDOW:]) if len(raw) > 2 * _ID_WINDOW else (raw,)
    for window in windows:
        found = (
            _HEADER_ID_BYTES.search(window)
            if isinstance(window, bytes)
            else _HEADER_ID_TEXT.search(window)
        )
        if found is None:
            continue
        literal = found.group(1)
        try:
            text = literal.decode("utf-8") if isinstance(literal, bytes) else literal
            value = json.loads(f'"{text}"')  # undo JSON escapes, as json.loads would
        except ValueError:  # also UnicodeDecodeError: not an id we could ack
            continue
        if isinstance(value, str) and value:
            return value
    return None


def frame_size(raw: str | bytes) -> int:
    """Bytes on the wire: a text frame is UTF-8 (a lone surrogate counted as if encoded)."""
    if isinstance(raw, bytes):
        return len(raw)
    if raw.isascii():
        return len(raw)
    return len(raw.encode("utf-8", errors="surrogatepass"))


def _headers_id(document: dict[str, Any]) -> str | None:
    headers = document.get("headers")
    value = headers.get("messageId") if isinstance(headers, dict) else None
    return value if isinstance(value, str) and value else None


class _Quarantine(Exception):
    """One step's verdict that the frame is unusable; ``parse_frame`` catches it once."""

    def __init__(self, reason: QuarantineReason, error: str, frame_id: str | None) -> None:
        super().__init__(error)
        self.reason, self.error, self.frame_id = reason, error, frame_id


def parse_frame(raw: str | bytes, received_at: float, max_bytes: int | None = None) -> ParsedFrame:
    """Classify one frame. Never raises: every failure is a quarantine reason with detail.

    With ``max_bytes``, a larger frame is quarantined as ``frame_too_large`` before any
    parsing: reading megabytes of JSON is the cost the limit exists to avoid. Each step
    below either hands on what it read or raises the one ``_Quarantine`` caught here.
    """
    try:
        _check_size(raw, max_bytes)
        document = _document(_text(raw))
        frame = _frame(document)
        kind = _kind(frame)
        if kind is not FrameKind.EVENT:
            topic = frame.headers.topic
            frame_id = frame.headers.messageId
            return ParsedFrame(kind, frame_message_id=frame_id, topic=topic, document=document)
        event = _event(frame, received_at)
    except _Quarantine as bad:
        return ParsedFrame(
            FrameKind.QUARANTINED,
            frame_message_id=bad.frame_id,
            reason=bad.reason,
            error=bad.error,
        )
    frame_id = frame.headers.messageId
    return ParsedFrame(FrameKind.EVENT, frame_message_id=frame_id, event=event, document=document)


def _check_size(raw: str | bytes, max_bytes: int | None) -> None:
    if max_bytes is None or len(raw) * 4 <= max_bytes:  # cheaper checks first
        return
    size = frame_size(raw)
    if size > max_bytes:
        raise _Quarantine(
            QuarantineReason.FRAME_TOO_LARGE,
            f"frame is {size} bytes, over the {max_bytes}-byte limit;"
            f" raw keeps its first {KEPT_HEAD_CHARS} characters",
            peek_frame_message_id(raw),
        )


def _text(raw: str | bytes) -> str:
    if not isinstance(raw, bytes):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Quarantine(
            QuarantineReason.NOT_UTF8,
            f"not UTF-8: {exc.reason} at byte {exc.start}; raw keeps it in base64",
            peek_frame_message_id(raw),
        ) from None


def _document(raw: str) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except (ValueError, TypeError, RecursionError) as exc:
        # ValueError covers bad JSON and integers too long to convert;
        # RecursionError, documents nested deeper than any real frame.
        error = str(exc) or type(exc).__name__
        raise _Quarantine(QuarantineReason.NOT_JSON, error, peek_frame_message_id(raw)) from None
    if not isinstance(document, dict):
        error = f"frame is a JSON {type(document).__name__}, not an object"
        raise _Quarantine(QuarantineReason.BAD_SHAPE, error, None)
    return document


def _frame(document: dict[str, Any]) -> _Frame:
    try:
        return _Frame.model_validate(document)
    except ValidationError as exc:
        _, detail = _describe(exc)
        raise _Quarantine(QuarantineReason.BAD_SHAPE, detail, _headers_id(document)) from None


def _kind(frame: _Frame) -> FrameKind:
    if frame.type == "SYSTEM":
        return FrameKind.SYSTEM
    if frame.type == "CALLBACK" and frame.headers.topic == CARD_CALLBACK_TOPIC:
        return FrameKind.CARD_CLICK
    if frame.type != "CALLBACK" or frame.headers.topic != BOT_MESSAGE_TOPIC:
        return FrameKind.IGNORED
    return FrameKind.EVENT


def _event(frame: _Frame, received_at: float) -> Event:
    """The chatbot callback inside the frame's ``data``, as an event."""
    frame_id = frame.headers.messageId
    if not isinstance(frame.data, str):
        error = f"data must be a JSON document in a string, got {type(frame.data).__name__}"
        raise _Quarantine(QuarantineReason.DATA_NOT_JSON, error, frame_id)
    try:
        data = json.loads(frame.data)
    except (ValueError, RecursionError) as exc:
        error = str(exc) or type(exc).__name__
        raise _Quarantine(QuarantineReason.DATA_NOT_JSON, error, frame_id) from None
    if not isinstance(data, dict):
        error = f"data is a JSON {type(data).__name__}, not an object"
        raise _Quarantine(QuarantineReason.BAD_SHAPE, error, frame_id)
    try:
        return callback_to_event(data, received_at, frame_id, frame_time_s(frame.headers.time))
    except MissingFieldError as exc:
        raise _Quarantine(QuarantineReason.MISSING_FIELD, str(exc), frame_id) from None
    except ValidationError as exc:
        reason, detail = _describe(exc)
        raise _Quarantine(reason, detail, frame_id) from None
    except (ValueError, OverflowError, RecursionError) as exc:
        error = str(exc) or type(exc).__name__
        raise _Quarantine(QuarantineReason.BAD_FIELD, error, frame_id) from None


def click_data(document: dict[str, Any] | None) -> dict[str, Any]:
    """A card callback's ``data`` (a JSON string, as for every callback), as an object."""
    data = (document or {}).get("data")
    if isinstance(data, str):
        data = json.loads(data)
    if not isinstance(data, dict):
        raise ValueError("a card callback's data is a JSON object")
    return data
