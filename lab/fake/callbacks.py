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

from lab.fake.files import default_file
from lab.fake.state import SESSION_TTL_S, PlatformState

CALLBACK_TOPIC = "/v1.0/im/bot/messages/get"
LAB_APP_ID = "dta-lab-app-id"
LAB_CONNECTION_ID = "dta-lab-connection"
DINGTALK_ID_PREFIX = "$:LWCP_v1:$"
DM_CONVERSATION_PREFIX = "cid-dm-"
# How the robot's name shows in a richText message that @s it (DingTalk leaves it there).
LAB_BOT_MENTION = "@LabBot "
MEDIA_TYPES = ("picture", "file", "video", "audio")

_SEND_KEYS = frozenset(
    {
        "msg",
        "from",
        "nick",
        "group",
        "text",
        "at_bot",
        "at",
        "msgtype",
        "quote",
        "age",
        "raw",
        "attach",
        "robot",
    }
)
_STR_KEYS = ("nick", "group", "text", "msgtype", "robot")


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
    if "quote" in send and send.get("msgtype", "text") not in ("text", "richText"):
        raise ValueError("send.quote needs msgtype 'text' or 'richText': DingTalk quotes there")
    attach = send.get("attach", [])
    if not isinstance(attach, list) or not all(isinstance(c, str) and c for c in attach):
        raise ValueError(f"send.attach must be a list of download codes, got {attach!r}")
    if attach and send.get("msgtype", "text") not in ("richText", *MEDIA_TYPES):
        raise ValueError("send.attach needs msgtype richText, picture, file, video or audio")


def _media_code(platform: PlatformState, kind: str, send: dict[str, Any]) -> str:
    """The message's download code: the case's own (``attach``), or one the fake makes up
    and serves a small real file for."""
    if send.get("attach"):
        return str(send["attach"][0])
    code = f"lab-download-{send['msg']}"
    name = (send.get("text") or None) if kind == "file" else None
    platform.files.setdefault(code, default_file(kind, name, send["msg"]))
    return code


def _content(platform: PlatformState, msgtype: str, send: dict[str, Any]) -> dict[str, Any]:
    """The ``content`` of a non-text message, in the shapes DingTalk sends (see
    lab/recordings/SOURCES.md)."""
    text: str = send.get("text", "")
    if msgtype == "richText":
        parts: list[dict[str, Any]] = []
        if send.get("at_bot"):
            parts.append({"text": LAB_BOT_MENTION})
        if text:
            parts.append({"text": text})
        for code in send.get("attach", []):
            parts.append({"type": "picture", "downloadCode": code, "pictureDownloadCode": code})
        return {"richText": parts}
    if msgtype not in MEDIA_TYPES:
        return {"text": text} if text else {}
    code = _media_code(platform, msgtype, send)
    if msgtype == "picture":
        return {"downloadCode": code, "pictureDownloadCode": code}
    if msgtype == "audio":
        return {"recognition": text, "downloadCode": code, "duration": 3000}
    if msgtype == "video":
        return {"downloadCode": code, "duration": 5000, "videoType": "mp4"}
    known = platform.files.get(code)
    name = known.name if known is not None else (text or "file.txt")
    return {"downloadCode": code, "fileName": name, "spaceId": "lab-space", "fileId": "lab-file"}


def _quoted_content(earlier: dict[str, Any], shape: str) -> dict[str, Any]:
    """An earlier inbound message's body as DingTalk puts it inside ``repliedMsg``:
    ``{text}`` or ``{content}`` for text, ``{msgType, content}`` segments for richText,
    the media fields for pictures and files."""
    msgtype = earlier.get("msgtype")
    if msgtype == "text":
        body = (earlier.get("text") or {}).get("content", "")
        return {"content": body} if shape == "content" else {"text": body}
    content = dict(earlier.get("content") or {})
    if msgtype != "richText":
        content.pop("isReplyMsg", None)
        content.pop("repliedMsg", None)
        return content
    segments = []
    for part in content.get("richText") or []:
        if part.get("type") == "picture":
            segments.append({"msgType": "picture", "downloadCode": part.get("downloadCode")})
        elif part.get("text"):
            segments.append({"msgType": "text", "content": part["text"]})
    return {"richText": segments}


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
    app = platform.app_for_robot(sent.robot_code) or platform.app_for_robot(None)
    assert app is not None
    replied = {
        "msgId": f"robot-msg-{sent.seq}",
        "senderId": app.chatbot_user_id,
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
    extra = sorted(set(quote) - {"msg", "shape"})
    if extra:
        raise ValueError(f"send.quote: unknown key(s) {extra}; use a raw repliedMsg instead")
    shape = quote.get("shape", "text")
    if shape not in ("text", "content"):
        raise ValueError(f"send.quote.shape must be 'text' or 'content', got {shape!r}")
    msg_id = quote["msg"]
    if not isinstance(msg_id, str) or not msg_id:
        raise ValueError(f"send.quote.msg must be a msgId, got {msg_id!r}")
    earlier = platform.inbound.get(msg_id)
    if earlier is not None:
        return {
            "msgType": earlier.get("msgtype"),
            "msgId": msg_id,
            "senderId": earlier.get("senderId"),
            "createdAt": earlier.get("createAt"),
            "content": _quoted_content(earlier, shape),
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
    app = platform.app_for_robot(send.get("robot"))
    if app is None:
        raise ValueError(f"send.robot: the platform serves no robot {send['robot']!r}")
    user: str = send["from"]
    msg_id: str = send["msg"]
    group: str | None = send.get("group")
    msgtype: str = send.get("msgtype", "text")
    text: str = send.get("text", "")
    conversation = group or dm_conversation_id(user)
    # An armed "expired" fault means the webhook a callback carries is already dead.
    expires_at = now - 1.0 if platform.webhook_expired else now + SESSION_TTL_S
    webhook = platform.register_session(
        conversation,
        "group" if group else "dm",
        None if group else user,
        expires_at,
        app.robot_code,
    )
    at_users: list[dict[str, str]] = []
    if send.get("at_bot", False):
        at_users.append({"dingtalkId": app.chatbot_user_id})
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
        "chatbotUserId": app.chatbot_user_id,
        "chatbotCorpId": platform.corp_id,
        "robotCode": app.robot_code,
        "isInAtList": bool(send.get("at_bot", False)),
        "atUsers": at_users,
        "sessionWebhook": webhook,
        "sessionWebhookExpiredTime": _ms(expires_at),
    }
    if group:
        data["conversationTitle"] = f"Lab group {group}"
    if msgtype == "text":
        data["text"] = {"content": text}
    else:
        data["content"] = _content(platform, msgtype, send)
    if "quote" in send:
        # text messages carry the quote under ``text``; richText ones under ``content``
        holder = data["text"] if msgtype == "text" else data["content"]
        holder["isReplyMsg"] = True
        holder["repliedMsg"] = _replied_msg(platform, send["quote"])
        if "platform_message" in send["quote"]:
            _, key = _robot_message(platform, send["quote"]["platform_message"])
            if key:
                data["originalProcessQueryKey"] = key
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
    topic: str = CALLBACK_TOPIC,
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
            "topic": topic,
        },
        "data": json.dumps(data, ensure_ascii=False),
    }
    return json.dumps(frame, ensure_ascii=False)


CARD_CALLBACK_TOPIC = "/v1.0/card/instances/callback"


def card_click_data(
    out_track_id: str,
    user_id: str,
    choice: str,
    space: str,
    corp_id: str = "ding-lab-corp",
    values: dict[str, Any] | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """A card callback's data for a press of the button whose ``action`` is ``choice``; a
    form's submit carries ``params.form`` (forms doc §3.1), a feedback button the action id
    ``feedback_up`` / ``feedback_down`` (§3.5)."""
    params: dict[str, Any] = {"action": choice}
    action_id = choice
    if choice == "submit":
        params = {"form": dict(values or {})}
        action_id = "form_submit"
    elif choice in ("up", "down"):
        action_id = f"feedback_{choice}"
        params = {"action": action_id, **({"reason": reason} if reason else {})}
    private = {"cardPrivateData": {"actionIds": [action_id], "params": params}}
    return {
        "outTrackId": out_track_id,
        "userId": user_id,
        "userIdType": 1,
        "corpId": corp_id,
        "spaceType": "IM_GROUP" if "IM_GROUP" in space else "IM_ROBOT",
        "spaceId": space,
        "type": "actionCallback",
        "extension": "{}",
        "content": json.dumps(private, ensure_ascii=False),
    }
