"""Chatbot callbacks as DingTalk would push them, built from a lab case's short ``send`` keys.

A case author writes ``{"msg": "m1", "from": "u1", "group": "cid-g1", "at_bot": true}``; the
runtime must see the full callback a real robot gets, with a live session webhook on the
fake platform. Building it here, next to the platform that owns the webhook, keeps the
ids consistent: the webhook's conversation is the callback's, a quote can point at an
earlier inbound message, and an armed ``expired`` fault shows up in new callbacks.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from lab.fake.state import SESSION_TTL_S, PlatformState

CALLBACK_TOPIC = "/v1.0/im/bot/messages/get"
LAB_APP_ID = "dta-lab-app-id"
LAB_CONNECTION_ID = "dta-lab-connection"
DINGTALK_ID_PREFIX = "$:LWCP_v1:$"
DM_CONVERSATION_PREFIX = "cid-dm-"

_SEND_KEYS = frozenset(
    {"msg", "from", "nick", "group", "text", "at_bot", "at", "msgtype", "quote", "age", "raw"}
)
_STR_KEYS = ("nick", "group", "text", "msgtype")


def dingtalk_id(user_id: str) -> str:
    """The stable, opaque ``senderId`` DingTalk gives a staff member (not their staffId)."""
    return DINGTALK_ID_PREFIX + user_id


def dm_conversation_id(user_id: str) -> str:
    """A one-to-one chat's conversationId: stable per user, as on the real platform."""
    return DM_CONVERSATION_PREFIX + user_id


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _check_send(send: Any) -> None:
    """Refuse a malformed step loudly: a silent default would make a case test nothing."""
    if not isinstance(send, dict):
        raise ValueError(f"send must be an object, got {send!r}")
    unknown = sorted(set(send) - _SEND_KEYS)
    if unknown:
        raise ValueError(f"send: unknown key(s) {', '.join(map(repr, unknown))}")
    for key in ("msg", "from"):
        if not isinstance(send.get(key), str) or not send[key]:
            raise ValueError(f"send.{key} is required and must be a non-empty string")
    for key in _STR_KEYS:
        if key in send and not isinstance(send[key], str):
            raise ValueError(f"send.{key} must be a string, got {send[key]!r}")
    if send.get("group") == "":
        raise ValueError("send.group must be a conversation id; leave it out for a DM")
    if "at_bot" in send and not isinstance(send["at_bot"], bool):
        raise ValueError(f"send.at_bot must be true or false, got {send['at_bot']!r}")
    at = send.get("at", [])
    if not isinstance(at, list) or not all(isinstance(u, str) and u for u in at):
        raise ValueError(f"send.at must be a list of staff ids, got {at!r}")
    age = send.get("age", 0)
    if isinstance(age, bool) or not isinstance(age, int | float) or age < 0:
        raise ValueError(f"send.age must be seconds >= 0, got {age!r}")
    for key in ("quote", "raw"):
        if key in send and not isinstance(send[key], dict):
            raise ValueError(f"send.{key} must be an object, got {send[key]!r}")
    if "quote" in send and send.get("msgtype", "text") != "text":
        raise ValueError("send.quote needs msgtype 'text': DingTalk quotes only in text replies")


def _content(msgtype: str, msg_id: str, text: str) -> dict[str, Any]:
    """A plausible ``content`` for a non-text message, as the runtime's parser reads it."""
    code = f"lab-download-{msg_id}"
    if msgtype == "picture":
        return {"downloadCode": code, "pictureDownloadCode": code}
    if msgtype == "audio":
        return {"recognition": text, "downloadCode": code, "duration": 3000}
    if msgtype == "video":
        return {"downloadCode": code, "duration": 5000, "videoType": "mp4"}
    if msgtype == "file":
        return {"downloadCode": code, "fileName": text or "file.txt", "spaceId": "lab-space"}
    if msgtype == "richText":
        return {"richText": [{"text": text}]}
    return {}


def _robot_message(platform: PlatformState, number: Any) -> tuple[dict[str, Any], str | None]:
    """A quote of the N-th message the platform received from the robot (1-based).

    As DingTalk does, the quoted robot message arrives without content; a message that went
    out through the OpenAPI can be found again by its processQueryKey, which the callback
    carries as ``originalProcessQueryKey``.
    """
    if not isinstance(number, int) or not 1 <= number <= len(platform.received):
        raise ValueError(
            f"send.quote.platform_message must be 1..{len(platform.received)}, got {number!r}"
        )
    sent = platform.received[number - 1]
    replied = {
        "msgId": f"robot-msg-{sent.seq}",
        "senderId": platform.chatbot_user_id,
        "msgType": sent.msgtype,
        "createdAt": _ms(sent.time),
    }
    return replied, sent.process_query_key


def _replied_msg(platform: PlatformState, quote: dict[str, Any]) -> dict[str, Any]:
    """The ``repliedMsg`` for a quote: of an earlier inbound message, or of a robot message."""
    if "platform_message" in quote:
        return _robot_message(platform, quote["platform_message"])[0]
    if "msg" not in quote:
        return dict(quote)  # a raw repliedMsg, exactly as the case wrote it
    extra = sorted(set(quote) - {"msg"})
    if extra:
        raise ValueError(f"send.quote: unknown key(s) {extra}; use a raw repliedMsg instead")
    msg_id = quote["msg"]
    if not isinstance(msg_id, str) or not msg_id:
        raise ValueError(f"send.quote.msg must be a msgId, got {msg_id!r}")
    earlier = platform.inbound.get(msg_id)
    if earlier is not None:
        if earlier.get("msgtype") == "text":
            content: dict[str, Any] = {"text": (earlier.get("text") or {}).get("content", "")}
        else:
            content = dict(earlier.get("content") or {})
        return {
            "msgType": earlier.get("msgtype"),
            "msgId": msg_id,
            "senderId": earlier.get("senderId"),
            "createdAt": earlier.get("createAt"),
            "content": content,
        }
    # Not a message a user sent: the robot's own. DingTalk sends quoted bot cards empty.
    replied: dict[str, Any] = {"msgId": msg_id, "senderId": platform.chatbot_user_id}
    for sent in platform.received:
        if sent.process_query_key == msg_id:
            replied.update(msgType=sent.msgtype, createdAt=_ms(sent.time))
    return replied


def build_callback(platform: PlatformState, send: dict[str, Any], now: float) -> dict[str, Any]:
    """Turn a lab ``send`` step into a chatbot callback ``data`` dict, registered as inbound.

    ``now`` is the case's (virtual) time; the message was created ``age`` seconds before.
    Raises ``ValueError`` naming the problem when the step is malformed.
    """
    _check_send(send)
    user: str = send["from"]
    msg_id: str = send["msg"]
    group: str | None = send.get("group")
    msgtype: str = send.get("msgtype", "text")
    text: str = send.get("text", "")
    conversation = group or dm_conversation_id(user)
    # An armed "expired" fault means the webhook a callback carries is already dead.
    expires_at = now - 1.0 if platform.webhook_expired else now + SESSION_TTL_S
    webhook = platform.register_session(
        conversation, "group" if group else "dm", None if group else user, expires_at
    )
    at_users: list[dict[str, str]] = []
    if send.get("at_bot", False):
        at_users.append({"dingtalkId": platform.chatbot_user_id})
    at_users += [{"dingtalkId": dingtalk_id(u), "staffId": u} for u in send.get("at", [])]
    data: dict[str, Any] = {
        "msgId": msg_id,
        "msgtype": msgtype,
        "createAt": _ms(now - float(send.get("age", 0))),
        "conversationId": conversation,
        "conversationType": "2" if group else "1",
        "senderId": dingtalk_id(user),
        "senderStaffId": user,
        "senderNick": send.get("nick", user),
        "senderCorpId": platform.corp_id,
        "isAdmin": False,
        "chatbotUserId": platform.chatbot_user_id,
        "chatbotCorpId": platform.corp_id,
        "robotCode": platform.robot_code,
        "isInAtList": bool(send.get("at_bot", False)),
        "atUsers": at_users,
        "sessionWebhook": webhook,
        "sessionWebhookExpiredTime": _ms(expires_at),
    }
    if group:
        data["conversationTitle"] = f"Lab group {group}"
    if msgtype == "text":
        data["text"] = {"content": text}
        if "quote" in send:
            data["text"]["isReplyMsg"] = True
            data["text"]["repliedMsg"] = _replied_msg(platform, send["quote"])
            if "platform_message" in send["quote"]:
                _, key = _robot_message(platform, send["quote"]["platform_message"])
                if key:
                    data["originalProcessQueryKey"] = key
    else:
        data["content"] = _content(msgtype, msg_id, text)
    data.update(send.get("raw", {}))
    platform.record_inbound(data)
    return data


def callback_frame(
    data: dict[str, Any],
    frame_message_id: str | None = None,
    *,
    now: float | None = None,
    app_id: str = LAB_APP_ID,
    connection_id: str = LAB_CONNECTION_ID,
) -> str:
    """The Stream Mode websocket frame that carries ``data`` (itself a JSON *string* inside).

    ``now`` stamps the frame's ``time`` header; without it the callback's ``createAt`` is
    used, so frames built on a virtual clock stay reproducible.
    """
    if now is not None:
        stamp = _ms(now)
    elif isinstance(data.get("createAt"), int):
        stamp = data["createAt"]
    else:
        stamp = _ms(time.time())
    frame = {
        "specVersion": "1.0",
        "type": "CALLBACK",
        "headers": {
            "appId": app_id,
            "connectionId": connection_id,
            "contentType": "application/json",
            "messageId": frame_message_id or secrets.token_hex(16),
            "time": str(stamp),
            "topic": CALLBACK_TOPIC,
        },
        "data": json.dumps(data, ensure_ascii=False),
    }
    return json.dumps(frame, ensure_ascii=False)
