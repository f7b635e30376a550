"""``dta trace``: why did the bot (not) answer this message? The stored chain, and its cause.

The store already holds the whole chain of a message — the frame's deliveries, the
response gate's decision with every rule it checked, the run, each intent with its
attempts, the receipts (refusals included), and the task and memory changes the run made.
This module reads it back and names which of the four "no reply" causes of the behavior
contract applies, so an operator answers "why no reply?" without writing SQL:

1. ``silent_by_gate``: the response gate decided silence (a group line without an @, a
   paused robot…) — a pass, not a fault;
2. ``never_arrived``: no event was stored — the connection or the robot's binding (or a
   different store);
3. ``failed``: the run or its task failed or did not finish; ``uncertain`` (added): the
   answer's send is uncertain — DingTalk may have it, so it is never called failed;
4. ``answered``: the run finished and the platform took its answer (or the agent chose
   silence itself) — if the answer is wrong, that is the agent's answer to look at.

The console shows the same document per message; ``--json`` prints it for scripts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from agent.cli.trace_acts import approvals_of
from agent.cli.trace_cause import NEXT_STEP, Cause, answered_later_by, classify
from agent.cli.trace_records import (
    Clock,
    decision_record,
    delivery_records,
    event_record,
    feedback_records,
    form_records,
    intent_records,
    memory_records,
    receipt_record,
    run_record,
    task_records,
)
from agent.config import Settings
from agent.contracts import ReceiptStatus
from storage import Store
from storage.inspect import InspectRecords

SCHEMA = "dta.trace/1"


def shown_store(target: str) -> str:
    """Where a store is, safe to print: a database URL loses its password."""
    parts = urlsplit(target)
    if parts.scheme and parts.password:
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return parts._replace(netloc=f"{parts.username}:***@{host}{port}").geturl()
    return target


# The team's zone when a reader names none: the configuration's default (``timezone``).
DEFAULT_TIMEZONE: str = Settings.model_fields["timezone"].default


def when(epoch: float | None, timezone: str | None = None) -> str | None:
    """A timestamp people read, in ``timezone`` (the team's, ``Settings.timezone``; the
    machine's when None) with its offset: ``2026-01-01 08:00:00 +08:00``; or None."""
    if epoch is None:
        return None
    if timezone:
        moment = datetime.fromtimestamp(epoch, ZoneInfo(timezone))
    else:
        moment = datetime.fromtimestamp(epoch).astimezone()
    return f"{moment:%Y-%m-%d %H:%M:%S} {moment.isoformat(timespec='seconds')[19:]}"


def clock(timezone: str | None) -> Clock:
    """``when`` in one zone, for the readers that format many times."""
    return partial(when, timezone=timezone)


@dataclass
class Trace:
    """One message's stored chain and the cause it shows."""

    msg_id: str
    cause: Cause
    summary: str
    next_step: str
    event: dict[str, Any] | None = None
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    decision: dict[str, Any] | None = None
    run: dict[str, Any] | None = None
    intents: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    feedback: list[dict[str, Any]] = field(default_factory=list)  # 👍 / 👎 on the answer
    forms: list[dict[str, Any]] = field(default_factory=list)  # ask-user forms it asked or answered

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["cause"] = self.cause.value
        return document


def trace_message(store: Store, msg_id: str, timezone: str | None = None) -> Trace:
    """The whole stored chain of one message, and its cause; times and an act's
    arguments in ``timezone`` (the team's, ``Settings.timezone``)."""
    zone = timezone or DEFAULT_TIMEZONE
    when = clock(zone)
    records = store.inspect
    event = store.events.get_event(msg_id)
    if event is None:
        return _never_stored(records, msg_id, when)
    decision = decision_record(store.events.get_decision(msg_id))
    run = store.events.get_run(msg_id)
    receipts = [receipt_record(r, when) for r in store.actions.receipts(msg_id)]
    tasks = task_records(records.tasks_in_scope(event.thread_key), run)
    memory = memory_records(store.context.memory_in_scope(event.conversation.id), msg_id)
    later = answered_later_by(store, event, run) if run is not None else None
    cause, summary = classify(event, decision, run, receipts, tasks, [], later)
    return Trace(
        msg_id=msg_id,
        cause=cause,
        summary=summary,
        next_step=NEXT_STEP[cause],
        event=event_record(event, when),
        deliveries=delivery_records(records.delivery_log(msg_id), when),
        decision=decision,
        run=run_record(run, when, store.usage.cost_of_run(run.run_id)) if run else None,
        intents=intent_records(store, msg_id, zone),
        receipts=[r for r in receipts if r["status"] != ReceiptStatus.REFUSED.value],
        refusals=[r for r in receipts if r["status"] == ReceiptStatus.REFUSED.value],
        tasks=tasks,
        memory=memory,
        approvals=approvals_of(store, msg_id, when, zone),
        feedback=feedback_records(store, msg_id, when),
        forms=form_records(store, msg_id, when),
    )


def _never_stored(records: InspectRecords, msg_id: str, when: Clock) -> Trace:
    """A message with no stored event: never arrived, with any quarantined frame naming it."""
    quarantined = records.quarantine_mentioning(msg_id)
    for item in quarantined:
        item["received_at"] = when(item["received_at"])
    cause, summary = classify(None, None, None, [], [], quarantined)
    return Trace(msg_id, cause, summary, NEXT_STEP[cause], quarantined=quarantined)


@dataclass(frozen=True)
class Query:
    """What to look for; every condition given must hold."""

    msg_id: str | None = None
    conversation: str | None = None
    sender: str | None = None
    text: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 10

    def describe(self, timezone: str | None = None) -> dict[str, Any]:
        zone = timezone or DEFAULT_TIMEZONE
        return {
            "msg_id": self.msg_id,
            "conversation": self.conversation,
            "sender": self.sender,
            "text": self.text,
            "since": when(self.since, zone),
            "until": when(self.until, zone),
        }


def search(store: Store, query: Query, timezone: str | None = None) -> list[Trace]:
    """Every stored message matching ``query``, traced, newest first."""
    if query.msg_id is not None:
        return [trace_message(store, query.msg_id, timezone)]
    events = store.inspect.find_events(
        conversation=query.conversation,
        sender=query.sender,
        text=query.text,
        since=query.since,
        until=query.until,
        limit=query.limit,
    )
    return [trace_message(store, event.event_id, timezone) for event in events]


NO_MATCH = "no stored message matches: if it was sent, it never arrived here"


def document(
    store_path: str, query: Query, traces: list[Trace], timezone: str | None = None
) -> dict[str, Any]:
    """The ``--json`` form. No match is the second cause (never arrived) and says so."""
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "store": store_path,
        "query": query.describe(timezone),
        "matches": [t.to_dict() for t in traces],
    }
    if not traces:
        result["cause"] = Cause.NEVER_ARRIVED.value
        result["summary"] = NO_MATCH
        result["next_step"] = NEXT_STEP[Cause.NEVER_ARRIVED]
    return result
