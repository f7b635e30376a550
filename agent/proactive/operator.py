"""``dta send --user ID | --group CID "text"``: one message from the operator, as the robot.

It is an event of the runtime's own (``scheduled.kind = "operator"``), stored like any
other and run through the same pipeline: the response gate engages it as ``operator`` (only
a pause stops it), and the text goes through the action gate — write budgets, content
limits, no @all — and the broker, by the OpenAPI (there is no session webhook to answer
on), with a receipt. The origin is exactly the one recipient named: a user for a
one-to-one message, a group for a group message (no one @-ed).

A one-to-one send's conversation is ``user:<staff id>`` (the robot may never have had a
chat with that person), so its per-conversation write budget is its own.
"""

from __future__ import annotations

from agent.contracts import (
    Actor,
    Conversation,
    ConversationType,
    Event,
    Receipt,
    Robot,
    Scheduled,
    new_id,
)
from agent.run.pipeline import Pipeline
from storage import Store

OPERATOR_ACTOR = "operator"


def operator_event(
    text: str,
    now: float,
    *,
    user: str | None = None,
    group: str | None = None,
    robot_code: str | None = None,
    event_id: str | None = None,
) -> Event:
    """The operator's message to exactly one user or one group."""
    if (user is None) == (group is None):
        raise ValueError("name exactly one recipient: a user or a group")
    if group is not None:
        conversation = Conversation(id=group, type=ConversationType.GROUP)
        actor = Actor(user_id=OPERATOR_ACTOR, nick="operator")
    else:
        assert user is not None
        conversation = Conversation(id=f"user:{user}", type=ConversationType.DM)
        actor = Actor(user_id=user)
    return Event(
        event_id=event_id or new_id("op"),
        conversation=conversation,
        actor=actor,
        robot=Robot(code=robot_code),
        msgtype="operator",
        text=text,
        created_at=now,
        received_at=now,
        scheduled=Scheduled(kind="operator"),
    )


async def send(store: Store, pipeline: Pipeline, event: Event) -> list[Receipt]:
    """Store the operator's event and run it to its receipts."""
    inserted = store.events.add_event(event, event.to_json(), supersedes=False)
    await pipeline.process(event, inserted.generation)
    return store.actions.receipts(event.event_id)


def receipt_line(receipt: Receipt) -> str:
    """One line a person reads: the status, why, and what DingTalk said."""
    evidence = receipt.evidence
    channels = ",".join(c.value for c in evidence.channels_tried) or "none"
    parts = [f"{receipt.kind.value if receipt.kind else '-'} {receipt.status.value}"]
    if receipt.reason:
        parts.append(f"reason={receipt.reason}")
    parts.append(f"channel={channels}")
    if evidence.process_query_key:
        parts.append(f"processQueryKey={evidence.process_query_key}")
    said = evidence.errmsg or evidence.detail
    if said:
        parts.append(f"platform: {said}")
    return f"{receipt.receipt_id}  " + "  ".join(parts)
