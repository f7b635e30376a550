"""How a streamed card ends when its answer does not simply finish: refused mid-stream
(and repaired once), cut off (a stall, a failure), stopped by the asker, or broken between
two cards. Each ends the card once, with a receipt, and notes what ``Acting.act`` would."""

from __future__ import annotations

from typing import Any

from agent.cards.broker import CardBroker, cut_off_text
from agent.cards.live import STOPPED_NOTE, LiveAnswer
from agent.cards.repair import RepairedAnswer, repaired_answer
from agent.contracts import (
    ActionKind,
    ActionRequest,
    Evidence,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    RunState,
)
from agent.run.endings import REFUSAL_TEXT
from agent.run.outcome import RunOutcome
from agent.run.streaming import StreamHost
from gates.action import ActionGate, Refusal
from skills.providers.base import ProviderReply


class CardEndings:
    """Mixed into ``CardReplies``: it supplies ``cards``, ``gate`` and ``stall_s``."""

    cards: CardBroker
    gate: ActionGate
    stall_s: float

    def _ended_early(self, live: LiveAnswer) -> ProviderReply:
        """A long answer whose next card could not follow: the cards that ended stand, the
        last one's receipt is the run's last word (no card is finished twice)."""
        receipt = live.outcome.receipts[-1]
        assert live.card is not None
        text = live.card.card.final or live.card.card.streamed
        live.outcome.ends_as = RunState.FAILED
        self._record(
            live.outcome, ActionRequest(kind=ActionKind.REPLY, text=text), receipt, live.run, None
        )
        return ProviderReply([], {}, {"card_parts": live.part, "stopped": live.broken})

    async def _refused(
        self, host: StreamHost, live: LiveAnswer, refusal: Refusal, reply: ProviderReply | None
    ) -> ProviderReply:
        """The gate refused what the card would show: the refusal is recorded like any
        other, and the card ends with a short refusal instead (the run fails, as it does
        when a text answer is refused)."""
        run, outcome = live.run, live.outcome
        cards = self.cards
        refused = cards.broker.receipt(
            run,
            ActionKind.REPLY,
            ReceiptStatus.REFUSED,
            reason=refusal.reason.value,
            evidence=Evidence(detail=refusal.detail[:500], out_track_id=self._track(live)),
        )
        cards.store.actions.add_receipt(refused)
        outcome.receipts.append(refused)
        repaired = await self._repair(host, live, refusal)
        if isinstance(repaired, RepairedAnswer):
            return await self._finish_repaired(host, live, repaired, reply)
        outcome.refused_answer = f"{refusal.reason.value}: {refusal.detail}"[:500]
        outcome.refused_say = refusal.say
        outcome.ends_as = RunState.FAILED
        run = run.model_copy(update={"failure": f"refused_by_gate: {outcome.refused_answer}"[:500]})
        ending = host.ending(outcome, ActionKind.REPLY)
        assert live.card is not None
        said = refusal.say or REFUSAL_TEXT  # plain words where the refusal has them
        receipt = await cards.finish(run, live.card, said, ending)
        request = ActionRequest(kind=ActionKind.REPLY, text=said)
        self._record(outcome, request, receipt, run, ending)
        return ProviderReply([], reply.usage if reply else {}, reply.evidence if reply else {})

    async def _repair(
        self, host: StreamHost, live: LiveAnswer, refusal: Refusal
    ) -> RepairedAnswer | None:
        """The repair round's answer (``agent/cards/repair.py``); a second refusal is
        recorded like the first."""
        if live.invocation is None:
            return None
        now = self.cards.clock.now()
        repaired = await repaired_answer(
            host.provider,
            self.gate,
            live.invocation,
            live.skills,
            live.run,
            refusal,
            live.outcome,
            now,
        )
        if isinstance(repaired, Refusal):
            again = self.cards.broker.receipt(
                live.run,
                ActionKind.REPLY,
                ReceiptStatus.REFUSED,
                reason=repaired.reason.value,
                evidence=Evidence(detail=repaired.detail[:500], out_track_id=self._track(live)),
            )
            self.cards.store.actions.add_receipt(again)
            live.outcome.receipts.append(again)
            return None
        return repaired

    async def _finish_repaired(
        self,
        host: StreamHost,
        live: LiveAnswer,
        repaired: RepairedAnswer,
        first: ProviderReply | None,
    ) -> ProviderReply:
        """The card ends with the repaired answer, which is acted on like any reply."""
        outcome, second = live.outcome, repaired.reply
        usage = first.usage if first else {}
        total = {k: usage.get(k, 0) + second.usage.get(k, 0) for k in {*usage, *second.usage}}
        evidence = {**second.evidence, "repaired": True}
        run = live.run.model_copy(update={"usage": total, "evidence": evidence})
        live.run = run
        host.accept(run, repaired.request, repaired.reminder_due)
        request = repaired.request
        # its pictures and files go after the card: then the last of them ends the run
        ending = None if request.attachments else host.ending(outcome, ActionKind.REPLY)
        body = request.text if request.text is not None else request.markdown or ""
        assert live.card is not None
        receipt = await self.cards.finish(run, live.card, body, ending)
        self._record(outcome, request, receipt, run, ending)
        if request.attachments:
            await host.send_after(run, request, receipt, outcome, True)
        return ProviderReply([], total, evidence)

    async def _cut(
        self,
        host: StreamHost,
        live: LiveAnswer,
        why: str,
        evidence: dict[str, Any],
        reply: ProviderReply | None = None,
    ) -> ProviderReply:
        """The answer stopped short after its card opened: the card ends with what was
        streamed and the cut-off note, ``failed`` (partial)."""
        assert live.card is not None
        await self.cards.stop(live.card)
        outcome = live.outcome
        outcome.ends_as = RunState.FAILED
        run = live.run.model_copy(
            update={"failure": f"card_cut_off: {why}"[:500], "evidence": evidence}
        )
        ending = host.ending(outcome, ActionKind.REPLY)
        text = cut_off_text(live.card.card.streamed)
        receipt = await self.cards.finish(run, live.card, text, ending, cut_off=why)
        self._record(outcome, ActionRequest(kind=ActionKind.REPLY, text=text), receipt, run, ending)
        return ProviderReply([], reply.usage if reply else {}, evidence)

    async def _stopped(self, host: StreamHost, live: LiveAnswer) -> ProviderReply:
        """The asker pressed stop: the model's stream is closed, the card ends with what it
        showed and 「已停止」, and the run is done (``card_stopped``: what they chose)."""
        assert live.card is not None
        await self.cards.stop(live.card)
        outcome = live.outcome
        ending = host.ending(outcome, ActionKind.REPLY)
        streamed = live.card.card.streamed.rstrip()
        text = f"{streamed}\n\n{STOPPED_NOTE}" if streamed else STOPPED_NOTE
        receipt = await self.cards.finish(live.run, live.card, text, ending, stopped=True)
        request = ActionRequest(kind=ActionKind.REPLY, text=text)
        self._record(outcome, request, receipt, live.run, ending)
        return ProviderReply([], {}, {"stopped": "the asker pressed stop"})

    @staticmethod
    def _record(
        outcome: RunOutcome,
        request: ActionRequest,
        receipt: Receipt,
        run: Run,
        ending: RunEnding | None,
    ) -> None:
        """What ``Acting.act`` notes after a terminal action, for the card."""
        outcome.receipts.append(receipt)
        outcome.tally.terminal = ActionKind.REPLY
        outcome.terminal, outcome.terminal_kind = receipt.status, ActionKind.REPLY
        outcome.terminal_request, outcome.terminal_receipt = request, receipt
        if ending is not None:
            outcome.settled = ending.apply(run, receipt)

    @staticmethod
    def _track(live: LiveAnswer) -> str | None:
        return live.card.card.out_track_id if live.card is not None else None
