"""What arrives: a chatbot callback normalised into an ``Event``, and the gate's verdict on it.

``Event`` carries who spoke (``Actor``), where (``Conversation``), to which robot (``Robot``),
how to answer while it lasts (``SessionWebhook``), and the message's quote and attachments
as DingTalk described them (never fetched at ingest). ``ResponseDecision`` is the response
gate's verdict on one event, and ``AgentDefinition`` is the robot's own side of the
conversation: who it is, for introductions and prompts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agent.contracts.base import Contract
from agent.contracts.codes import ConversationType, DecisionReason, Verdict


class AgentDefinition(Contract):
    """Who the robot is: used for self-introduction and in prompts."""

    name: str = "小钉"
    role: str = "团队的数字员工，回答问题、做简单计算、查阅团队知识库"
    duties: list[str] = Field(
        default_factory=lambda: ["回答团队知识库里的问题", "做算术计算", "说明自己能做什么"]
    )


class Conversation(Contract):
    id: str
    type: ConversationType
    title: str | None = None


class Actor(Contract):
    user_id: str  # senderStaffId: the id the OpenAPI and `at` use (senderId when it has none)
    dingtalk_id: str | None = None  # senderId
    # False for a sender DingTalk gave no staff id (external or cross-corp): user_id is then
    # their senderId, which ``at.atUserIds`` cannot resolve.
    has_staff_id: bool = True
    nick: str | None = None
    corp_id: str | None = None
    is_admin: bool = False


class Robot(Contract):
    code: str | None = None
    chatbot_user_id: str | None = None


class SessionWebhook(Contract):
    url: str
    expires_at: float  # epoch seconds

    def valid_at(self, now: float, margin_s: float = 0.0) -> bool:
        return now + margin_s < self.expires_at


class Scheduled(Contract):
    """What makes an event the runtime's own rather than a person's message.

    ``beat``: one heartbeat (``items`` are the events it dispatched, ``postponed`` the
    follow-ups quiet hours held back). ``follow_up``, ``reminder``, ``expiry``: one due item
    of the task ``task_id``, due at ``due_at``; its event id is derived from both, so a
    second beat or a second replica finds it already stored. ``operator``: ``dta send``.
    ``approval``: the decision on the approval ``approval_id`` (a click, an expiry), carried
    out. ``act_checked``: an act (intent ``intent_id``) whose outcome was in doubt, read back
    by the recovery pass: its asker is told what became of it. ``job``: one due slot
    (``due_at``) of the recurring job ``job_id`` (``agent/proactive/jobs.py``). ``form``: an
    ask-user form ``form_id`` ended (its asker submitted it on the card, cancelled it, or it
    expired).

    A store written before ``approval_id`` and ``intent_id`` existed carried both in
    ``task_id``: such an event reads as if written now (``_from_task_id``).
    """

    kind: Literal[
        "beat",
        "follow_up",
        "reminder",
        "expiry",
        "operator",
        "approval",
        "act_checked",
        "job",
        "form",
    ]
    task_id: str | None = None
    job_id: str | None = None
    form_id: str | None = None
    approval_id: str | None = None
    intent_id: str | None = None
    due_at: float | None = None
    items: list[str] = Field(default_factory=list)
    postponed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _from_task_id(cls, data: Any) -> Any:
        """An approval's or an act's id where an earlier version stored it: ``task_id``."""
        if not isinstance(data, dict):
            return data
        field = _ID_IN_TASK_ID.get(data.get("kind"))
        if field is None or data.get(field) is not None or data.get("task_id") is None:
            return data
        moved = {k: v for k, v in data.items() if k != "task_id"}
        moved[field] = data["task_id"]
        return moved


# The kinds whose id an earlier version kept in ``task_id``, and the field it belongs in.
_ID_IN_TASK_ID = {"approval": "approval_id", "act_checked": "intent_id"}


class Event(Contract):
    """A chatbot callback, normalised. ``event_id`` is DingTalk's msgId.

    Events the runtime makes itself (heartbeats, their due items, operator sends) carry
    ``scheduled``; they go through the same gates, and DingTalk never sent them.
    """

    schema_: Literal["dta.event/1"] = Field(default="dta.event/1", alias="$schema")
    event_id: str
    conversation: Conversation
    actor: Actor
    robot: Robot
    msgtype: str
    text: str = ""
    mentioned: bool = False
    at_users: list[str] = Field(default_factory=list)
    quote: dict[str, Any] | None = None
    # Media described at ingest (never fetched there): one dict per picture, file, video or
    # audio, with ``kind``, ``part_of`` (message|quote) and DingTalk's own fields
    # (downloadCode, fileName, duration, recognition...). See agent/dingtalk/readers.py.
    attachments: list[dict[str, Any]] = Field(default_factory=list)
    session_webhook: SessionWebhook | None = None
    created_at: float
    # Where created_at came from when the callback had no createAt ("frame_header": the
    # Stream frame's own time); absent when DingTalk's createAt was used.
    created_at_source: str | None = None
    received_at: float
    frame_message_id: str | None = None
    scheduled: Scheduled | None = None

    @property
    def thread_key(self) -> str:
        """Work is serial per (conversation, actor): one person's thread of requests."""
        return f"{self.conversation.id}|{self.actor.user_id}"

    @property
    def addressed(self) -> bool:
        """Directed at the robot: a DM or an @."""
        return self.conversation.type is ConversationType.DM or self.mentioned


class ResponseDecision(Contract):
    """The response gate's verdict, written per run as ``response-gate.json``."""

    schema_: Literal["dta.response-decision/1"] = Field(
        default="dta.response-decision/1", alias="$schema"
    )
    event_id: str
    verdict: Verdict
    reason: DecisionReason
    gate_version: str
    checked: list[str]
    decided_at: float
