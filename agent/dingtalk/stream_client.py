"""The official ``dingtalk-stream`` client, adapted: our open request, no handlers.

We keep the client for what it is good at (frame types, SYSTEM ping and disconnect, its
ack format) and replace the connection-open request, which in 0.24.3 has no timeout and
logs the secret. Chatbot callbacks never reach its routing: agent/dingtalk/stream_frames.py stores
each one and acks it with the SDK's ``AckMessage`` itself (the SDK's route would parse the
frame's data a third time and build its message objects only to be handed back the ack).
The connection itself is driven by agent/dingtalk/connector.py.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx

from agent.dingtalk.frame_parsing import BOT_MESSAGE_TOPIC, CARD_CALLBACK_TOPIC

if TYPE_CHECKING:
    from agent.dingtalk.stream_config import ConnectorConfig
    from agent.dingtalk.stream_stats import ConnectorStats

log = logging.getLogger("dta.connector")


def make_client(sdk: ModuleType, config: ConnectorConfig, stats: ConnectorStats) -> Any:
    """A ready client for SYSTEM frames, opening connections with our request; why the
    last open failed (refused credentials, say) goes to ``stats.open_failure``."""

    class StreamClient(sdk.DingTalkStreamClient):  # type: ignore[name-defined,misc]
        def open_connection(self) -> dict[str, Any] | None:
            """The SDK's request, with a timeout and without logging the secret."""
            body = {
                "clientId": config.client_id,
                "clientSecret": config.client_secret,
                "subscriptions": [
                    {"type": "CALLBACK", "topic": BOT_MESSAGE_TOPIC},
                    {"type": "CALLBACK", "topic": CARD_CALLBACK_TOPIC},
                ],
                "ua": f"dta/0.1 dingtalk-stream/{sdk.version.VERSION_STRING}",
                "localIp": "",
            }
            url = f"{config.endpoint}/v1.0/gateway/connections/open"
            try:
                response = httpx.post(url, json=body, timeout=config.open_timeout_s)
            except httpx.HTTPError as exc:
                log.warning("open connection failed", extra={"error": type(exc).__name__})
                stats.open_failure = f"opening the connection failed: {type(exc).__name__}"
                return None
            if response.status_code != 200:
                code = _code(response)
                log.warning(
                    "open connection refused",
                    extra={"status": response.status_code, "code": code},
                )
                stats.open_failure = f"DingTalk refused the connection: HTTP {response.status_code}"
                stats.open_failure += f" {code}" if code else ""
                return None
            data = response.json()
            if not (isinstance(data, dict) and "endpoint" in data):
                stats.open_failure = "DingTalk's answer to the open named no endpoint"
                return None
            stats.open_failure = None
            return data

    credential = sdk.Credential(config.client_id, config.client_secret)  # the SDK's own type
    client = StreamClient(credential, logger=logging.getLogger("dta.sdk"))
    client.pre_start()
    return client


def _code(response: httpx.Response) -> str | None:
    """DingTalk's error code in a refusal (``InvalidAuthentication``), never its message:
    an answer might echo what was sent."""
    try:
        data = response.json()
    except ValueError:
        return None
    code = data.get("code") if isinstance(data, dict) else None
    return code[:80] if isinstance(code, str) else None
