"""The broker's side of an AI card: one approved reply intent, one card, one receipt.

A card is a delivery form of ``reply``; the action gate approved its intent before any of
this runs. From there the order is the broker's:

    open   intent + card stored (one transaction); the create waits for its slot in the
           app-wide budget (agent/cards/pacing.py), and its attempt is stored as it leaves
    frames each one the full text so far, paced, recorded once taken
    finish the text it ends with stored first; the final frame, then the finished state,
           each with its attempt stored as it leaves; only when DingTalk took both is the
           receipt ``accepted``; the receipt, the card's state and the intent's final
           content (set here, once) are saved together, with the run's end when it is its
           last word

Every card call's attempt is stored only once its slot is had and the call leaves, and is
closed by its answer (a throttled try, provably not taken, closes ``failed``): a stop or a
takeover while a call waits for its slot leaves nothing that may have been sent, and an
attempt still ``started`` after a stop is one that was on the wire.

The ``outTrackId`` is derived from the intent's idempotency key, so every execution of one
event's reply names the same card. Nothing ever creates a card twice. After a stop
(``agent.cards.recovery``): a create that never left is forgotten with its intent, and the
next execution answers afresh; a card created but showing nothing yet is taken up by the
run's next execution, which puts its answer on it (``take_up``); a card whose end was
decided gets that end; a card that showed part of an answer is finalized with what the
person saw and a short note that it was cut off, receipt ``failed``, and its answer is
never resent.

A card that cannot carry the answer (no permission, an unpublished template, a key that is
not the template's streaming variable) falls back: the same intent goes as markdown on the
usual channel, with the reason on the receipt; a card that did get created is closed first,
so nothing is left spinning.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent.cards.api import (
    FLOW_FAILED,
    CardAnswer,
    CardAPI,
    CardOutcome,
    open_space_id,
)
from agent.cards.calls import UNFIT, CardCalls, OpenCard
from agent.cards.pacing import CardPacer
from agent.cards.parts import card_parts, part_intent
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    Attempt,
    Card,
    CardReason,
    CardState,
    Channel,
    MessageContent,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    sha256_text,
)
from agent.run.broker import Broker
from storage import Store
from storage.patience import patiently

log = logging.getLogger("dta.cards")

CUT_OFF_NOTE = "（回答到这里中断了，没有写完。）"
# What a card whose create's answer was lost ends with when the answer goes as text instead.
MOVED_NOTE = "（这张卡片没能写完，回答在下一条消息里。）"


def _reason(cut_off: str | None, late: bool, stopped: bool = False) -> str | None:
    if stopped:
        return CardReason.STOPPED.value
    if cut_off is not None:
        return CardReason.CUT_OFF.value
    return CardReason.FINAL_LATE.value if late else None


def cut_off_text(streamed: str) -> str:
    """What a card cut off mid-answer ends with: what the person saw, and the note."""
    return f"{streamed.rstrip()}\n\n{CUT_OFF_NOTE}" if streamed.strip() else CUT_OFF_NOTE


class CardBroker(CardCalls):
    def __init__(
        self,
        store: Store,
        clock: Clock,
        api: CardAPI,
        pacer: CardPacer,
        broker: Broker,
        stall_s: float,
        block_chars: int = 2500,
    ) -> None:
        self.store = store
        self.clock = clock
        self.api = api
        self.pacer = pacer
        self.broker = broker
        self.stall_s = stall_s
        # The most one card shows (longer renders blank): the rest goes as the next card.
        self.block_chars = block_chars

    def out_track_id(self, intent: ActionIntent) -> str:
        """The card's handle, derived from the intent's slot: one event's reply, one card."""
        return "dta_" + sha256_text(f"{self.api.robot_code}|{intent.idempotency_key}")[:40]

    # ------------------------------------------------------------------ one card

    async def open(self, run: Run, intent: ActionIntent) -> OpenCard | None:
        """Store the card with its intent, then create it once its slot comes; the run's
        own card that an earlier execution created and left showing nothing is taken up
        instead. None when another execution holds the intent's slot."""
        now = self.clock.now()
        space = open_space_id(intent.target)
        out = self.out_track_id(intent)
        body = self.api.create_body(out, intent.target, space or "")
        card = Card(
            out_track_id=out,
            intent_id=intent.intent_id,
            run_id=run.run_id,
            event_id=run.event_id,
            conversation_id=intent.target.conversation_id,
            template_id=self.api.template_id,
            content_key=self.api.content_key,
            created_at=now,
            updated_at=now,
        )
        # The content is recorded once, when the card ends (finish_card).
        bare = intent.model_copy(update={"content": None})
        if not self.store.cards.open_card(bare, None, card):
            return self._take_up(intent)
        handle = OpenCard(card, intent)
        if space is None:
            answer, tries = CardAnswer(CardOutcome.REFUSED, detail="no staff id: no card space"), 0
        else:
            answer, tries = await self._create(handle, body, now + self.stall_s)
        handle.carrier_id, handle.retries = answer.carrier_id, tries
        if answer.ok:
            card.state, handle.exists = CardState.STREAMING, True
        elif answer.outcome is not CardOutcome.UNCERTAIN:
            card.state, card.fallback, handle.exists = CardState.ABANDONED, answer.reason, False
        card.updated_at = self.clock.now()
        self.store.cards.save_card(card)
        if handle.exists is not False:
            handle.pump = asyncio.ensure_future(self._pump(handle))
        log.info("card opened", extra={"card": out, "create": answer.describe()})
        return handle

    async def _create(
        self, handle: OpenCard, body: dict[str, Any], deadline: float
    ) -> tuple[CardAnswer, int]:
        """createAndDeliver once its slot comes; the card's state is on record with the
        answer that decides it."""

        def created(answer: CardAnswer) -> None:
            if answer.ok:
                handle.card.state = CardState.STREAMING

        digest = CardAPI.digest(body)
        return await self._paced(handle, digest, lambda: self.api.create(body), deadline, created)

    def _take_up(self, intent: ActionIntent) -> OpenCard | None:
        """The run's own card in this slot, created by an execution that stopped before
        the card showed anything: this execution's answer goes on it (never a second
        create). One whose create's answer was lost may not exist: the answer then goes as
        text and the card, if it is there, is closed with a line saying so."""
        taken = self.store.cards.take_up_card(intent.model_copy(update={"content": None}))
        if taken is None:
            return None
        card, stored = taken
        mine = intent.model_copy(update={"intent_id": stored.intent_id})  # the stored record's
        handle = OpenCard(card, mine, exists=True if card.state is CardState.STREAMING else None)
        if handle.exists is None:
            card.fallback = CardReason.CREATE_UNKNOWN
        handle.pump = asyncio.ensure_future(self._pump(handle))
        log.info("card taken up", extra={"run_id": card.run_id, "card": card.out_track_id})
        return handle

    async def finish(
        self,
        run: Run,
        handle: OpenCard,
        text: str,
        ending: RunEnding | None,
        cut_off: str | None = None,
        stopped: bool = False,
        continues: bool = False,
    ) -> Receipt:
        """End the card with ``text``: the final frame, then the finished state. ``cut_off``
        says why the answer stopped short (the receipt is then ``failed``, partial);
        ``stopped``: the asker stopped it (``card_stopped``); ``continues``: the answer goes
        on in the next card."""
        await self.stop(handle)
        handle.card.continues = continues
        if handle.card.fallback is not None and cut_off is None:
            return await self._fall_back(run, handle, text, ending)
        card = handle.card
        # The end is recorded before its calls wait for their slots: a stop meanwhile
        # leaves it for the next execution to put on the card (agent/cards/recovery.py).
        card.final, card.updated_at = text, self.clock.now()
        reason = _reason(cut_off, False, stopped)
        card.final_reason = CardReason(reason) if reason is not None else None
        self.store.cards.save_card(card)
        frame, state = await self.close_on_platform(handle, text)
        if not frame.ok and card.frames == 0 and frame.reason in UNFIT and cut_off is None:
            card.fallback = frame.reason
            return await self._fall_back(run, handle, text, ending)
        status = ReceiptStatus.ACCEPTED if frame.ok and state.ok else ReceiptStatus.FAILED
        if not (frame.ok and state.ok) and CardOutcome.UNCERTAIN in (frame.outcome, state.outcome):
            status = ReceiptStatus.UNCERTAIN
        late = status is ReceiptStatus.FAILED and frame.retryable and cut_off is None
        if cut_off is not None:
            status = ReceiptStatus.FAILED
        last = state if frame.ok else frame
        evidence = self._evidence(handle, last, cut_off)
        if late:  # still throttled at card_stall_s: the recovery loop finishes it later
            evidence.detail = (
                f"the final frame was still throttled after {self.stall_s:g}s: the card shows"
                f" what had streamed ({card.frames} frames) until it is finished later"
            )
        receipt = self.broker.receipt(
            run,
            ActionKind.REPLY,
            status,
            intent_id=handle.intent.intent_id,
            reason=_reason(cut_off, late, stopped),
            evidence=evidence,
        )
        intent = handle.intent.model_copy(
            update={"content": MessageContent(msgtype="card", text=text)}
        )
        outbound = self._outbound(handle, text) if frame.ok or state.ok else None
        settled = ending.apply(run, receipt) if ending is not None else None
        await patiently(
            lambda: self.store.cards.finish_card(card, intent, receipt, None, outbound, settled),
            attempts=None,
        )
        log.info("card finished", extra={"run_id": run.run_id, "card": card.out_track_id})
        return receipt

    def _outbound(self, handle: OpenCard, text: str) -> dict[str, Any]:
        """What the card said, for the outbound index."""
        return {
            "intent_id": handle.intent.intent_id,
            "process_query_key": handle.carrier_id,
            "conversation_id": handle.intent.target.conversation_id,
            "channel": Channel.CARD.value,
            "text": text,
            "sent_at": self.clock.now(),
        }

    async def _fall_back(
        self, run: Run, handle: OpenCard, text: str, ending: RunEnding | None
    ) -> Receipt:
        """The same answer as markdown on the usual channel, the reason on its receipt; a
        card that exists (or may) is closed as failed first, so it does not spin."""
        card = handle.card
        reason = card.fallback or CardReason.REFUSED
        if handle.exists is not False:
            line = MOVED_NOTE if reason is CardReason.CREATE_UNKNOWN else None
            closed, tries = await self._paced(
                handle,
                sha256_text(line or "")[:32],
                lambda: self.api.set_state(card.out_track_id, FLOW_FAILED, line),
                self.clock.now() + self.stall_s,
            )
            handle.retries += tries
            card.state = CardState.FINALIZED if closed.ok else card.state
        if card.state is not CardState.FINALIZED:
            card.state = CardState.ABANDONED
        card.updated_at = self.clock.now()
        intent = handle.intent.model_copy(
            update={"content": MessageContent(msgtype="markdown", text=text)}
        )

        def record(attempt: Attempt) -> None:
            self.store.cards.fall_back(card, intent, attempt)

        log.info("card fell back to markdown", extra={"run_id": run.run_id, "reason": reason})
        return await self.broker.deliver_instead(
            run, intent, ending, reason.value, record, tried=[Channel.CARD]
        )

    async def deliver(
        self, run: Run, intent: ActionIntent, ending: RunEnding | None, start: int = 1
    ) -> Receipt:
        """A whole answer as cards of one frame each (a provider that does not stream): one
        card, or — longer than a card shows — one per part, in order, the whole text kept
        beside the first until the last opened (a crash between two leaves the rest owed:
        agent/cards/recovery.py ``send_owed_parts``, which goes on from part ``start``)."""
        assert intent.content is not None
        text = intent.content.text
        parts = card_parts(text, self.block_chars)
        if len(parts) > 1 and start == 1:
            self.store.pieces.keep_piece_bytes(intent, text.encode("utf-8"))
        receipt: Receipt | None = None
        for n, part in enumerate(parts[start - 1 :], start=start):
            handle = await self.open(run, part_intent(intent, n))
            if handle is None:  # another execution holds this part's key
                return self.broker.refuse_duplicate(run, part_intent(intent, n))
            last = n == len(parts)
            receipt = await self.finish(
                run, handle, part, ending if last else None, continues=not last
            )
            if not receipt.status.delivered:
                break  # the rest of a long answer does not go after a failed part
            if n < len(parts):
                self.broker.crash.hit("between_pieces")
        if len(parts) > 1:
            self.store.pieces.forget_bytes_of(intent.intent_id)
        assert receipt is not None
        return receipt
