"""Acting on a run's requests: each through the action gate, then the broker.

The pipeline decides *whether* and *what* to answer; this module is the one place a request
becomes a receipt, so the budgets, the refusals and the rule for how a run ends with its
last receipt (``RunEnding``) are applied the same way to the provider's answer, the ack,
the honest failure and a streamed card's finished answer.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Protocol

from pydantic import ValidationError

from agent.acts.runner import ActRunner
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    ApprovalRecord,
    Evidence,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Run,
    RunEnding,
    RunState,
)
from agent.proactive.reminders import reminder_task
from agent.run.broker import Broker
from agent.run.gate_facts import load_facts
from agent.run.memory import candidates_from
from agent.run.outcome import RunOutcome
from agent.run.reactions import ReactionSignal
from gates.action import ActionFacts, ActionGate, Approval, Refusal, idempotency_key
from storage import Store

log = logging.getLogger("dta.pipeline")

# Refusals of the answer itself: the provider produced something the gate will not send, so
# the person gets the same short honest reply as for an unreadable answer. (A repeat, a
# superseded run, another robot's event, an exhausted budget or an unreachable target
# get nothing more.)
# Refusals a provider can mend by answering again (its one repair round): what it said
# was untrue, or too long to send (it is asked to shorten it).
REPAIRABLE = frozenset(
    {
        RefusalReason.UNBACKED_CLAIM,
        RefusalReason.DEFERRED_PROMISE,
        RefusalReason.CONTENT_TOO_LARGE,
        RefusalReason.ATTACHMENT_UNSUPPORTED,
    }
)
ANSWER_REFUSALS = frozenset(
    {
        RefusalReason.SCHEMA_INVALID,
        RefusalReason.ACTION_NOT_ALLOWED,
        RefusalReason.CONTENT_TOO_LARGE,
        RefusalReason.SECRET_IN_CONTENT,
        RefusalReason.REMINDER_NOT_ALLOWED,
        RefusalReason.AT_ALL,
        RefusalReason.UNBACKED_CLAIM,
        RefusalReason.DEFERRED_PROMISE,
        RefusalReason.ATTACHMENT_UNSUPPORTED,
    }
)


class CardDeliverer(Protocol):
    """What delivers a reply approved as an AI card (``agent.cards.broker.CardBroker``)."""

    async def deliver(
        self, run: Run, intent: ActionIntent, ending: RunEnding | None
    ) -> Receipt: ...


class Acting:
    """Requests to receipts for one runtime; the pipeline owns one and lends ``act`` and
    ``ending`` to the card stream, so a streamed answer is judged like any other."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        action_gate: ActionGate,
        broker: Broker,
        reply_form: str = "text",
        cards: CardDeliverer | None = None,
        acts: ActRunner | None = None,
        approval_cards: CardDeliverer | None = None,
        reactions: ReactionSignal | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.action_gate = action_gate
        self.broker = broker
        self.reply_form = reply_form
        # Replies approved as AI cards go there (agent/cards/broker.py); None outside card
        # mode. A card is a delivery form: the same step, the same gate, its own carrier.
        self.cards = cards
        # Acts (workspace writes): their facts, execution and approvals (agent/acts/); None
        # when no write tool is enabled. Approval prompts go as cards when a template is set.
        self.acts = acts
        self.approval_cards = approval_cards
        # ``ack_style = "reaction"``: the ack is an emotion on the person's message, recalled
        # when the run ends (agent/run/reactions.py); None: the ack is a short text.
        self.reactions = reactions

    async def act(
        self,
        run: Run,
        requests: list[Any],
        outcome: RunOutcome,
        settle_last: bool = True,
        answer: bool = True,
        supersedable: bool = True,
        approval: ApprovalRecord | None = None,
    ) -> RunOutcome:
        """Each request through the action gate, then the broker. ``answer``: the
        provider's (delivered in ``reply_form``); the host's own short words go as text.
        ``supersedable=False``: a newer message in the thread does not make the request
        stale (a due reminder answers nothing, so nothing the person says supersedes it).
        ``approval``: the decided approval an act is carried out under."""
        tally = outcome.tally
        for index, raw in enumerate(requests):
            facts = await self._facts(run, raw, outcome, supersedable, approval)
            verdict = self.action_gate.decide(
                raw,
                run,
                tally,
                facts,
                form=self._form(raw, answer),
                from_provider=answer,
            )
            if isinstance(verdict, Refusal):
                outcome.receipts.append(self.refuse(run, verdict))
                self._note_refusal(outcome, verdict)
                repeat = verdict.reason is RefusalReason.DUPLICATE_INTENT
                if repeat and verdict.kind is ActionKind.ACT:
                    await self._repeat_act(run, facts, outcome)
                continue
            kind = verdict.request.kind
            if kind is ActionKind.ACT:
                await self._act(run, verdict, outcome)
                continue
            self.accept(run, verdict.request, verdict.reminder_due)
            last = settle_last and index == len(requests) - 1
            receipt = await self._send(run, verdict, outcome, last)
            status = receipt.status if receipt is not None else None
            if kind is ActionKind.ACK:
                tally.acks += 1
                outcome.acked = outcome.acked or bool(status and status.delivered)
            elif kind is ActionKind.CONFIRM:
                if status is not None and status.delivered:
                    outcome.backing.append(f"approval asked ({verdict.request.approval_id})")
            else:
                tally.terminal = kind
                outcome.terminal, outcome.terminal_kind = status, kind
                outcome.terminal_request, outcome.terminal_receipt = verdict.request, receipt
        return outcome

    async def _send(
        self, run: Run, verdict: Approval, outcome: RunOutcome, last: bool
    ) -> Receipt | None:
        """An approved message's intents, in order: its text (in chunks), then each
        attachment. The last one carries the run's ending when ``last``. Returns the last
        receipt of the words: what decides the run (a failed piece stops the words; a
        failed attachment stops nothing)."""
        kind, intents = verdict.request.kind, verdict.intents
        said: Receipt | None = None
        for chunk, intent in enumerate(intents, start=1):
            ending = self.ending(outcome, kind) if last and chunk == len(intents) else None
            attachment = intent.content is not None and intent.content.attachment is not None
            if ending is not None and attachment:
                # The words went before it: the run has spoken, whatever becomes of a
                # picture or file (its own receipt says).
                ending = RunEnding(ending.delivered, ending.delivered)
            receipt = await self.deliver(
                run,
                intent,
                silence_detail=verdict.request.reason or "",
                ending=ending,
                payload=verdict.payload(intent),
            )
            if ending is not None and receipt.status is not ReceiptStatus.REFUSED:
                outcome.settled = ending.apply(run, receipt)  # the broker saved it so
            outcome.receipts.append(receipt)
            if attachment:
                continue
            said = receipt
            if not receipt.status.delivered and receipt.status is not ReceiptStatus.SILENT:
                break  # do not send the rest of a long reply after a failed piece
        return said

    async def _facts(
        self,
        run: Run,
        raw: Any,
        outcome: RunOutcome,
        supersedable: bool,
        approval: ApprovalRecord | None,
    ) -> ActionFacts:
        """The store facts for one request (and an act's own, from agent/acts/)."""
        facts = load_facts(
            self.store, run, self.clock.now(), self.broker.webhook_problem(run.origin)
        )
        changes: dict[str, Any] = {"backing": tuple(outcome.backing)}
        if not supersedable:
            changes["thread_generation"] = run.generation
        if outcome.sources:
            changes["sources"] = outcome.sources
        request = _parsed(raw)
        if request is not None and request.kind is ActionKind.ACT and self.acts is not None:
            changes.update(await self.acts.facts(run, request, approval))
            key = idempotency_key(run.event_id, ActionKind.ACT, of=_hash(changes))
            taken = self.store.receipt_for_idempotency_key(key)
            if taken is not None or self.store.intent_key_taken(key):
                changes["taken_keys"] = {**facts.taken_keys, key: taken}
        return replace(facts, **changes)

    def _form(self, raw: Any, answer: bool) -> str:
        request = _parsed(raw)
        if request is not None and request.kind is ActionKind.CONFIRM:
            return "approval" if self.approval_cards is not None else "text"
        if request is not None and request.kind is ActionKind.ACK and self.reactions is not None:
            return "reaction"
        return self.reply_form if answer else "text"

    async def _act(self, run: Run, verdict: Approval, outcome: RunOutcome) -> None:
        """An approved act: run at once (its receipt verified only by a read-back), or,
        when it reaches beyond the asker's own things, put up for the asker's approval."""
        assert self.acts is not None
        outcome.tally.acts += 1
        (intent,) = verdict.intents
        if verdict.waits_for_approval:
            # What it voids is carried out by the recovery pass (agent/acts/settle.py).
            record, _voided = self.acts.open_approval(run, intent)
            prompt = self.acts.desk.prompt(record, run.origin.conversation_type.value == "group")
            confirm = {"kind": "confirm", "text": prompt, "approval_id": record.approval_id}
            seen = len(outcome.receipts)
            await self.act(run, [confirm], outcome, settle_last=False, answer=False)
            asked = [r for r in outcome.receipts[seen:] if r.kind is ActionKind.CONFIRM]
            first = self.store.receipt_for_idempotency_key(
                idempotency_key(run.event_id, ActionKind.CONFIRM, of=record.approval_id)
            )
            delivered = any(r.status.delivered for r in asked) or bool(
                first and first.status.delivered
            )
            if delivered and record.status.is_open:
                outcome.awaiting.append(record.approval_id)
            elif record.status.is_open:  # nobody was asked: nothing may wait on it
                self.acts.desk.void(record, "the approval prompt did not reach the asker")
            return
        receipt = await self.acts.execute(run, intent, None)
        outcome.receipts.append(receipt)
        if receipt.status is ReceiptStatus.VERIFIED:
            outcome.backing.append(f"act {intent.tool} verified")
        elif receipt.status is ReceiptStatus.ACCEPTED:  # an MCP tool's own result
            outcome.backing.append(f"act {intent.tool}: tool result")

    async def _repeat_act(self, run: Run, facts: ActionFacts, outcome: RunOutcome) -> None:
        """The same act again (a re-executed run): never run twice. If the first try is
        still uncertain (a crash or a timeout after sending), it is read back now."""
        auth = facts.authorization
        if self.acts is None or auth is None:
            return
        key = idempotency_key(run.event_id, ActionKind.ACT, of=auth.arguments_hash)
        intent = self.store.intent_by_key(key)
        if intent is None:
            return
        receipts = self.store.intent_receipts(intent.intent_id)
        last = receipts[-1] if receipts else None
        if last is None or last.status is ReceiptStatus.UNCERTAIN:
            settled = await self.acts.read_back(run, intent)
            last = settled or last
            if settled is not None:
                outcome.receipts.append(settled)
        if last is not None and last.status is ReceiptStatus.VERIFIED:
            outcome.backing.append(f"act {intent.tool} verified")

    async def deliver(
        self,
        run: Run,
        intent: ActionIntent,
        silence_detail: str = "",
        ending: RunEnding | None = None,
        payload: bytes | None = None,
    ) -> Receipt:
        """An approved intent to its carrier: an AI card for a card reply, an approval card
        for a confirm (when a template is set), else the broker (``payload``: the bytes of
        an attachment)."""
        content = intent.content
        if self.cards is not None and content is not None and content.msgtype == "card":
            return await self.cards.deliver(run, intent, ending)
        approval_card = content is not None and content.msgtype == "approval"
        if self.approval_cards is not None and approval_card:
            return await self.approval_cards.deliver(run, intent, ending)
        reaction = content is not None and content.msgtype == "reaction"
        if self.reactions is not None and reaction:
            return await self.reactions.deliver(run, intent, ending)
        return await self.broker.execute(run, intent, silence_detail, ending, payload)

    def accept(self, run: Run, request: ActionRequest, reminder_due: float | None) -> None:
        """What an approved request carries besides its message, before that goes out: its
        memory candidates are proposed and its reminder is scheduled. The card stream calls
        this for its finished answer too, so a reply in a card keeps what text keeps."""
        if request.memory_candidates:
            self.store.propose_memory(candidates_from(run, request, self.clock.now()))
        reminder = request.reminder
        if reminder is not None and reminder_due is not None:
            # Scheduled before the reply that confirms it goes out; its id comes from the
            # event, so a re-executed run finds it already stored.
            now = self.clock.now()
            self.store.save_task(reminder_task(run, reminder.text, reminder_due, now))

    @staticmethod
    def _note_refusal(outcome: RunOutcome, verdict: Refusal) -> None:
        """What a refusal means for the run: superseded, an answer still owed, or (a repeat
        of a terminal action the crashed execution already did) already answered."""
        if verdict.reason is RefusalReason.STALE_GENERATION:
            outcome.stale = True
        if verdict.reason in ANSWER_REFUSALS and (verdict.kind is None or verdict.terminal):
            outcome.refused_answer = f"{verdict.reason.value}: {verdict.detail}"[:500]
            outcome.refused_reason = verdict.reason
            outcome.refused_say = verdict.say
        if (
            verdict.reason is RefusalReason.DUPLICATE_INTENT
            and verdict.first_receipt is not None
            and verdict.kind is not None
            and verdict.kind.is_terminal
        ):
            # The crashed execution already did this: its receipt is the answer.
            outcome.terminal = verdict.first_receipt.status
            outcome.terminal_kind = verdict.kind

    @staticmethod
    def ending(outcome: RunOutcome, kind: ActionKind) -> RunEnding:
        """How the run ends if this request's receipt is its last word (saved with it)."""
        if outcome.ends_as is not None:
            return RunEnding(outcome.ends_as, outcome.ends_as)
        if kind is ActionKind.ACK:  # after the terminal action: that one decided
            state = outcome.final_state()
            return RunEnding(state, state)
        if kind is ActionKind.SILENCE:
            return RunEnding(RunState.SILENT, RunState.SILENT)
        waits = kind is ActionKind.ASK or bool(outcome.awaiting)
        spoken = RunState.WAITING if waits else RunState.DONE
        return RunEnding(spoken, RunState.INTERRUPTED if outcome.stale else RunState.FAILED)

    def refuse(self, run: Run, refusal: Refusal) -> Receipt:
        """The refused receipt, with the reason and the first receipt of a repeat."""
        first = refusal.first_receipt
        receipt = self.broker.receipt(
            run,
            refusal.kind,
            ReceiptStatus.REFUSED,
            reason=refusal.reason.value,
            evidence=Evidence(
                detail=refusal.detail[:500], first_receipt_id=first.receipt_id if first else None
            ),
        )
        self.store.add_receipt(receipt)
        log.info(
            "refused",
            extra={"run_id": run.run_id, "reason": refusal.reason.value, "detail": refusal.detail},
        )
        return receipt


def _parsed(raw: Any) -> ActionRequest | None:
    """The request, if it is a valid one (the gate says why when it is not)."""
    if isinstance(raw, ActionRequest):
        return raw
    try:
        return ActionRequest.model_validate(raw)
    except ValidationError:
        return None


def _hash(changes: dict[str, Any]) -> str:
    auth = changes.get("authorization")
    return auth.arguments_hash if auth is not None else ""
