"""Pictures and files out: never a request's form of their own — a reply's ``attachments``
become intents after its words, typed by their bytes at the action gate
(``gates/attachments.py``). By the OpenAPI only (a session webhook cannot carry a file):
uploaded once inside the send's attempt (``agent/dingtalk/media_upload.py``), then an image
or file message, each with its own receipt; their bytes are kept with the stored pieces
until sent, so a crash leaves them owed, or said in one line when they can no longer go."""

from __future__ import annotations

from agent.carriers.messages import MessageCarrier
from agent.contracts import ActionKind
from agent.run.broker import Broker


class AttachmentCarrier(MessageCarrier):
    """Sent as a message is (the broker picks the OpenAPI for it and uploads its bytes)."""

    msgtypes = ("image", "file")

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker, reply_form="text")

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        return None  # never a request's form: a reply's attachments ride after its words
