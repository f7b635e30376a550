"""The acting step's acts: a workspace write run at once or put up for its asker's approval,
an approval already answered, and the same act asked for again — never done twice.

``ActSteps`` is what ``agent.run.acting.Acting`` is lent for its ``act`` requests (its
``Acts``, built in ``agent/components/``); the acting step hands itself to each call, so an
approval's prompt and a refusal go through the same gate and broker as everything else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.acts.runner import ActRunner
from agent.acts.told import act_backing, asked_backing, last_act_receipt, told_of
from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    ApprovalRecord,
    ApprovalStatus,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Run,
    VoidReason,
)
from agent.run.outcome import RunOutcome
from agent.run.ways import ActAs
from gates.action import ActionFacts, Approval, Refusal, idempotency_key
from gates.backing import Backing
from storage import Store

if TYPE_CHECKING:
    from agent.run.acting import Acting

_SAID_NO = {
    ApprovalStatus.DENIED: RefusalReason.APPROVAL_DENIED,
    ApprovalStatus.EXPIRED: RefusalReason.APPROVAL_EXPIRED,
}


class ActSteps:
    """What ``Acting`` does with an act request: its facts, an approved one, a repeat."""

    def __init__(self, store: Store, runner: ActRunner) -> None:
        self.store = store
        self.acts = runner

    async def facts(
        self,
        run: Run,
        request: ActionRequest,
        approval: ApprovalRecord | None,
        people: frozenset[str],
    ) -> dict[str, Any]:
        """The act's own facts for the gate (``ActRunner.facts``)."""
        return await self.acts.facts(run, request, approval, people)

    async def act(self, acting: Acting, run: Run, verdict: Approval, outcome: RunOutcome) -> None:
        """An approved act: run at once (its receipt verified only by a read-back), or,
        when it reaches beyond the asker's own things, put up for the asker's approval."""
        outcome.tally.acts += 1
        (intent,) = verdict.intents
        if verdict.waits_for_approval:
            await self._ask_approval(acting, run, intent, outcome)
            return
        receipt = await self.acts.execute(run, intent, None)
        outcome.receipts.append(receipt)
        outcome.acts.told.append(receipt)
        self._note_act(intent, receipt, outcome)

    async def _ask_approval(
        self, acting: Acting, run: Run, intent: ActionIntent, outcome: RunOutcome
    ) -> None:
        """The approval record (what it voids is carried out by the recovery pass,
        agent/acts/settle.py) and its prompt; the run then waits for it — unless no prompt
        can have reached the asker, when nothing may wait on it."""
        record, _voided = await self.acts.open_approval(run, intent, english=outcome.english)
        if self._decided(acting, run, record, outcome):
            return
        in_group = run.origin.conversation_type.value == "group"
        prompt = self.acts.desk.prompt(record, in_group)
        confirm = {"kind": "confirm", "text": prompt, "approval_id": record.approval_id}
        seen = len(outcome.receipts)
        await acting.act(run, [confirm], outcome, ActAs.APPROVAL_PROMPT)
        asked = [r for r in outcome.receipts[seen:] if r.kind is ActionKind.CONFIRM]
        first = self.store.actions.receipt_for_idempotency_key(
            idempotency_key(run.event_id, ActionKind.CONFIRM, of=record.approval_id)
        )
        said = [*asked, *([first] if first is not None else [])]
        current = self.store.approvals.get_approval(record.approval_id) or record
        if self._decided(acting, run, current, outcome):
            return  # decided while its prompt went (a click on the first card, say)
        if not current.status.is_open:
            return
        if any(r.status.delivered for r in said):
            outcome.acts.awaiting.append(record.approval_id)
            how = current.asked_with or "text"
            outcome.acts.asked[record.approval_id] = {"how": how, "code": current.code}
            self._note_asked(current, outcome)
        elif any(r.status is ReceiptStatus.UNCERTAIN for r in said):
            # It may be on the asker's screen: it stays open (a click still counts, or it
            # expires and they are told), and the host's own line gives them the code to
            # answer in words — the model may not pass it on, and a prompt cut before its
            # bytes left reached nobody (kill -9 amid its send).
            outcome.acts.awaiting.append(record.approval_id)
            outcome.acts.asked[record.approval_id] = {"how": "uncertain", "code": current.code}
            self._note_asked(current, outcome)
            await acting.follow_up(run, self.acts.desk.code_line(current, in_group))
        else:
            why = "the approval prompt did not reach the asker"
            self.acts.desk.void(record, why, VoidReason.PROMPT_NOT_DELIVERED)
            # the model is told: nothing waits, nothing was done
            said = f"{why}: nothing was done"
            void = Refusal(RefusalReason.APPROVAL_VOID, said, [], ActionKind.ACT)
            refused = acting.refuse(run, void)
            outcome.receipts.append(refused)
            outcome.acts.told.append(refused)

    def prompts_in_doubt(self, run: Run) -> list[str]:
        """For a re-driven run: the code line of each of this message's open approvals
        whose prompt's send a crash cut (``uncertain``, never sent again) and none of whose
        prompts is known delivered — it may have reached nobody, and the model asked again
        may not call the tool again (it knows the act waits)."""
        in_group = run.origin.conversation_type.value == "group"
        lines = []
        for record in self.store.approvals.all(event_id=run.event_id):
            if not record.status.is_open:
                continue
            key = idempotency_key(run.event_id, ActionKind.CONFIRM, of=record.approval_id)
            said = self.store.actions.receipt_for_idempotency_key(key)
            if said is not None and said.status is ReceiptStatus.UNCERTAIN:
                lines.append(self.acts.desk.code_line(record, in_group))
        return lines

    def _decided(
        self, acting: Acting, run: Run, record: ApprovalRecord, outcome: RunOutcome
    ) -> bool:
        """An approval its asker already answered: approved, it is being carried out (the
        model says so, never that it is done or needs asking); declined, the no stands."""
        if record.status is ApprovalStatus.APPROVED:
            outcome.acts.asked[record.approval_id] = {"how": "approved", "code": record.code}
            self._note_asked(record, outcome)  # backs "being carried out", never "done"
            return True
        if record.status in _SAID_NO:
            said = f"approval {record.approval_id} is {record.status.value}: not asked again"
            refused = acting.refuse(run, Refusal(_SAID_NO[record.status], said, [], ActionKind.ACT))
            outcome.receipts.append(refused)
            outcome.acts.told.append(refused)
            return True
        return False

    def _note_asked(self, record: ApprovalRecord, outcome: RunOutcome) -> None:
        spec = self.acts.catalog.spec(record.tool)
        outcome.acts.backing.append(asked_backing(record, spec.effects if spec else []))
        outcome.acts.names.update(record.names)

    def _note_act(self, intent: ActionIntent, receipt: Receipt, outcome: RunOutcome) -> None:
        """What the act's receipt lets be said of it (gates/backing.py), and for an act in
        doubt that will be read back, the word its asker is owed then."""
        spec = self.acts.catalog.spec(intent.tool or "")
        backing = act_backing(intent, receipt, spec.effects if spec else [], outcome.acts.names)
        if backing is None:
            return
        outcome.acts.backing.append(backing)
        words = told_of(intent, receipt, outcome.english)
        if words:
            outcome.acts.acted.append(words)
        if receipt.status is ReceiptStatus.UNCERTAIN and backing.checkable:
            outcome.acts.backing.append(Backing("follow_up", label=backing.label))

    async def repeat(
        self, run: Run, facts: ActionFacts, outcome: RunOutcome, refused: Receipt
    ) -> None:
        """The same act again (a re-driven run, a re-asked model, 「再试一次」): never run
        twice. If the first try is still uncertain (a crash or a timeout after sending), it
        is read back now; what became of it is what the model is told."""
        key = facts.act_key
        intent = self.store.actions.intent_by_key(key) if key else None
        if intent is None:
            outcome.acts.told.append(refused)
            return
        last = last_act_receipt(self.store.actions.intent_receipts(intent.intent_id))
        if last is None or last.status in (ReceiptStatus.UNCERTAIN, ReceiptStatus.ACCEPTED):
            settled = await self.acts.read_back(run, intent)
            if settled is not None:
                outcome.receipts.append(settled)
            # what it is now (another read-back may have settled it meanwhile)
            last = last_act_receipt(self.store.actions.intent_receipts(intent.intent_id)) or last
        outcome.acts.told.append(last or refused)
        if last is not None:
            self._note_act(intent, last, outcome)
