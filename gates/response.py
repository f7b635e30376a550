"""The response gate: may the robot respond to this event at all?

It runs before any content is generated. Rules are ordered and the first match wins; the
decision lists every rule it checked so a reader can see why. ``engage`` only grants the
right to handle the origin, never to write anywhere else.

The ``duplicate`` reason is decided earlier, at ingest: a msgId already in the store never
reaches this gate; each such delivery is acked and counted (``deliveries``, the
``dta_frames{kind="duplicate"}`` metric, ``expect.duplicates`` in lab cases).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.contracts import (
    TEXT_MSGTYPES,
    ConversationType,
    DecisionReason,
    EngageReason,
    Event,
    ResponseDecision,
    SilentReason,
    Verdict,
)

GATE_VERSION = "response-gate/1"
ALL_MSGTYPES = "*"


@dataclass(frozen=True)
class ResponsePolicy:
    paused: bool
    allow_users: frozenset[str]
    deny_users: frozenset[str]
    # Applies to group conversations; one-to-one chats are governed by allow_users.
    allow_conversations: frozenset[str]
    max_event_age_s: float
    # "*" reads every type DingTalk sends, including types it adds later: a DM or an @
    # never ends in silence because of its type. An operator who lists types deliberately
    # excludes the rest (``unsupported_msgtype``).
    supported_msgtypes: frozenset[str]
    robot_code: str | None

    def supports(self, msgtype: str) -> bool:
        return ALL_MSGTYPES in self.supported_msgtypes or msgtype in self.supported_msgtypes


@dataclass(frozen=True)
class _Facts:
    event: Event
    now: float
    policy: ResponsePolicy


def _is_self(f: _Facts) -> bool:
    actor, robot = f.event.actor, f.event.robot
    if robot.chatbot_user_id and actor.dingtalk_id == robot.chatbot_user_id:
        return True
    codes = {code for code in (robot.code, f.policy.robot_code) if code}
    return actor.user_id in codes


def _is_denied(f: _Facts) -> bool:
    actor = f.event.actor
    return actor.user_id in f.policy.deny_users or (actor.dingtalk_id or "") in f.policy.deny_users


def _is_not_allowed(f: _Facts) -> bool:
    policy, event = f.policy, f.event
    if policy.allow_users and event.actor.user_id not in policy.allow_users:
        return True
    return (
        bool(policy.allow_conversations)
        and event.conversation.type is ConversationType.GROUP
        and event.conversation.id not in policy.allow_conversations
    )


def _is_empty(f: _Facts) -> bool:
    """Nothing to read: no text, no media, and a type whose meaning is its text. A picture,
    a file or a type dta does not know is something; a blank @ is nothing."""
    event = f.event
    if event.text.strip() or any(a.get("part_of") == "message" for a in event.attachments):
        return False
    return event.msgtype in TEXT_MSGTYPES


def _kind(f: _Facts) -> str | None:
    scheduled = f.event.scheduled
    return scheduled.kind if scheduled is not None else None


def _beat(f: _Facts) -> bool:
    return _kind(f) == "beat"


def _beat_items(f: _Facts) -> list[str]:
    return f.event.scheduled.items if f.event.scheduled is not None else []


def _beat_postponed(f: _Facts) -> bool:
    return f.event.scheduled is not None and f.event.scheduled.postponed > 0


# (name, predicate, reason): checked in this order, first match decides. A silent reason
# makes the verdict silent, an engage reason engages (the runtime's own events engage here,
# past the operator's stops, and never as a person's message would).
_RULES: list[tuple[str, Callable[[_Facts], bool], DecisionReason]] = [
    ("paused", lambda f: f.policy.paused, SilentReason.PAUSED),
    ("self_message", _is_self, SilentReason.SELF_MESSAGE),
    # A heartbeat is recorded, never answered: its due items are events of their own.
    ("heartbeat_due", lambda f: _beat(f) and bool(_beat_items(f)), SilentReason.HEARTBEAT_DUE),
    ("quiet_hours", lambda f: _beat(f) and _beat_postponed(f), SilentReason.QUIET_HOURS),
    ("heartbeat_idle", _beat, SilentReason.HEARTBEAT_IDLE),
    # ``dta send``: the operator chose the recipient (only a pause stops it).
    ("operator", lambda f: _kind(f) == "operator", EngageReason.OPERATOR),
    ("denied", _is_denied, SilentReason.DENIED),
    ("not_allowed", _is_not_allowed, SilentReason.NOT_ALLOWED),
    # A due item goes to the person its task came from, if they are still allowed.
    ("scheduled", lambda f: _kind(f) is not None, EngageReason.SCHEDULED),
    (
        # Stale on arrival: DingTalk delivered it too late. A message that arrived fresh
        # and waited on us (a restart, a queue) is still ours to answer; judging it by
        # processing time would also disagree with the verdict ingest used for superseding.
        "stale_event",
        lambda f: f.event.received_at - f.event.created_at > f.policy.max_event_age_s,
        SilentReason.STALE_EVENT,
    ),
    (
        "unsupported_msgtype",
        lambda f: not f.policy.supports(f.event.msgtype),
        SilentReason.UNSUPPORTED_MSGTYPE,
    ),
    (
        "group_not_mentioned",
        lambda f: f.event.conversation.type is ConversationType.GROUP and not f.event.mentioned,
        SilentReason.GROUP_NOT_MENTIONED,
    ),
    ("empty_message", _is_empty, SilentReason.EMPTY_MESSAGE),
]

_RULE_NAMES = [name for name, _, _ in _RULES]


class ResponseGate:
    def __init__(self, policy: ResponsePolicy) -> None:
        self.policy = policy

    def engages(self, event: Event, now: float) -> bool:
        """Will the robot answer this event? (The verdict alone, without its record.)"""
        reason, _ = self._first_match(event, now)
        return not isinstance(reason, SilentReason)

    def supersedes(self, event: Event, now: float) -> bool:
        """Does this event make the older runs of its thread stale? (Ingest asks.) Only a
        request in words the robot will answer: a picture or a file alone adds to what
        the person asked, it does not correct it, so both get their answer."""
        return bool(event.text.strip()) and self.engages(event, now)

    def decide(self, event: Event, now: float) -> ResponseDecision:
        reason, checked = self._first_match(event, now)
        verdict = Verdict.SILENT if isinstance(reason, SilentReason) else Verdict.ENGAGE
        return self._decision(event, verdict, reason, checked, now)

    def _first_match(self, event: Event, now: float) -> tuple[DecisionReason, list[str]]:
        """The first rule that matches (or the engage at the end), and the rules checked."""
        facts = _Facts(event=event, now=now, policy=self.policy)
        for index, (_, predicate, reason) in enumerate(_RULES):
            if predicate(facts):
                return reason, _RULE_NAMES[: index + 1]
        engage = (
            EngageReason.DM
            if event.conversation.type is ConversationType.DM
            else EngageReason.MENTIONED
        )
        return engage, [*_RULE_NAMES, "engage"]

    @staticmethod
    def _decision(
        event: Event, verdict: Verdict, reason: DecisionReason, checked: list[str], now: float
    ) -> ResponseDecision:
        return ResponseDecision(
            event_id=event.event_id,
            verdict=verdict,
            reason=reason,
            gate_version=GATE_VERSION,
            checked=checked,
            decided_at=now,
        )
