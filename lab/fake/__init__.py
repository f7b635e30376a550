"""A fake DingTalk for the lab: the platform's HTTP side, its evidence, and its faults.

``FakeDingTalk`` serves DingTalk's token, session-webhook, robot OpenAPI and user-detail
endpoints on 127.0.0.1 and records what a user would have seen; ``build_callback`` and
``callback_frame`` make the chatbot callbacks a lab case sends to the runtime.
"""

from lab.fake.callbacks import (
    CALLBACK_TOPIC,
    build_callback,
    callback_frame,
    dingtalk_id,
    dm_conversation_id,
)
from lab.fake.platform import (
    SESSION_TTL_S,
    TOKEN_TTL_S,
    FakeDingTalk,
    Fault,
    ReceivedMessage,
    Session,
    parse_fault_spec,
)

__all__ = [
    "CALLBACK_TOPIC",
    "SESSION_TTL_S",
    "TOKEN_TTL_S",
    "FakeDingTalk",
    "Fault",
    "ReceivedMessage",
    "Session",
    "build_callback",
    "callback_frame",
    "dingtalk_id",
    "dm_conversation_id",
    "parse_fault_spec",
]
