"""The broker's side of an AI card: one approved reply intent, one card, one receipt.

A card is a delivery form of ``reply``; the action gate approved its intent before any of
this runs. From there the order is the broker's:

    open   intent + create attempt + card stored (one transaction), then createAndDeliver
    frames each one the full text so far, paced (agent/cards/pacing.py), recorded once taken
    finish final frame, then the finished state; only when DingTalk took both is the receipt
           ``accepted``; the receipt, the card's state and the intent's final content (set
           here, once) are saved together, with the run's end when it is its last word

The ``outTrackId`` is derived from the intent's idempotency key, so every execution of one
event's reply names the same card. Nothing ever creates a card twice: after a crash the
stored card is *finalized* — with what the person saw and a short note that the answer was
cut off, receipt ``failed`` — never created again, and its answer is never resent.

Cards left open are finalized by ``agent.cards.recovery``. A card that cannot carry the
answer (no permission, an unpublished template, a key that is not the template's streaming
variable) falls back: the same intent goes as markdown on the
usual channel, with the reason on the receipt; a card that did get created is closed first,
so nothing is left spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from agent.cards.api import (
    FLOW_FAILED,
    FLOW_FINISHED,
    CardAnswer,
    CardAPI,
    CardOutcome,
    open_space_id,
)
from agent.cards.pacing import CardPacer
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    Attempt,
    AttemptOutcome,
    Card,
    CardReason,
    CardState,
    Channel,
    Evidence,
    MessageContent,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    new_id,
    sha256_text,
)
from agent.run.broker import Broker
from storage import Store
from storage.patience import patiently

log = logging.getLogger("dta.cards")

CUT_OFF_NOTE = "（回答到这里中断了，没有写完。）"
# What a card ends with when its answer may not be shown (a leaking frame, an invalid answer).
REFUSAL_TEXT = "抱歉，这个回答不能发出，已经停止。请换个说法再问一次。"
# A card's create or frame answered like this can never show text: the answer goes as markdown.
_UNFIT = (CardReason.KEY_MISMATCH, CardReason.NO_PERMISSION)
_STATUS = {
    ReceiptStatus.ACCEPTED: AttemptOutcome.ACCEPTED,
    ReceiptStatus.FAILED: AttemptOutcome.FAILED,
    ReceiptStatus.UNCERTAIN: AttemptOutcome.UNCERTAIN,
}


def card_parts(text: str, block: int) -> list[str]:
    """``text`` as cards of at most ``block`` code points: cut at a paragraph, a line or a
    sentence in the block's second half where there is one, else at the block's end."""
    parts: list[str] = []
    rest = text
    while len(rest) > block:
        cut = part_end(rest, block)
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    parts.append(rest)
    return parts


def part_end(text: str, block: int) -> int:
    """Where the first card of ``text`` (longer than ``block``) ends."""
    for mark in ("\n\n", "\n", "。", "！", "？", ". ", "；", "，", " "):
        at = text.rfind(mark, block // 2, block)
        if at > 0:
            return at + len(mark)
    return block


def part_intent(intent: ActionIntent, n: int) -> ActionIntent:
    """The intent of a long answer's n-th card: the first is the approved one; each later
    one has a key of its own (``<key>#n``), so its card is named once however often the run
    is driven, and counts as the message it is."""
    if n == 1:
        return intent
    return intent.model_copy(
        update={
            "intent_id": f"{intent.intent_id}-{n}",
            "idempotency_key": f"{intent.idempotency_key}#{n}",
        }
    )


def _reason(cut_off: str | None, late: bool, stopped: bool = False) -> str | None:
    if stopped:
        return CardReason.STOPPED.value
    if cut_off is not None:
        return CardReason.CUT_OFF.value
    return CardReason.FINAL_LATE.value if late else None


def cut_off_text(streamed: str) -> str:
    """What a card cut off mid-answer ends with: what the person saw, and the note."""
    return f"{streamed.rstrip()}\n\n{CUT_OFF_NOTE}" if streamed.strip() else CUT_OFF_NOTE


@dataclass
class OpenCard:
    """A card being streamed: the stored record plus what only this execution knows."""

    card: Card
    intent: ActionIntent
    exists: bool | None = None  # True once DingTalk took the create or a frame; None: unknown
    latest: str = ""  # the newest text the gate side allowed on the card
    sending: str = ""
    unsure: str | None = None  # a frame whose answer said nothing: not sent again as it is
    broken: str | None = None  # why frames stopped (a definite no to a frame)
    carrier_id: str | None = None
    retries: int = 0
    done: bool = False
    last_call: list[float] = field(default_factory=lambda: [float("-inf")])
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    pump: asyncio.Task[None] | None = None


class CardBroker:
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
        """Store the card with its intent and create attempt, then create it; None when
        another execution already holds the intent's slot."""
        now = self.clock.now()
        space = open_space_id(intent.target)
        out = self.out_track_id(intent)
        body = self.api.create_body(out, intent.target, space or "")
        attempt = self._attempt(intent, CardAPI.digest(body))
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
        if not self.store.open_card(intent.model_copy(update={"content": None}), attempt, card):
            return None
        handle = OpenCard(card, intent)
        if space is None:
            answer, tries = CardAnswer(CardOutcome.REFUSED, detail="no staff id: no card space"), 0
        else:
            deadline = now + self.stall_s
            answer, tries = await self.pacer.call(
                None, lambda: self.api.create(body), deadline=deadline
            )
        handle.carrier_id, handle.retries = answer.carrier_id, tries
        self._close(attempt, answer, handle)
        if answer.ok:
            card.state, handle.exists = CardState.STREAMING, True
        elif answer.outcome is not CardOutcome.UNCERTAIN:
            card.state, card.fallback, handle.exists = CardState.ABANDONED, answer.reason, False
        card.updated_at = self.clock.now()
        self.store.save_card(card, done=attempt)
        if handle.exists is not False:
            handle.pump = asyncio.ensure_future(self._pump(handle))
        log.info("card opened", extra={"card": out, "create": answer.describe()})
        return handle

    def offer(self, handle: OpenCard, text: str) -> None:
        """The newest text the gate side allows on the card; the pump sends it when it may."""
        if text != handle.latest:
            handle.latest = text
            handle.wake.set()

    async def _pump(self, handle: OpenCard) -> None:
        """Frames, one at a time per card (DingTalk answers concurrent updates with 403):
        always the newest text, so whatever came in between is merged into it."""
        while not handle.done:
            await handle.wake.wait()
            handle.wake.clear()
            while self._behind(handle):
                answer, tries = await self.pacer.call(
                    handle.last_call, lambda: self._frame(handle), give_up=lambda: handle.done
                )
                handle.retries += tries
                self._took_frame(handle, answer)

    @staticmethod
    def _behind(handle: OpenCard) -> bool:
        if handle.done or handle.broken is not None or handle.card.fallback is not None:
            return False
        return handle.latest not in (handle.card.streamed, handle.unsure) and bool(handle.latest)

    async def _frame(self, handle: OpenCard) -> CardAnswer:
        handle.sending = handle.latest
        return await self.api.frame(handle.card.out_track_id, handle.sending, final=False)

    def _took_frame(self, handle: OpenCard, answer: CardAnswer) -> None:
        card = handle.card
        if answer.ok:
            card.streamed, card.frames, handle.exists = handle.sending, card.frames + 1, True
            card.state, card.updated_at = CardState.STREAMING, self.clock.now()
            self.store.save_card(card)  # what the person sees, for a card cut off by a crash
        elif answer.outcome is CardOutcome.UNCERTAIN:
            handle.unsure = handle.sending
        elif not answer.retryable:
            if card.frames == 0 and answer.reason in _UNFIT:
                card.fallback = answer.reason  # it exists, but can never show this text
            handle.broken = answer.describe()

    async def stop(self, handle: OpenCard) -> None:
        """No more intermediate frames: wait for the one in flight, if any."""
        handle.done = True
        handle.wake.set()
        if handle.pump is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await handle.pump

    def abandon(self, handle: OpenCard) -> None:
        """Stop at once (the runtime is going down): the stored card is finalized later."""
        handle.done = True
        if handle.pump is not None:
            handle.pump.cancel()

    async def finish(
        self,
        run: Run,
        handle: OpenCard,
        text: str,
        ending: RunEnding | None,
        cut_off: str | None = None,
        stopped: bool = False,
    ) -> Receipt:
        """End the card with ``text``: the final frame, then the finished state. ``cut_off``
        says why the answer stopped short (the receipt is then ``failed``, partial);
        ``stopped``: the asker stopped it (``card_stopped``)."""
        await self.stop(handle)
        if handle.card.fallback is not None and cut_off is None:
            return await self._fall_back(run, handle, text, ending)
        card = handle.card
        attempt = self._attempt(handle.intent, sha256_text(text)[:32])
        card.final, card.updated_at = text, self.clock.now()
        self.store.save_card(card, start=attempt)
        frame, state = await self.close_on_platform(handle, text)
        if not frame.ok and card.frames == 0 and frame.reason in _UNFIT and cut_off is None:
            card.fallback = frame.reason
            self._close(attempt, frame, handle)
            return await self._fall_back(run, handle, text, ending, done=attempt)
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
        attempt.outcome, attempt.finished_at = _STATUS[status], self.clock.now()
        attempt.evidence = evidence
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
        outbound = None
        if frame.ok or state.ok:
            outbound = {
                "intent_id": intent.intent_id,
                "process_query_key": handle.carrier_id,
                "conversation_id": intent.target.conversation_id,
                "channel": Channel.CARD.value,
                "text": text,
                "sent_at": attempt.finished_at,
            }
        settled = ending.apply(run, receipt) if ending is not None else None
        await patiently(
            lambda: self.store.finish_card(card, intent, receipt, attempt, outbound, settled),
            attempts=None,
        )
        log.info("card finished", extra={"run_id": run.run_id, "card": card.out_track_id})
        return receipt

    async def close_on_platform(self, handle: OpenCard, text: str) -> tuple[CardAnswer, CardAnswer]:
        """The final frame and the finished state, each retried while throttled until the
        card counts as stalled; the card's record follows what DingTalk took."""
        card, out = handle.card, handle.card.out_track_id
        deadline = self.clock.now() + self.stall_s
        frame, tries = await self.pacer.call(
            None, lambda: self.api.frame(out, text, final=True), deadline=deadline
        )
        state, more = await self.pacer.call(
            None,
            lambda: self.api.set_state(out, FLOW_FINISHED, text),
            deadline=deadline,
        )
        handle.retries += tries + more
        if frame.ok:
            card.streamed, card.frames = text, card.frames + 1
        if frame.ok or state.ok:
            card.state = CardState.FINALIZED  # either one stops the spinner
        elif frame.outcome is CardOutcome.REFUSED and state.outcome is CardOutcome.REFUSED:
            card.state = CardState.ABANDONED  # DingTalk takes no update for it: nothing to close
        card.updated_at = self.clock.now()
        return frame, state

    async def _fall_back(
        self,
        run: Run,
        handle: OpenCard,
        text: str,
        ending: RunEnding | None,
        done: Attempt | None = None,
    ) -> Receipt:
        """The same answer as markdown on the usual channel, the reason on its receipt; a
        card that exists is closed as failed first, so it does not spin."""
        card = handle.card
        reason = card.fallback or CardReason.REFUSED
        if handle.exists is not False:
            closed, tries = await self.pacer.call(
                None,
                lambda: self.api.set_state(card.out_track_id, FLOW_FAILED, None),
                deadline=self.clock.now() + self.stall_s,
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
            if done is not None:
                self.store.save_card(card, done=done)
            self.store.fall_back(card, intent, attempt)

        log.info("card fell back to markdown", extra={"run_id": run.run_id, "reason": reason})
        return await self.broker.deliver_instead(
            run, intent, ending, reason.value, record, tried=[Channel.CARD]
        )

    async def deliver(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        """A whole answer as cards of one frame each (a provider that does not stream): one
        card, or — longer than a card shows — one per part, in order."""
        assert intent.content is not None
        parts = card_parts(intent.content.text, self.block_chars)
        receipt: Receipt | None = None
        for n, part in enumerate(parts, start=1):
            handle = await self.open(run, part_intent(intent, n))
            if handle is None:  # another execution holds this part's key
                return self.broker.refuse_duplicate(run, part_intent(intent, n))
            receipt = await self.finish(run, handle, part, ending if n == len(parts) else None)
            if not receipt.status.delivered:
                break  # the rest of a long answer does not go after a failed part
        assert receipt is not None
        return receipt

    # ------------------------------------------------------------------ records

    def _attempt(self, intent: ActionIntent, digest: str) -> Attempt:
        return Attempt(
            attempt_id=new_id("att"),
            intent_id=intent.intent_id,
            channel=Channel.CARD,
            started_at=self.clock.now(),
            request_digest=digest,
        )

    def _close(self, attempt: Attempt, answer: CardAnswer, handle: OpenCard) -> None:
        attempt.outcome = {
            CardOutcome.OK: AttemptOutcome.ACCEPTED,
            CardOutcome.UNCERTAIN: AttemptOutcome.UNCERTAIN,
        }.get(answer.outcome, AttemptOutcome.FAILED)
        attempt.finished_at = self.clock.now()
        attempt.evidence = self._evidence(handle, answer, None)

    def _evidence(self, handle: OpenCard, answer: CardAnswer, cut_off: str | None) -> Evidence:
        detail = answer.detail if not answer.ok else None
        if cut_off is not None:
            detail = f"cut off: {cut_off}" + (f"; {detail}" if detail else "")
        return Evidence(
            http_status=answer.http_status,
            errmsg=answer.code,
            process_query_key=handle.carrier_id,
            retries=handle.retries,
            channels_tried=[Channel.CARD],
            detail=detail,
            out_track_id=handle.card.out_track_id,
            frames=handle.card.frames,
        )
