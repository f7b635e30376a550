"""Where a message may go and what it says on the wire: webhook origins, channel, body.

A session webhook is a URL that arrives inside a frame, so it is only as trustworthy as the
frame: it is contacted only when its origin (scheme, host, port) is one of the configured
``webhook_origins``. Any other URL — another host, ``file://``, credentials in the URL — is
never contacted; the reply goes by the OpenAPI and the receipt's evidence says why.

Delivery (tries, retries, what DingTalk's answer proves) is agent/dingtalk/transport.py, whose
``DingTalkTransport`` inherits ``Addressing``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import httpx

from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    Channel,
    ConversationType,
    Origin,
    canonical_json,
    sha256_text,
)
from agent.dingtalk.http_pool import Place
from agent.dingtalk.media_upload import Upload, message_param, placeholder
from agent.dingtalk.openapi import TransportConfig

_DEFAULT_PORTS = {"https": 443, "http": 80}


@lru_cache(maxsize=4096)
def webhook_origin(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url`` as httpx would contact it, or None if it has none.

    Parsed by httpx itself, so the origin checked is the one a request would reach (no
    parser differential: ``https://oapi.dingtalk.com\\@evil.test/`` is evil.test). The host
    is lowercased and IDNA-encoded and a default port dropped, so ``:443`` on https and
    ``:80`` on http compare equal to no port. A URL carrying user info has no origin: it is
    never a webhook DingTalk issued. Cached: every send asks, and URLs repeat per thread.
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    scheme = parsed.scheme
    if scheme not in _DEFAULT_PORTS or not parsed.raw_host or parsed.userinfo:
        return None
    host = parsed.raw_host.decode("ascii")
    host = f"[{host}]" if ":" in host else host
    port = parsed.port  # httpx keeps an explicit default port after an upper-case scheme
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def _shown_origin(url: str) -> str:
    """What a receipt may say about a refused webhook URL: where it points, never its path
    or query (the session token lives in the query)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "an unparsable URL"
    return f"{parsed.scheme or '?'}://{parsed.netloc.decode('ascii', 'replace')}"


def _at(target: Origin) -> dict[str, Any]:
    """Whom a group reply @s: the sender by staff id, or — for a sender DingTalk gave no
    staff id (external, cross-corp) — by the dingtalkId it did give, in ``atDingtalkIds``,
    the field that resolves it (``atUserIds`` takes staff ids only)."""
    if target.has_staff_id:
        return {"atUserIds": [target.user_id], "isAtAll": False}
    return {"atDingtalkIds": [target.user_id], "isAtAll": False}


def allowed_origins(origins: Iterable[str]) -> frozenset[str]:
    """The configured origins, normalised like ``webhook_origin`` (unusable ones dropped)."""
    return frozenset(o for o in map(webhook_origin, origins) if o is not None)


@dataclass
class OutboundRequest:
    channel: Channel
    url: str
    body: dict[str, Any]
    needs_token: bool
    # Why this channel and not the obvious one (a refused webhook origin); on the receipt.
    note: str | None = None
    digest: str = field(init=False)
    # Whether a message POST may have reached DingTalk: set as it starts, cleared only by
    # an answer or a proof it never left. Stopped while False, the attempt sent nothing.
    may_have_arrived: bool = field(default=False, init=False)
    # The pool place the send holds (agent/dingtalk/http_pool.py): its bytes leave without waiting.
    place: Place | None = field(default=None, init=False)
    # An attachment: uploaded first (once), then its media id goes into the body.
    upload: Upload | None = None

    def __post_init__(self) -> None:
        # The digest covers what we said, never where the secret-bearing URL points.
        self.digest = sha256_text(canonical_json(self.body))[:32]

    def uploaded(self, media_id: str) -> None:
        """The attachment's media id, now that DingTalk issued it, into the body."""
        assert self.upload is not None
        self.upload.media_id = media_id
        msg_key, param = message_param(self.upload.ref, media_id)
        self.body = {
            **self.body,
            "msgKey": msg_key,
            "msgParam": json.dumps(param, ensure_ascii=False),
        }


class Addressing:
    """Channel choice and request building for the transport: which channel a target gets
    (an allowed, unexpired session webhook, else the OpenAPI) and the body it is sent."""

    config: TransportConfig
    clock: Clock
    webhook_origins: frozenset[str]

    def channel_for_intent(self, intent: ActionIntent) -> Channel:
        """The channel for this message: an attachment goes by the OpenAPI only (a session
        webhook cannot carry a file: 401102), anything else as ``channel_for`` says."""
        content = intent.content
        if content is not None and content.attachment is not None:
            return self.openapi_channel(intent.target)
        return self.channel_for(intent.target)

    def channel_for(self, target: Origin) -> Channel:
        """The session webhook while it is valid and on an allowed origin, else the OpenAPI
        for the conversation (``Channel.NONE`` without OpenAPI credentials)."""
        if self.webhook_problem(target) is None:
            return Channel.SESSION_WEBHOOK
        return self.openapi_channel(target)

    def webhook_problem(self, target: Origin) -> str | None:
        """Why the target's session webhook must not be used, or None when it may.

        Public so that a caller deciding "is there a channel at all?" (the action gate's
        target check) can word its refusal the way the transport decides.
        """
        hook = target.session_webhook
        if hook is None:
            return "no session webhook"
        foreign = self._foreign_webhook(hook.url)
        if foreign is not None:
            return foreign
        if not hook.valid_at(self.clock.now(), self.config.webhook_expiry_margin_s):
            return "session webhook expired"
        return None

    @cached_property
    def _webhook_prefixes(self) -> tuple[str, ...]:
        return tuple(f"{origin}/" for origin in self.webhook_origins)

    def _foreign_webhook(self, url: str) -> str | None:
        """The evidence line for a webhook URL off the allowed origins (None when on one)."""
        # A URL that starts with an allowed origin and a "/" can only reach that origin (the
        # authority ends at that "/"): most sends end here, without parsing the URL.
        if url.startswith(self._webhook_prefixes):
            return None
        if webhook_origin(url) in self.webhook_origins:
            return None
        return f"session webhook host not allowed: {_shown_origin(url)}"

    def openapi_channel(self, target: Origin) -> Channel:
        if not self.config.has_openapi_credentials:
            return Channel.NONE
        if target.conversation_type is ConversationType.GROUP:
            return Channel.OPENAPI_GROUP
        return Channel.OPENAPI_OTO

    def build_request(
        self, intent: ActionIntent, channel: Channel, payload: bytes | None = None
    ) -> OutboundRequest:
        """The request for ``intent`` on ``channel``; ``payload``: an attachment's bytes."""
        content = intent.content
        if content is None:
            raise ValueError("only message intents go on the wire")
        target = intent.target
        group = target.conversation_type is ConversationType.GROUP
        base = self.config.openapi_base_url
        if channel is Channel.SESSION_WEBHOOK:
            assert target.session_webhook is not None
            body: dict[str, Any]
            if content.msgtype == "markdown":
                body = {
                    "msgtype": "markdown",
                    "markdown": {"title": content.title or content.text[:20], "text": content.text},
                }
            else:
                body = {"msgtype": "text", "text": {"content": content.text}}
            if group:
                body["at"] = _at(target)
            return OutboundRequest(channel, target.session_webhook.url, body, needs_token=False)
        hook = target.session_webhook
        note = self._foreign_webhook(hook.url) if hook is not None else None
        if channel is Channel.OPENAPI_GROUP and not target.has_staff_id:
            unmentioned = "sent without @: the sender has no staff id to @ through the OpenAPI"
            note = f"{note}; {unmentioned}" if note else unmentioned
        upload = None
        param: dict[str, Any]
        if content.attachment is not None:
            note = None  # by the OpenAPI because it is a file, whatever the webhook
            upload = Upload(content.attachment, payload)
            msg_key, param = message_param(content.attachment, placeholder(content.attachment))
        elif content.msgtype == "markdown":
            msg_key = "sampleMarkdown"
            param = {"title": content.title or content.text[:20], "text": content.text}
        else:
            msg_key, param = "sampleText", {"content": content.text}
        body = {
            "robotCode": self.config.robot_code,
            "msgKey": msg_key,
            "msgParam": json.dumps(param, ensure_ascii=False),
        }
        if channel is Channel.OPENAPI_GROUP:
            body["openConversationId"] = target.conversation_id
            url = f"{base}/v1.0/robot/groupMessages/send"
        elif channel is Channel.OPENAPI_OTO:
            body["userIds"] = [target.user_id]
            url = f"{base}/v1.0/robot/oToMessages/batchSend"
        else:
            raise ValueError(f"no request for channel {channel}")
        return OutboundRequest(channel, url, body, needs_token=True, note=note, upload=upload)
