"""A fake DingTalk for the lab: the platform's HTTP and Stream Mode sides, evidence and faults.

``FakeDingTalk`` serves DingTalk's token, session-webhook, robot OpenAPI and user-detail
endpoints on 127.0.0.1 and records what a user would have seen; its ``stream`` gateway is
what the real ``dingtalk-stream`` client connects to, and ``inject`` pushes a chatbot
callback down it. ``build_callback`` and ``callback_frame`` make the callbacks by hand.
``async with FakeDingTalk(clock) as fake:`` serves it for the block.

Imports run one way, bottom to top: ``docs_faults``, ``faults``, ``files``, ``ledger``,
``docs_state`` and ``workspace_state`` (pure data), ``state`` (the platform's memory and
rules), then ``http``, ``downloads`` (the message-file download), ``workspace``,
``calendar`` and ``docs`` (directory search, to-do, calendar; docs, wiki, AI tables),
``stream``, ``callbacks`` and ``control`` (each knows only the state and the HTTP helpers),
and ``platform`` (``FakeDingTalk``, which puts them together).
"""

from lab.fake.callbacks import (
    CALLBACK_TOPIC,
    build_callback,
    callback_frame,
    dingtalk_id,
    dm_conversation_id,
)
from lab.fake.control import LabControl
from lab.fake.faults import Fault, parse_fault_spec
from lab.fake.ledger import FrameRecord
from lab.fake.platform import FakeDingTalk
from lab.fake.state import SESSION_TTL_S, TOKEN_TTL_S, PlatformState, ReceivedMessage, Session
from lab.fake.stream import StreamGateway

__all__ = [
    "CALLBACK_TOPIC",
    "SESSION_TTL_S",
    "TOKEN_TTL_S",
    "FakeDingTalk",
    "Fault",
    "FrameRecord",
    "LabControl",
    "PlatformState",
    "ReceivedMessage",
    "Session",
    "StreamGateway",
    "build_callback",
    "callback_frame",
    "dingtalk_id",
    "dm_conversation_id",
    "parse_fault_spec",
]
