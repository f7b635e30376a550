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
from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    ActionRequest,
    ApprovalRecord,
    ApprovalStatus,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Run,
    RunState,
    SilentReason,
)
from agent.run.acting import Acting
from agent.run.endings import Endings
from agent.run.outcome import RunOutcome
from storage import Store

log = logging.getLogger("dta.approvals")


def result_text(record: ApprovalRecord, receipt: Receipt | None) -> str | None:
    """What the asker is told once the decision is carried out (None: nothing to say)."""
    auth = record.authorization
    what = f"{auth.action.rstrip('.')}「{auth.object}」"
    status = record.status
    if status is ApprovalStatus.VOID:
        return None  # the new request that voided it has its own prompt
    if status is ApprovalStatus.DENIED:
        return f"好的，已取消，没有执行：{what}。"
    if status is ApprovalStatus.EXPIRED:
        return f"确认已过期，没有执行：{what}。需要的话请重新发起。"
    if receipt is None or receipt.status is ReceiptStatus.REFUSED:
        reason = receipt.reason if receipt is not None else "not run"
        return f"没有执行：{what}（{reason}）。"
    if receipt.status is ReceiptStatus.VERIFIED:
        return f"已完成：{what}，已回读确认。"
    if receipt.status is ReceiptStatus.UNCERTAIN:
        return f"已提交，但还没能确认结果：{what}。我会再核对，不会重复执行。"
    return f"没有办成：{what}（{receipt.evidence.error or 'failed'}）。"


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
        record = self.store.get_approval(approval_id)
        if record is None or record.status.is_open:
            return self.endings.end_silent(
                run, SilentReason.NOT_DUE, f"approval {approval_id} has no decision"
            )
        return await self.carry_out(record, run)

    async def carry_out(self, record: ApprovalRecord, run: Run) -> Run:
        """Run (or refuse) the act under ``record``, then tell the asker in ``run`` — unless
        another run carries it out (a code reply's and a click event's cannot both)."""
        if not self.store.claim_settlement(record.approval_id, run.event_id):
            detail = f"approval {record.approval_id} is carried out by another run"
            return self.endings.end_silent(run, SilentReason.APPROVAL_SETTLED, detail)
        proposed = self.store.get_run(record.event_id)
        receipt = None
        # an act this settlement started before a crash: uncertain, then read back below
        self.acting.broker.reconcile_interrupted(record.event_id)
        if proposed is not None:
            bound = proposed.model_copy(update={"run_id": run.run_id})
            request = ActionRequest(
                kind=ActionKind.ACT, tool=record.tool, arguments=record.arguments
            )
            acted = RunOutcome()
            await self.acting.act(
                bound,
                [request],
                acted,
                settle_last=False,
                answer=False,
                supersedable=False,
                approval=record,
            )
            receipt = _what_became(self.store, acted.receipts)
            self.store.close_waiting_run(record.event_id, RunState.DONE, self.clock.now())
        if self.cards is not None:
            await self.cards.show(record, _card_status(record, receipt))
        text = result_text(record, receipt)
        outcome = RunOutcome()
        if text is not None:
            reply = {"kind": "reply", "text": text}
            await self.acting.act(run, [reply], outcome, answer=False, supersedable=False)
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
    first = next((r for r in store.receipts(last.event_id) if r.receipt_id == first_id), None)
    if first is not None and first.intent_id:
        return store.intent_receipts(first.intent_id)[-1]
    return first


def _card_status(record: ApprovalRecord, receipt: Receipt | None) -> str:
    if record.status is ApprovalStatus.APPROVED:
        if receipt is not None and receipt.status is ReceiptStatus.VERIFIED:
            return "已同意，已完成"
        return "已同意，未能完成"
    return {
        ApprovalStatus.DENIED: "已拒绝",
        ApprovalStatus.EXPIRED: "已过期",
        ApprovalStatus.VOID: "已作废（参数变了）",
    }.get(record.status, record.status.value)
