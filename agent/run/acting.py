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

from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    ApprovalRecord,
    Evidence,
    FormRecord,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Run,
    RunEnding,
    RunState,
    form_id_for,
)
from agent.run.broker import Broker
from agent.run.carriers import Carriers, Delivery
from agent.run.gate_facts import load_facts
from agent.run.memory import candidates_from
from agent.run.outcome import RunOutcome
from agent.run.pieces import is_attachment, missing_line, not_sent, payloads
from agent.run.refusals import note_refusal
from agent.run.tasks import reminder_task
from agent.run.ways import ActAs
from gates.action import ActionFacts, ActionGate, Approval, Refusal
from gates.form_values import in_english
from gates.frames import card_attachments
from storage import Store

log = logging.getLogger("dta.pipeline")


class Acts(Protocol):
    """What the acting step is lent for ``act`` requests (``agent/acts/steps.py``)."""

    async def facts(
        self,
        run: Run,
        request: ActionRequest,
        approval: ApprovalRecord | None,
        people: frozenset[str],
    ) -> dict[str, Any]:
        """The act's own facts for the gate (as ``ActionFacts`` changes)."""
        ...

    async def act(self, acting: Acting, run: Run, verdict: Approval, outcome: RunOutcome) -> None:
        """An approved act: run at once, or put up for its asker's approval."""
        ...

    async def repeat(
        self, run: Run, facts: ActionFacts, outcome: RunOutcome, refused: Receipt
    ) -> None:
        """The same act asked again: never run twice; what became of it is told."""
        ...

    def prompts_in_doubt(self, run: Run) -> list[str]:
        """A re-driven run's lines for approvals whose prompt a crash left in doubt."""
        ...


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
        carriers: Carriers,
        acts: Acts | None = None,
        form_timeout_s: float = 3600,
    ) -> None:
        self.store = store
        self.clock = clock
        self.action_gate = action_gate
        self.broker = broker
        # The forms a message goes in (agent/run/carriers.py; each is a module of
        # agent/carriers/): text and Markdown by the broker, and — where configured — AI
        # cards, approval cards, the reaction. The same step, the same gate, its own carrier.
        self.carriers = carriers
        # Acts (workspace writes): their facts, execution and approvals (agent/acts/); None
        # when no write tool is enabled.
        self.acts = acts
        self.form_timeout_s = form_timeout_s  # how long an ask's form waits for its asker

    async def act(
        self,
        run: Run,
        requests: list[Any],
        outcome: RunOutcome,
        way: ActAs,
    ) -> RunOutcome:
        """Each request through the action gate, then the broker, the way ``way`` says
        (``agent/run/ways.py``: the answer, the ack, a follow-up, an approval's act, …)."""
        tally = outcome.tally
        for index, raw in enumerate(requests):
            facts = await self._facts(run, raw, outcome, way)
            verdict = self.action_gate.decide(
                raw,
                run,
                tally,
                facts,
                form=self._form(raw, way.provider),
                from_provider=way.provider,
            )
            if isinstance(verdict, Refusal):
                refused = self.refuse(run, verdict)
                outcome.receipts.append(refused)
                note_refusal(outcome, verdict)
                repeat = verdict.reason is RefusalReason.DUPLICATE_INTENT
                if repeat and verdict.kind is ActionKind.ACT and self.acts is not None:
                    await self.acts.repeat(run, facts, outcome, refused)
                elif verdict.kind is ActionKind.ACT:
                    outcome.acts.told.append(refused)
                continue
            kind = verdict.request.kind
            if kind is ActionKind.ACT:
                assert self.acts is not None
                await self.acts.act(self, run, verdict, outcome)
                continue
            self.accept(run, verdict.request, verdict.reminder_due)
            last = way.settles and index == len(requests) - 1
            receipt = await self._send(run, verdict, outcome, last)
            status = receipt.status if receipt is not None else None
            if kind is ActionKind.ACK:
                tally.acks += 1
                outcome.acked = outcome.acked or bool(status and status.delivered)
            elif kind is ActionKind.CONFIRM or verdict.request.follow_up:
                pass  # a prompt's backing is noted by its act; a follow-up decides nothing
            else:
                tally.terminal = kind
                outcome.terminal, outcome.terminal_kind = status, kind
                outcome.terminal_request, outcome.terminal_receipt = verdict.request, receipt
        return outcome

    async def send_after(
        self, run: Run, raw: Any, words: Receipt, outcome: RunOutcome, last: bool
    ) -> None:
        """A streamed card's pictures and files (``raw``: its finished answer), once the
        card carried its words (``words``: the card's receipt; none go when it did not):
        decided on fresh facts (``gates/frames.py``, ``card_attachments``), then sent as
        every answer's pieces are after its words."""
        if not words.status.delivered:
            return
        facts = load_facts(
            self.store, run, self.clock.now(), self.broker.webhook_problem(run.origin)
        )
        verdict = card_attachments(self.action_gate, raw, run, facts)
        if isinstance(verdict, Refusal):
            outcome.receipts.append(self.refuse(run, verdict))
            return
        await self._send(run, verdict, outcome, last, words)

    async def _send(
        self,
        run: Run,
        verdict: Approval,
        outcome: RunOutcome,
        last: bool,
        words: Receipt | None = None,
    ) -> Receipt | None:
        """An approved message's intents, in order: its text (in chunks), then each
        attachment (only those when ``words``, the receipt of the words, says they went
        already). The last one carries the run's ending when ``last``. Returns the last
        receipt of the words: what decides the run (a failed piece stops the words; a
        failed attachment stops nothing)."""
        kind, intents = verdict.request.kind, verdict.intents
        # every piece stored before the first goes: a crash between two leaves the rest
        # owed, and the recovery pass sends them (agent/run/pieces.py); pieces after words
        # that went are owed beside those (their slot's first intent)
        pieces = self._pieces(intents, words is not None)
        stored = bool(pieces) and self.store.pieces.add_pieces(
            pieces, payloads(pieces, verdict.payload)
        )
        said: Receipt | None = words
        if words is not None:  # the words went (on a card), the rest not yet tried
            self.broker.crash.hit("between_pieces")
        sent: list[tuple[ActionIntent, Receipt]] = []
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
                stored=stored and intent in pieces,
            )
            if ending is not None and receipt.status is not ReceiptStatus.REFUSED:
                outcome.settled = ending.apply(run, receipt)  # the broker saved it so
            outcome.receipts.append(receipt)
            sent.append((intent, receipt))
            if stored and chunk < len(intents):
                self.broker.crash.hit("between_pieces")
            if attachment:
                continue
            said = receipt
            if not receipt.status.delivered and receipt.status is not ReceiptStatus.SILENT:
                if stored:  # the rest is never sent, and recorded so: nothing stays owed
                    not_sent(self.store, self.broker, run, intents[chunk:])
                break  # do not send the rest of a long reply after a failed piece
        if stored:
            self.store.pieces.forget_piece_bytes(run.event_id)
        line = (
            missing_line(sent, outcome.english)
            if said is not None and said.status.delivered
            else None
        )
        if line is not None:
            await self.follow_up(run, line)
        return said

    def _pieces(self, intents: list[ActionIntent], after_words: bool = False) -> list[ActionIntent]:
        """The pieces stored together before the first goes: every piece of an answer of
        several (or pieces after its words) when the broker sends each, or a one-frame
        card answer's pictures and files (its cards keep their own records, in the same
        slot, so a crash after a card leaves them owed beside it). None for the rest (an
        approval card, a reaction)."""
        if not any(self.carriers.keeps_records(i) for i in intents):
            return intents if len(intents) >= (1 if after_words else 2) else []
        words = [i for i in intents if not is_attachment(i)]
        files = [i for i in intents if is_attachment(i)]
        on_cards = all(i.content is not None and i.content.msgtype == "card" for i in words)
        return files if words and files and on_cards else []

    async def follow_up(self, run: Run, line: str) -> None:
        """The host's one line after an answer, through the gate like every message."""
        request = {"kind": "reply", "text": line, "follow_up": True}
        await self.act(run, [request], RunOutcome(), ActAs.FOLLOW_UP)

    async def _facts(
        self,
        run: Run,
        raw: Any,
        outcome: RunOutcome,
        way: ActAs,
    ) -> ActionFacts:
        """The store facts for one request (and an act's own, from agent/acts/)."""
        facts = load_facts(
            self.store, run, self.clock.now(), self.broker.webhook_problem(run.origin)
        )
        changes: dict[str, Any] = {"backing": tuple(outcome.acts.backing)}
        if not self.carriers.carries("card"):  # no card carries a reply, blank or not
            changes["blank_card_keys"] = frozenset()
        if not way.supersedable:
            changes["thread_generation"] = run.generation
        if outcome.grounds.sources:
            changes["sources"] = outcome.grounds.sources
        if outcome.grounds.knowledge_used or outcome.grounds.results:
            changes["grounds"] = (*outcome.grounds.sources, *outcome.grounds.results)
            changes["question"] = outcome.grounds.question
        changes["results"] = tuple(outcome.grounds.results)
        changes["shown"] = tuple(outcome.grounds.shown)
        changes["ids"] = tuple(sorted(outcome.acts.people | set(outcome.acts.names)))
        request = _parsed(raw)
        if request is not None and request.kind is ActionKind.ACT and self.acts is not None:
            people = frozenset(outcome.acts.people)
            changes.update(await self.acts.facts(run, request, way.approval, people))
            key = changes.get("act_key")
            taken = self.store.actions.receipt_for_idempotency_key(key) if key else None
            if key and (taken is not None or self.store.actions.intent_key_taken(key)):
                changes["taken_keys"] = {**facts.taken_keys, key: taken}
        return replace(facts, **changes)

    def _form(self, raw: Any, answer: bool) -> str:
        """The form the gate judges a request in: its carrier's (``Carriers.form``)."""
        request = _parsed(raw)
        return self.carriers.form(request.kind if request else ActionKind.REPLY, answer)

    async def deliver(
        self,
        run: Run,
        intent: ActionIntent,
        silence_detail: str = "",
        ending: RunEnding | None = None,
        payload: bytes | None = None,
        stored: bool = False,
    ) -> Receipt:
        """An approved intent to the carrier of its msgtype (``payload``: the bytes of an
        attachment; ``stored``: a piece stored with its answer's others)."""
        return await self.carriers.deliver(
            Delivery(run, intent, ending, payload, stored, silence_detail)
        )

    def accept(self, run: Run, request: ActionRequest, reminder_due: float | None) -> None:
        """What an approved request carries besides its message, before that goes out: its
        memory candidates are proposed, its reminder is scheduled, its form stored. The card
        stream calls this for its finished answer too, so a reply in a card keeps what text
        keeps."""
        if request.memory_candidates:
            self.store.context.propose_memory(candidates_from(run, request, self.clock.now()))
        reminder = request.reminder
        if reminder is not None and reminder_due is not None:
            # Scheduled before the reply that confirms it goes out; its id comes from the
            # event, so a re-executed run finds it already stored.
            now = self.clock.now()
            self.store.context.save_task(reminder_task(run, reminder.text, reminder_due, now))
        if request.kind is ActionKind.ASK and request.form is not None:
            self._open_form(run, request)

    def _open_form(self, run: Run, request: ActionRequest) -> None:
        """An ask's form stored, pending, before the card or the question goes: its id
        comes from the event, so a re-executed run finds it stored; the thread's older
        pending form is cancelled (one live form per person and conversation)."""
        assert request.form is not None
        now = self.clock.now()
        question = request.text or request.markdown or ""
        record = FormRecord(
            form_id=form_id_for(run.event_id),
            event_id=run.event_id,
            run_id=run.run_id,
            thread_key=run.thread_key,
            asker_id=run.origin.user_id,
            conversation_id=run.origin.conversation_id,
            question=question,
            spec=request.form,
            asked_with="card" if self.carriers.carries("form") else "text",
            english=in_english(question),
            created_at=now,
            expires_at=now + self.form_timeout_s,
        )
        for older in self.store.forms.open_form(record):
            log.info("older form cancelled", extra={"form": older.form_id, "by": record.form_id})

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
        waits = kind is ActionKind.ASK or bool(outcome.acts.awaiting)
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
        self.store.actions.add_receipt(receipt)
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
