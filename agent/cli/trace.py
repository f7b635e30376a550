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
3. ``failed``: the run or its task failed, did not finish, or a send is uncertain;
4. ``answered``: the run finished and the platform took its answer (or the agent chose
   silence itself) — if the answer is wrong, that is the agent's answer to look at.

The console shows the same document per message; ``--json`` prints it for scripts.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from agent.cli.trace_acts import act_text, approvals_of
from agent.contracts import (
    Event,
    ReceiptStatus,
    Run,
    RunState,
    Verdict,
)
from storage import Store
from storage.inspect import InspectRecords

SCHEMA = "dta.trace/1"


class Cause(StrEnum):
    SILENT_BY_GATE = "silent_by_gate"
    NEVER_ARRIVED = "never_arrived"
    FAILED = "failed"
    ANSWERED = "answered"


# Why the gate stays silent, in words, and where a builder changes it.
GATE_SILENCES: dict[str, str] = {
    "group_not_mentioned": "a group message that does not @ the robot; @ it to get an answer",
    "self_message": "the robot's own message",
    "paused": "the robot is paused (paused = true in the configuration)",
    "denied": "the sender is listed in deny_users",
    "not_allowed": "allow_users / allow_conversations in the configuration leave this out",
    "stale_event": "the message was older than max_event_age_s when it arrived",
    "unsupported_msgtype": "its message type is not in supported_msgtypes",
    "empty_message": "the message has no text to answer",
    "duplicate": "a repeat delivery of a message already stored",
}

NEXT_STEP: dict[Cause, str] = {
    Cause.SILENT_BY_GATE: "nothing is broken: the response gate is working as configured."
    " Change the rule named above only if it is wrong for you.",
    Cause.NEVER_ARRIVED: "check the connection (`dta doctor`, /readyz) and that the robot is"
    " bound to this app; a message sent to another robot or daemon is in another store."
    " Sending it again does not tell these apart.",
    Cause.FAILED: "read the failure above and the daemon's log lines carrying this run id;"
    " a run left working resumes when the daemon runs.",
    Cause.ANSWERED: "the chain is complete: if the answer is wrong, it is the agent's answer"
    " (its skills, knowledge or provider) — turn it into a lab case.",
}


def inspector(store: Store) -> InspectRecords:
    """The store's inspection queries (the ``InspectRecords`` mixin).

    ``Store`` gains the mixin in ``storage/store.py``; until a store object has it, the
    queries are bound to the same connection, so callers never care which it is.
    """
    if isinstance(store, InspectRecords):
        return store
    bound = InspectRecords.__new__(InspectRecords)
    bound.__dict__.update(store.__dict__)
    return bound


def shown_store(target: str) -> str:
    """Where a store is, safe to print: a database URL loses its password."""
    parts = urlsplit(target)
    if parts.scheme and parts.password:
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return parts._replace(netloc=f"{parts.username}:***@{host}{port}").geturl()
    return target


def when(epoch: float | None) -> str | None:
    """A local timestamp people read, with the zone, or None."""
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(epoch))


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

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["cause"] = self.cause.value
        return document


def _event(event: Event) -> dict[str, Any]:
    return {
        "msg_id": event.event_id,
        "conversation": event.conversation.id,
        "scene": event.conversation.type.value,
        "sender": event.actor.user_id,
        "nick": event.actor.nick,
        "text": event.text,
        "msgtype": event.msgtype,
        "mentioned": event.mentioned,
        "created_at": when(event.created_at),
        "received_at": when(event.received_at),
    }


def _run(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "state": run.state.value,
        "provider": run.provider,
        "generation": run.generation,
        "allowed_actions": [a.value for a in run.allowed_actions],
        "skills": [f"{s.name}@{s.version}" for s in run.skill_snapshot.skills],
        "usage": run.usage,
        "tool_calls": run.evidence.get("tool_calls", []),
        "failure": run.failure,
        "answered_by": run.answered_by,
        "degraded": run.degraded,
        "started_at": when(run.created_at),
        "updated_at": when(run.updated_at),
    }


def _intents(store: Store, event_id: str) -> list[dict[str, Any]]:
    chain = []
    for intent in store.intents(event_id):
        webhook = intent.target.session_webhook
        chain.append(
            {
                "kind": intent.kind.value,
                "chunk": f"{intent.chunk}/{intent.chunks}",
                "target": intent.target.conversation_id,
                "webhook_host": urlsplit(webhook.url).netloc if webhook else None,
                "text": intent.content.text if intent.content else act_text(intent),
                "gate_checks": intent.gate_checks,
                "attempts": [
                    {
                        "channel": a.channel.value,
                        "outcome": a.outcome.value,
                        "evidence": a.evidence.to_dict() if a.evidence else {},
                    }
                    for a in store.attempts(intent.intent_id)
                ],
            }
        )
    return chain


def _classify(
    event: Event | None,
    decision: dict[str, Any] | None,
    run: Run | None,
    receipts: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    quarantined: list[dict[str, Any]],
    superseded_by: tuple[str, str] | None = None,
) -> tuple[Cause, str]:
    """Which of the four causes the chain shows, and one sentence saying why.
    ``superseded_by``: the later message (id, text) whose answer covered this one."""
    if event is None:
        if quarantined:
            reason = quarantined[0]["reason"]
            return Cause.NEVER_ARRIVED, (
                f"a frame naming it arrived but could not be read (quarantined: {reason}),"
                " so no event was stored"
            )
        return Cause.NEVER_ARRIVED, "no event with this msgId is in the store"
    if decision is not None and decision["verdict"] == Verdict.SILENT.value:
        reason = decision["reason"]
        why = GATE_SILENCES.get(reason, reason)
        return Cause.SILENT_BY_GATE, f"silent by the response gate ({reason}): {why}"
    if run is None:
        return Cause.FAILED, (
            "stored but never run: the daemon was not running or is behind (the store is"
            " the queue; it is picked up when the daemon runs)"
        )
    failed_tasks = [t for t in tasks if t["status"] == "failed"]
    uncertain = [r for r in receipts if r["status"] == ReceiptStatus.UNCERTAIN.value]
    if run.state is RunState.WORKING:
        return Cause.FAILED, "the run has not finished (still working, or the daemon stopped)"
    if uncertain:
        return Cause.FAILED, (
            "a send is uncertain (DingTalk may or may not have it; it is never resent blindly)"
        )
    if run.state is RunState.INTERRUPTED and superseded_by is not None:
        later, text = superseded_by
        return Cause.ANSWERED, (
            f"answered together with the later message {later} (「{text[:40]}」): it came"
            " while this one was being answered, so one reply covered both"
        )
    if run.state in (RunState.FAILED, RunState.INTERRUPTED):
        failure = f": {run.failure}" if run.failure else ""
        return Cause.FAILED, f"the run ended {run.state.value}{failure}"
    if failed_tasks:
        return Cause.FAILED, f"the task {failed_tasks[0]['goal']!s} failed"
    delivered = [r for r in receipts if r["status"] in ("accepted", "verified")]
    if delivered:
        kinds = ", ".join(sorted({r["kind"] for r in delivered if r["kind"]}))
        return Cause.ANSWERED, f"the platform took the {kinds}"
    silent = next((r for r in receipts if r["status"] == "silent"), None)
    reason = silent["reason"] if silent else run.state.value
    return Cause.ANSWERED, (
        f"the run finished and chose silence itself ({reason}): that is the agent's judgement"
    )


def _superseded_by(store: Store, event: Event, run: Run) -> tuple[str, str] | None:
    """For a run a newer message of the same person superseded: the first later message
    in the thread whose run did answer (its reply took this one in), as (id, text)."""
    if run.state is not RunState.INTERRUPTED:
        return None
    actor, conversation = event.actor.user_id, event.conversation.id
    for later in store.events_between(conversation, actor, event.created_at, float("inf")):
        if later.event_id == event.event_id:
            continue
        answered = store.get_run(later.event_id)
        if answered is not None and answered.state in (RunState.DONE, RunState.WAITING):
            return later.event_id, later.text
    return None


def _receipt(receipt: Any) -> dict[str, Any]:
    return {
        "kind": receipt.kind.value if receipt.kind else None,
        "status": receipt.status.value,
        "reason": receipt.reason,
        "channels": [c.value for c in receipt.evidence.channels_tried],
        "detail": receipt.evidence.detail or receipt.evidence.error or receipt.evidence.errmsg,
        "readback": receipt.evidence.readback,
        "at": when(receipt.created_at),
    }


def trace_message(store: Store, msg_id: str) -> Trace:
    """The whole stored chain of one message, and its cause."""
    records = inspector(store)
    event = store.get_event(msg_id)
    quarantined = [] if event is not None else records.quarantine_mentioning(msg_id)
    for item in quarantined:
        item["received_at"] = when(item["received_at"])
    if event is None:
        cause, summary = _classify(None, None, None, [], [], quarantined)
        return Trace(msg_id, cause, summary, NEXT_STEP[cause], quarantined=quarantined)
    decision_record = store.get_decision(msg_id)
    decision = (
        {
            "verdict": decision_record.verdict.value,
            "reason": decision_record.reason.value,
            "checked": decision_record.checked,
            "gate_version": decision_record.gate_version,
        }
        if decision_record
        else None
    )
    run = store.get_run(msg_id)
    receipts = [_receipt(r) for r in store.receipts(msg_id)]
    run_id = run.run_id if run else None
    tasks = [
        {"task_id": t.task_id, "status": t.status.value, "revision": t.revision, "goal": t.goal}
        for t in records.tasks_in_scope(event.thread_key)
        if t.updated_by_run == run_id
    ]
    memory = [
        {
            "candidate_id": c.candidate_id,
            "status": c.status.value,
            "revision": c.revision,
            "title": c.title,
        }
        for c in records.memory_in_scope(event.conversation.id)
        if f"msg:{msg_id}" in c.source_refs
    ]
    later = _superseded_by(store, event, run) if run is not None else None
    cause, summary = _classify(event, decision, run, receipts, tasks, [], later)
    return Trace(
        msg_id=msg_id,
        cause=cause,
        summary=summary,
        next_step=NEXT_STEP[cause],
        event=_event(event),
        deliveries=[
            {"at": when(d.received_at), "duplicate": d.duplicate}
            for d in records.delivery_log(msg_id)
        ],
        decision=decision,
        run=_run(run) if run else None,
        intents=_intents(store, msg_id),
        receipts=[r for r in receipts if r["status"] != ReceiptStatus.REFUSED.value],
        refusals=[r for r in receipts if r["status"] == ReceiptStatus.REFUSED.value],
        tasks=tasks,
        memory=memory,
        approvals=approvals_of(store, msg_id, when),
    )


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

    def describe(self) -> dict[str, Any]:
        return {
            "msg_id": self.msg_id,
            "conversation": self.conversation,
            "sender": self.sender,
            "text": self.text,
            "since": when(self.since),
            "until": when(self.until),
        }


def search(store: Store, query: Query) -> list[Trace]:
    """Every stored message matching ``query``, traced, newest first."""
    if query.msg_id is not None:
        return [trace_message(store, query.msg_id)]
    events = inspector(store).find_events(
        conversation=query.conversation,
        sender=query.sender,
        text=query.text,
        since=query.since,
        until=query.until,
        limit=query.limit,
    )
    return [trace_message(store, event.event_id) for event in events]


NO_MATCH = "no stored message matches: if it was sent, it never arrived here"


def document(store_path: str, query: Query, traces: list[Trace]) -> dict[str, Any]:
    """The ``--json`` form. No match is the second cause (never arrived) and says so."""
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "store": store_path,
        "query": query.describe(),
        "matches": [t.to_dict() for t in traces],
    }
    if not traces:
        result["cause"] = Cause.NEVER_ARRIVED.value
        result["summary"] = NO_MATCH
        result["next_step"] = NEXT_STEP[Cause.NEVER_ARRIVED]
    return result
