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

from agent.dingtalk.ingest import BOT_MESSAGE_TOPIC, CARD_CALLBACK_TOPIC

if TYPE_CHECKING:
    from agent.dingtalk.connector import ConnectorConfig

log = logging.getLogger("dta.connector")


def make_client(sdk: ModuleType, config: ConnectorConfig) -> Any:
    """A ready client for SYSTEM frames, opening connections with our request."""

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
                return None
            if response.status_code != 200:
                log.warning("open connection refused", extra={"status": response.status_code})
                return None
            data = response.json()
            return data if isinstance(data, dict) and "endpoint" in data else None

    credential = sdk.Credential(config.client_id, config.client_secret)
    client = StreamClient(credential, logger=logging.getLogger("dta.sdk"))
    client.pre_start()
    return client
