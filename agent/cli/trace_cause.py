"""Which of the four "no reply" causes a message's stored chain shows, and what to do next.

``agent/cli/trace.py`` reads the chain; this module only judges it: silent by the gate,
never arrived, failed, or answered (the behavior contract's four causes), each with one
sentence saying why and the step an operator takes next.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from agent.contracts import Event, ReceiptStatus, Run, RunState, SilentReason, Verdict
from storage import Store


class Cause(StrEnum):
    SILENT_BY_GATE = "silent_by_gate"
    NEVER_ARRIVED = "never_arrived"
    FAILED = "failed"
    ANSWERED = "answered"
    # Added: a send DingTalk may or may not have (never called failed: it may have happened)
    UNCERTAIN = "uncertain"


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
    Cause.UNCERTAIN: "look in the conversation (or ask the person) whether it arrived: dta"
    " never sends it again blindly; a read-back, where DingTalk offers one, settles it.",
}
# The receipts that carry the run's answer (an ack, a prompt or an act in doubt does not
# make the answer uncertain when the answer itself went).
ANSWER_KINDS = ("reply", "ask")


def classify(
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
    delivered = [r for r in receipts if r["status"] in ("accepted", "verified")]
    if run.state is RunState.WORKING:
        return Cause.FAILED, "the run has not finished (still working, or the daemon stopped)"
    if uncertain and not _answer_went(run, delivered, uncertain):
        return Cause.UNCERTAIN, (
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
    if delivered:
        kinds = ", ".join(sorted({r["kind"] for r in delivered if r["kind"]}))
        doubt = ", ".join(sorted({r["kind"] for r in uncertain if r["kind"]}))
        also = f"; the {doubt} is uncertain (DingTalk may or may not have it)" if doubt else ""
        return Cause.ANSWERED, f"the platform took the {kinds}{also}"
    silent = next((r for r in receipts if r["status"] == "silent"), None)
    reason = silent["reason"] if silent else run.state.value
    if silent is not None and reason == SilentReason.ANSWERED_TOGETHER:  # a file with its words
        return Cause.ANSWERED, f"answered together with the words sent with it: {silent['detail']}"
    return Cause.ANSWERED, (
        f"the run finished and chose silence itself ({reason}): that is the agent's judgement"
    )


def _answer_went(
    run: Run, delivered: list[dict[str, Any]], uncertain: list[dict[str, Any]]
) -> bool:
    """A finished run whose answer the platform took, with only something else in doubt."""
    if run.state not in (RunState.DONE, RunState.WAITING):
        return False
    went = any(r["kind"] in ANSWER_KINDS for r in delivered)
    return went and not any(r["kind"] in ANSWER_KINDS for r in uncertain)


def answered_later_by(store: Store, event: Event, run: Run) -> tuple[str, str] | None:
    """For a run a newer message of the same person superseded: the first later message
    in the thread whose run did answer (its reply took this one in), as (id, text)."""
    if run.state is not RunState.INTERRUPTED:
        return None
    actor, conversation = event.actor.user_id, event.conversation.id
    for later in store.context.events_between(conversation, actor, event.created_at, float("inf")):
        if later.event_id == event.event_id:
            continue
        answered = store.events.get_run(later.event_id)
        if answered is not None and answered.state in (RunState.DONE, RunState.WAITING):
            return later.event_id, later.text
    return None
