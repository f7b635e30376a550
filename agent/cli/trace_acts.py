"""What the operators' readers show of acts (``dta trace``, ``dta approvals``, the console):
what became of each act in the one outcome vocabulary (agent/acts/told.py), its arguments
as a person reads them (agent/acts/shown.py), and the approvals a run asked for with every
click on them.

    act_view(store, intent, approvals, "Asia/Shanghai")  # the act's line, outcome, arguments
    approval_act(store, record)                          # an approval's act: receipts, outcome
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.acts.shown import person_names, readable
from agent.acts.told import last_act_receipt, outcome_of, status_words
from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActOutcome,
    ApprovalRecord,
    ApprovalStatus,
    Receipt,
)
from storage import Store

Clock = Callable[[float | None], str | None]


def outcome_line(
    outcome: ActOutcome, receipt: Receipt | None, approval: ApprovalRecord | None
) -> str:
    """The operator's one line for an outcome (``status_words``), with the refusal's or the
    void's code."""
    if (
        outcome is ActOutcome.PENDING
        and approval is not None
        and approval.status is ApprovalStatus.APPROVED
    ):
        return "approved; not carried out yet"  # its settlement has not run (or is running)
    reason = None
    if outcome is ActOutcome.VOID and approval is not None and approval.void_reason is not None:
        reason = approval.void_reason.value
    elif outcome is ActOutcome.REFUSED and receipt is not None:
        reason = receipt.reason
    return status_words(outcome, reason)


def act_outcome(
    receipts: list[Receipt], approval: ApprovalRecord | None, has_intent: bool
) -> tuple[ActOutcome, Receipt | None]:
    """What became of an act from its receipts and its approval. An act stored as an intent
    with no receipt may have been sent (a crash in between): uncertain, never failed."""
    last = last_act_receipt(receipts)
    carried_out = approval is None or approval.status is ApprovalStatus.APPROVED
    if last is None and has_intent and carried_out:
        return ActOutcome.UNCERTAIN, None
    return outcome_of(last, approval), last


@dataclass(frozen=True)
class ApprovalAct:
    """What became of an approval's act: its receipts (oldest first), the one that says
    what became of it, the outcome and the operator's line for it."""

    receipts: list[Receipt]
    last: Receipt | None
    outcome: ActOutcome
    words: str


def approval_act(store: Store, record: ApprovalRecord) -> ApprovalAct:
    """The act under ``record``: the intent whose idempotency key is the approval's
    ``act_key`` and its receipts; without one, the act receipts of its message (an older
    record names no key; with a key, only a refusal carrying out the decision is left:
    those of another run than the proposing one, from the decision on)."""
    intent = store.actions.intent_by_key(record.act_key) if record.act_key else None
    if intent is not None:
        receipts = store.actions.intent_receipts(intent.intent_id)
    else:
        receipts = [r for r in store.actions.receipts(record.event_id) if r.kind is ActionKind.ACT]
        if record.act_key is not None:
            decided = record.decided_at
            receipts = [
                r
                for r in receipts
                if r.intent_id is None
                and r.run_id != record.run_id
                and decided is not None
                and r.created_at >= decided
            ]
    outcome, last = act_outcome(receipts, record, intent is not None)
    return ApprovalAct(receipts, last, outcome, outcome_line(outcome, last, record))


def prompt_receipts(store: Store, record: ApprovalRecord) -> list[Receipt]:
    """The receipts of the approval's prompt (its card, or the text with the code)."""
    ids = {
        i.intent_id
        for i in store.actions.intents(record.event_id)
        if i.approval_id == record.approval_id
    }
    return [r for r in store.actions.receipts(record.event_id) if r.intent_id in ids]


def receipt_words(receipt: Receipt) -> str:
    """One receipt of an act, said in the vocabulary (what that receipt alone tells)."""
    return outcome_line(outcome_of(receipt), receipt, None)


def _approval_for(intent: ActionIntent, approvals: list[ApprovalRecord]) -> ApprovalRecord | None:
    return next((a for a in approvals if a.act_key == intent.idempotency_key), None)


def act_view(
    store: Store, intent: ActionIntent, approvals: list[ApprovalRecord], timezone: str
) -> dict[str, Any]:
    """An act intent for ``dta trace``: its raw tool and arguments, what became of it and
    the line a person reads (``act dingtalk.todo.create 「续费域名」 → done, read back``)."""
    approval = _approval_for(intent, approvals)
    outcome, last = act_outcome(store.actions.intent_receipts(intent.intent_id), approval, True)
    words = outcome_line(outcome, last, approval)
    names = approval.names if approval is not None else {}
    english = approval.english if approval is not None else False
    what = intent.authorization.object if intent.authorization is not None else None
    arguments = intent.arguments or {}
    shown = readable(intent.tool or "", arguments, names, timezone, english, what)
    head = f"{intent.tool} 「{what}」" if what else f"{intent.tool}"
    return {
        "tool": intent.tool,
        "arguments": arguments,
        "object": what,
        "approval_id": approval.approval_id if approval is not None else None,
        "outcome": outcome.value,
        "outcome_words": words,
        "shown": [list(pair) for pair in shown],
        "line": f"act {head} → {words}",
    }


def act_text(view: dict[str, Any]) -> str:
    """An act's text where a page shows one line per intent: the act, what became of it
    and its arguments as read."""
    said = " · ".join(f"{label}：{value}" for label, value in view["shown"])
    return f"{view['line']}" + (f" · {said}" if said else "")


def approvals_of(store: Store, event_id: str, when: Clock, timezone: str) -> list[dict[str, Any]]:
    """The approvals the run of ``event_id`` asked for, what became of each one's act, and
    every click on them (staff ids kept; ``names`` says who they are)."""
    shown = []
    for a in store.approvals.all(event_id):
        act = approval_act(store, a)
        arguments = readable(
            a.tool, a.arguments, a.names, timezone, a.english, a.authorization.object
        )
        shown.append(
            {
                "approval_id": a.approval_id,
                "tool": a.tool,
                "status": a.status.value,
                "object": a.authorization.object,
                "audience": a.authorization.audience,
                "impact": a.authorization.impact,
                "names": a.names,
                "arguments": a.arguments,
                "shown": [list(pair) for pair in arguments],
                "outcome": act.outcome.value,
                "outcome_words": act.words,
                "decided_by": a.decided_by,
                "decided_at": when(a.decided_at),
                "expires_at": when(a.expires_at),
                "clicks": [
                    {"user": c["user_id"], "action": c["action"], "outcome": c["outcome"]}
                    for c in store.approvals.clicks(a.approval_id)
                ],
            }
        )
    return shown


def named(user: str | None, names: dict[str, str]) -> str:
    """A person by name when the directory named them, else their staff id."""
    if not user:
        return ""
    return person_names([user], names)
