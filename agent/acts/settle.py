"""Carrying out an approval's decision: the act run once, or never, and the asker told.

A decision (a click, a text code, an expiry, a void) is carried out by a run: of the
runtime's own event ``approval:<id>`` (a click, an expiry, a void), or of the person's code
reply itself. Either way the act goes through the action gate again, now with its approval
(``gates/act_checks.py``: approved, and for exactly these arguments, or refused with
``approval_denied`` / ``approval_expired`` / ``approval_void``), bound to its authorization
snapshot, not to the thread's generation (a click bumps nothing).

The act is stored for the message whose run proposed it (its receipts name that event), in
the name of the run carrying it out (this replica holds that one), under the key the
proposal had: whatever crashes, it runs at most once. The proposing run, left ``waiting``,
is closed, and the card shows the outcome.
"""

from __future__ import annotations

import logging

from agent.acts.approval_card import ApprovalCards
from agent.acts.told import (
    card_words,
    checked_words,
    last_act_receipt,
    outcome_of,
    reply_words,
)
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    Actor,
    ActOutcome,
    ApprovalRecord,
    Conversation,
    Event,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Robot,
    Run,
    RunState,
    Scheduled,
    SilentReason,
    VoidReason,
)
from agent.run.acting import Acting
from agent.run.endings import Endings
from agent.run.outcome import RunOutcome
from agent.run.ways import ActAs
from storage import Store

log = logging.getLogger("dta.approvals")


def result_text(record: ApprovalRecord, receipt: Receipt | None) -> str | None:
    """What the asker is told once the decision is carried out (None: nothing to say)."""
    auth = record.authorization
    outcome = outcome_of(receipt, record)
    if outcome is ActOutcome.VOID and record.void_reason == VoidReason.SUPERSEDED:
        return None  # the new request that voided it has its own prompt
    what = f"{auth.action.rstrip('.')}「{auth.object}」"
    reason = record.void_reason if outcome is ActOutcome.VOID else None
    if receipt is not None and reason is None:
        reason = receipt.reason
    detail = None
    if receipt is not None:
        evidence = receipt.evidence
        refused = receipt.status is ReceiptStatus.REFUSED
        detail = evidence.detail if refused else (evidence.errmsg or evidence.error)
    checkable = not record.tool.startswith("mcp.")
    return reply_words(
        outcome, what, reason=reason, detail=detail, english=record.english, checkable=checkable
    )


def checked_event(intent: ActionIntent, now: float) -> Event:
    """The runtime's own event that tells the asker what a read-back found of an act whose
    outcome they were told was not confirmed (its id from the intent: stored once)."""
    target = intent.target
    return Event(
        event_id=f"act-checked:{intent.intent_id}",
        conversation=Conversation(id=target.conversation_id, type=target.conversation_type),
        actor=Actor(user_id=target.user_id, nick=target.nick, has_staff_id=target.has_staff_id),
        robot=Robot(code=target.robot_code),
        msgtype="scheduled",
        text=f"act {intent.intent_id} checked",
        created_at=now,
        received_at=now,
        scheduled=Scheduled(kind="act_checked", intent_id=intent.intent_id),
    )


class ApprovalSettlement:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        acting: Acting,
        endings: Endings,
        cards: ApprovalCards | None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.acting = acting
        self.endings = endings
        self.cards = cards

    async def handle(self, run: Run, approval_id: str) -> Run:
        """The run of the event ``approval:<id>``."""
        record = self.store.approvals.get_approval(approval_id)
        if record is None or record.status.is_open:
            return self.endings.end_silent(
                run, SilentReason.NOT_DUE, f"approval {approval_id} has no decision"
            )
        return await self.carry_out(record, run)

    def _named(self, run: Run, text: str) -> str:
        """In a group the outcome is for the asker: @-ed over the asking message's webhook
        while it lives, else (the OpenAPI cannot @) named at the start."""
        origin = run.origin
        if origin.conversation_type.value != "group":
            return text
        if self.acting.broker.webhook_problem(origin) is None:  # as the transport chooses
            return text
        return f"{origin.nick or origin.user_id}，{text}"

    async def tell_checked(self, run: Run, intent_id: str) -> Run:
        """The run of ``act-checked:<intent>``: the asker hears what the read-back found
        (「核对过了：…」), and the act's approval card, if any, shows it too."""
        intent = self.store.actions.intent(intent_id)
        last = last_act_receipt(self.store.actions.intent_receipts(intent_id)) if intent else None
        if intent is None or last is None or intent.authorization is None:
            return self.endings.end_silent(run, SilentReason.NOT_DUE, f"no act {intent_id}")
        record = self.store.approvals.approval_by_act_key(intent.idempotency_key)
        if self.cards is not None and record is not None:
            await self.cards.show(record, _card_status(record, last))
        auth = intent.authorization
        english = record.english if record is not None else False
        what = f"{auth.action.rstrip('.')}「{auth.object}」"
        text = self._named(run, checked_words(outcome_of(last), what, english))
        outcome = RunOutcome()
        await self.acting.act(run, [{"kind": "reply", "text": text}], outcome, ActAs.HOST_WORDS)
        return self.endings.finish(run, outcome, outcome.final_state())

    async def carry_out(self, record: ApprovalRecord, run: Run) -> Run:
        """Run (or refuse) the act under ``record``, then tell the asker in ``run`` — unless
        another run carries it out (a code reply's and a click event's cannot both)."""
        if not self.store.approvals.claim_settlement(record.approval_id, run.event_id):
            detail = f"approval {record.approval_id} is carried out by another run"
            return self.endings.end_silent(run, SilentReason.APPROVAL_SETTLED, detail)
        proposed = self.store.events.get_run(record.event_id)
        receipt = None
        # an act this settlement started before a crash: uncertain, then read back below;
        # one stored but cut before its attempt (having its unionIds, its token) provably
        # never left, so it is tried again rather than held
        self.acting.broker.reconcile_interrupted(record.event_id)
        self.store.actions.drop_unsent_intents(record.event_id)
        if proposed is not None:
            bound = proposed.model_copy(update={"run_id": run.run_id})
            request = ActionRequest(
                kind=ActionKind.ACT, tool=record.tool, arguments=record.arguments
            )
            acted = RunOutcome()
            await self.acting.act(bound, [request], acted, ActAs.approved_act(record))
            receipt = _what_became(self.store, acted.receipts)
            self.store.approvals.close_waiting_run(record.event_id, RunState.DONE, self.clock.now())
        if self.cards is not None:
            await self.cards.show(record, _card_status(record, receipt))
        text = result_text(record, receipt)
        outcome = RunOutcome()
        if text is not None:
            text = self._named(run, text)
            reply = {"kind": "reply", "text": text}
            await self.acting.act(run, [reply], outcome, ActAs.APPROVAL_OUTCOME)
        else:
            return self.endings.end_silent(run, SilentReason.APPROVAL_VOID, record.detail or "void")
        return self.endings.finish(run, outcome, outcome.final_state())


def _what_became(store: Store, receipts: list[Receipt]) -> Receipt | None:
    """The act's receipt; for a repeat (a re-driven run), what the first execution got (its
    read-back, if it was uncertain and has been read since)."""
    acts = [r for r in receipts if r.kind is ActionKind.ACT]
    last = acts[-1] if acts else None
    if last is None or last.reason != RefusalReason.DUPLICATE_INTENT.value:
        return last
    verified = [r for r in acts if r.status is ReceiptStatus.VERIFIED]
    if verified:
        return verified[-1]
    first_id = last.evidence.first_receipt_id
    first = next(
        (r for r in store.actions.receipts(last.event_id) if r.receipt_id == first_id), None
    )
    if first is not None and first.intent_id:
        return store.actions.intent_receipts(first.intent_id)[-1]
    return first


def _card_status(record: ApprovalRecord, receipt: Receipt | None) -> str:
    outcome = outcome_of(receipt, record)
    reason = record.void_reason if outcome is ActOutcome.VOID else None
    return card_words(outcome, reason or (receipt.reason if receipt is not None else None))
