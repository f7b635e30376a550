"""How each kind of chatbot callback is read: its text, its media, its quote.

DingTalk sends one callback shape per ``msgtype`` and several shapes for the same thing (a
quote lives under ``text`` for text messages and under ``content`` for richText; a quoted
text body is ``content.text`` on some clients and ``content.content`` on others; richText
segments are ``{text}`` at the top level and ``{msgType, content}`` inside a quote). The
readers here take every shape seen in published payloads (``lab/recordings/SOURCES.md``)
and turn them into three things the rest of dta reads without caring about the shape:

- the message **text** — for richText with the @names removed the way DingTalk removes
  them from ``text`` messages, and for audio DingTalk's own ``recognition``;
- the **attachments** — pictures, files, video and audio, of the message and of its quote,
  described only (download codes, names, durations): nothing is fetched at ingest, because
  a silent message must cause no outbound call at all;
- the raw **quote** fields, for the invocation builder to resolve.

Everything here is pure and never raises on odd values: a field of the wrong type is
treated as absent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.contracts import MEDIA_MSGTYPES as MEDIA_KINDS

# the DingTalk fields an attachment keeps (a download code is needed to fetch it later)
_KEPT = (
    "downloadCode",
    "pictureDownloadCode",
    "fileName",
    "fileId",
    "spaceId",
    "duration",
    "videoType",
    "recognition",
)
# "@name" as DingTalk writes a mention: at the start or after a space, up to the next space
_MENTION = re.compile(r"(?:(?<=\s)|^)[@＠][^\s@＠]+\s?")


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object, also from a string holding one (some clients send ``content`` so)."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def segment_text(segment: dict[str, Any]) -> str:
    """The text of one richText segment in either shape: ``{text}`` / ``{type: text,
    text}`` at the top level, ``{msgType: text|emoji, content}`` inside a quote."""
    kind = segment.get("type") or segment.get("msgType")
    if kind in ("picture", "image", "at"):
        return ""
    if isinstance(segment.get("text"), str):
        return segment["text"]
    if kind in ("text", "emoji") and isinstance(segment.get("content"), str):
        return segment["content"]
    return ""


def _is_picture(segment: dict[str, Any]) -> bool:
    kind = segment.get("type") or segment.get("msgType")
    has_code = bool(segment.get("downloadCode") or segment.get("pictureDownloadCode"))
    return has_code and kind in (None, "picture", "image")


def _attachment(kind: str, fields: dict[str, Any], part_of: str) -> dict[str, Any]:
    found = {key: fields[key] for key in _KEPT if fields.get(key) not in (None, "")}
    return {"kind": kind, "part_of": part_of, **found}


def strip_mentions(text: str, count: int) -> str:
    """Remove up to ``count`` @names, as DingTalk does in ``text`` messages.

    DingTalk takes every mentioned member's @name out of a text message's body and lists
    them in ``atUsers`` instead; in richText it leaves them in. Removing as many as were
    mentioned reads both alike without knowing anyone's name (the robot's included).
    """
    if count <= 0:
        return text
    return _MENTION.sub("", text, count=count)


def richtext_parts(
    segments: Any, part_of: str, mentions: int = 0
) -> tuple[str, list[dict[str, Any]]]:
    """Text and pictures of richText segments, in order; ``mentions`` @names removed."""
    texts: list[str] = []
    pictures: list[dict[str, Any]] = []
    at_segments = 0
    for segment in segments if isinstance(segments, list) else []:
        if not isinstance(segment, dict):
            continue
        if (segment.get("type") or segment.get("msgType")) == "at":
            at_segments += 1
        elif _is_picture(segment):
            pictures.append(_attachment("picture", segment, part_of))
        else:
            texts.append(segment_text(segment))
    text = strip_mentions("".join(texts), mentions - at_segments)
    return text.strip(), pictures


def read_message(
    msgtype: str, text_field: Any, content: Any, mentions: int
) -> tuple[str, list[dict[str, Any]]]:
    """The text and the attachments of a callback's own message, per ``msgtype``."""
    body = as_dict(content)
    if msgtype == "text":
        return _text(as_dict(text_field).get("content")).strip(), []
    if msgtype == "richText":
        return richtext_parts(body.get("richText"), "message", mentions)
    if msgtype in MEDIA_KINDS:
        has_media = body.get("downloadCode") or body.get("pictureDownloadCode")
        items = [_attachment(msgtype, body, "message")] if has_media else []
        text = _text(body.get("recognition")).strip() if msgtype == "audio" else ""
        return text, items
    # Any other type (a shared document card, a chat record, one DingTalk adds tomorrow):
    # whatever plain text it carries, and nothing else; the invocation says the type.
    return (_text(body.get("text")) or _text(body.get("content"))).strip(), []


def find_replied(text_field: Any, content: Any) -> dict[str, Any] | None:
    """The quoted message: under ``text`` for text messages, under ``content`` for richText."""
    for holder in (as_dict(text_field), as_dict(content)):
        replied = holder.get("repliedMsg")
        if isinstance(replied, dict) and (holder.get("isReplyMsg") or replied):
            return replied
    return None


def quoted_text(replied: dict[str, Any]) -> str:
    """The quoted body in any shape: ``content.text``, ``content.content``, richText
    segments, or an audio quote's recognition."""
    body = as_dict(replied.get("content"))
    for key in ("text", "content", "recognition"):
        if isinstance(body.get(key), str) and body[key].strip():
            return body[key]
    text, _ = richtext_parts(body.get("richText"), "quote")
    return text


def quoted_attachments(replied: dict[str, Any]) -> list[dict[str, Any]]:
    """Pictures, files, video and audio inside a quote (``part_of: quote``)."""
    body = as_dict(replied.get("content"))
    _, pictures = richtext_parts(body.get("richText"), "quote")
    kind = replied.get("msgType")
    if body.get("downloadCode") or body.get("pictureDownloadCode"):
        if kind not in MEDIA_KINDS:
            kind = "file" if body.get("fileName") else "picture"
        return [_attachment(str(kind), body, "quote"), *pictures]
    return pictures


def read_quote(
    text_field: Any,
    content: Any,
    quote_message: Any,
    original_msg_id: Any,
    original_pqk: Any,
) -> dict[str, Any] | None:
    """The raw quote fields a callback carries, whichever of its shapes it used."""
    quote: dict[str, Any] = {}
    replied = find_replied(text_field, content)
    if replied is not None:
        quote["repliedMsg"] = replied
    if isinstance(quote_message, dict) and quote_message:
        quote["quoteMessage"] = quote_message
    if isinstance(original_msg_id, str) and original_msg_id:
        quote["originalMsgId"] = original_msg_id
    if isinstance(original_pqk, str) and original_pqk:
        quote["originalProcessQueryKey"] = original_pqk
    return quote or None
