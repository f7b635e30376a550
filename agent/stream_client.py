"""The official ``dingtalk-stream`` client, adapted: our open request and our one handler.

We keep the client for what it is good at (handler routing, frame types, acks, SYSTEM ping
and disconnect) and replace two things: the connection-open request, which in 0.24.3 has no
timeout and logs the secret, and the handlers, which here are one: make the frame durable,
then let the SDK ack it. The connection itself is driven by agent/connector.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx

from agent.ingest import BOT_MESSAGE_TOPIC

if TYPE_CHECKING:
    from agent.connector import ConnectorConfig

log = logging.getLogger("dta.connector")


def make_client(sdk: ModuleType, config: ConnectorConfig, ingest: Callable[[], None]) -> Any:
    """A ready client whose only handler calls ``ingest`` for the frame being routed."""

    class IngestHandler(sdk.CallbackHandler):  # type: ignore[name-defined,misc]
        """The only handler: durable ingest, then the SDK sends the ack."""

        async def process(self, message: Any) -> tuple[int, str]:
            ingest()
            return sdk.AckMessage.STATUS_OK, "OK"

    class StreamClient(sdk.DingTalkStreamClient):  # type: ignore[name-defined,misc]
        def open_connection(self) -> dict[str, Any] | None:
            """The SDK's request, with a timeout and without logging the secret."""
            body = {
                "clientId": config.client_id,
                "clientSecret": config.client_secret,
                "subscriptions": [{"type": "CALLBACK", "topic": BOT_MESSAGE_TOPIC}],
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
    client.register_callback_handler(BOT_MESSAGE_TOPIC, IngestHandler())
    client.pre_start()
    return client
