"""A chatbot callback (the ``data`` of topic ``/v1.0/im/bot/messages/get``) as an Event.

The envelope (ids, conversation, sender, robot, mentions, session webhook, times) is
validated here; what the message says is read per ``msgtype`` by ``agent.dingtalk.readers``. Kept
apart from ``agent.dingtalk.ingest`` so that the frame handling there stays about frames.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.contracts import Actor, Conversation, ConversationType, Event, Robot, SessionWebhook
from agent.dingtalk.readers import quoted_attachments, read_message, read_quote

# What ``created_at_source`` says when the frame's time header stood in for createAt.
FRAME_TIME = "frame_header"


class MissingFieldError(ValueError):
    """A field the callback cannot do without is absent (quarantined ``missing_field``)."""


class _Wire(BaseModel):
    # DingTalk adds fields over time; unknown ones are kept in the raw frame, not refused.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _TextField(_Wire):
    content: str = ""
    isReplyMsg: bool = False
    repliedMsg: dict[str, Any] | None = None


class _AtUser(_Wire):
    dingtalkId: str | None = None
    staffId: str | None = None


class _Callback(_Wire):
    msgId: str = Field(min_length=1)
    msgtype: str = Field(min_length=1)
    conversationId: str = Field(min_length=1)
    conversationType: str
    senderId: str = Field(min_length=1)
    # ms; anything beyond is not a real time. Absent in some published payloads: the
    # frame's own time header stands in (see callback_to_event).
    createAt: int | None = Field(default=None, ge=0, le=2**53)
    senderStaffId: str | None = None
    senderNick: str | None = None
    senderCorpId: str | None = None
    isAdmin: bool = False
    conversationTitle: str | None = None
    chatbotUserId: str | None = None
    robotCode: str | None = None
    isInAtList: bool = False
    atUsers: list[_AtUser] = Field(default_factory=list)
    text: _TextField | None = None
    content: dict[str, Any] | str | None = None
    quoteMessage: dict[str, Any] | None = None
    originalMsgId: str | None = None
    originalProcessQueryKey: str | None = None
    sessionWebhook: str | None = None
    sessionWebhookExpiredTime: int | None = Field(default=None, ge=0, le=2**53)


def frame_time_s(value: Any) -> float | None:
    """The Stream frame's ``time`` header (ms, as a string) in seconds; None if unusable."""
    try:
        ms = int(str(value))
    except (TypeError, ValueError):
        return None
    return ms / 1000.0 if 0 < ms <= 2**53 else None


def _mentions(cb: _Callback) -> int:
    """How many @names the sender typed: everyone in atUsers (the robot included)."""
    return max(len(cb.atUsers), 1 if cb.isInAtList else 0)


def callback_to_event(
    data: dict[str, Any],
    received_at: float,
    frame_message_id: str | None,
    frame_time: float | None = None,
) -> Event:
    """Normalise a chatbot callback; raises ValidationError or ValueError when it is bad.

    Without ``createAt`` the frame's ``time`` header (``frame_time``) is used and the event
    says so (``created_at_source``); with neither, the callback is missing a field.
    """
    cb = _Callback.model_validate(data)
    if cb.conversationType not in ("1", "2"):
        raise ValueError(f"conversationType: expected '1' or '2', got {cb.conversationType!r}")
    if cb.createAt is not None:
        created_at, created_source = cb.createAt / 1000.0, None
    elif frame_time is not None:
        created_at, created_source = frame_time, FRAME_TIME
    else:
        raise MissingFieldError("createAt: missing, and the frame has no time header either")
    webhook = None
    if cb.sessionWebhook:
        expires_ms = cb.sessionWebhookExpiredTime or 0
        webhook = SessionWebhook(url=cb.sessionWebhook, expires_at=expires_ms / 1000.0)
    text_field = cb.text.model_dump() if cb.text is not None else None
    text, attachments = read_message(cb.msgtype, text_field, cb.content, _mentions(cb))
    quote = read_quote(
        text_field, cb.content, cb.quoteMessage, cb.originalMsgId, cb.originalProcessQueryKey
    )
    if quote and "repliedMsg" in quote:
        attachments += quoted_attachments(quote["repliedMsg"])
    return Event(
        event_id=cb.msgId,
        conversation=Conversation(
            id=cb.conversationId,
            type=ConversationType.DM if cb.conversationType == "1" else ConversationType.GROUP,
            title=cb.conversationTitle,
        ),
        actor=Actor(
            user_id=cb.senderStaffId or cb.senderId,
            dingtalk_id=cb.senderId,
            nick=cb.senderNick,
            corp_id=cb.senderCorpId,
            is_admin=cb.isAdmin,
            has_staff_id=bool(cb.senderStaffId),
        ),
        robot=Robot(code=cb.robotCode, chatbot_user_id=cb.chatbotUserId),
        msgtype=cb.msgtype,
        text=text,
        mentioned=cb.isInAtList,
        at_users=[u.staffId or u.dingtalkId or "" for u in cb.atUsers if u.staffId or u.dingtalkId],
        quote=quote,
        attachments=attachments,
        session_webhook=webhook,
        created_at=created_at,
        created_at_source=created_source,
        received_at=received_at,
        frame_message_id=frame_message_id,
    )
