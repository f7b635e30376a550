"""The benchmark's baseline: a bare ``dingtalk-stream`` echo bot, written the way the SDK's
README shows (a ChatbotHandler that replies through the session webhook, ``start_forever``).

It has none of dta's guarantees — no durable dedupe, no receipts, no gates — which is the
point: dta's figures are quoted next to it, measured against the same fake in the same run.
Run as ``python -m lab.bench.bare_echo`` with DINGTALK_CLIENT_ID / DINGTALK_CLIENT_SECRET and
DINGTALK_OPENAPI_ENDPOINT (read by the SDK at import) in the environment.
"""

from __future__ import annotations

import logging
import os
from typing import Any


def main() -> None:
    import dingtalk_stream
    from dingtalk_stream import AckMessage

    class EchoHandler(dingtalk_stream.ChatbotHandler):  # type: ignore[misc]
        async def process(self, callback: Any) -> tuple[int, str]:
            incoming = dingtalk_stream.ChatbotMessage.from_dict(callback.data)
            self.reply_text(incoming.text.content.strip(), incoming)
            return AckMessage.STATUS_OK, "OK"

    logging.getLogger("dingtalk_stream").setLevel(logging.WARNING)
    credential = dingtalk_stream.Credential(
        os.environ["DINGTALK_CLIENT_ID"], os.environ["DINGTALK_CLIENT_SECRET"]
    )
    client = dingtalk_stream.DingTalkStreamClient(credential)
    client.register_callback_handler(dingtalk_stream.ChatbotMessage.TOPIC, EchoHandler())
    client.start_forever()


if __name__ == "__main__":
    main()
