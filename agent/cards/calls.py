"""The calls of one open AI card, paced, each recorded as it leaves (mixed into
``CardBroker``): its frames, its end on the platform, and the attempts and evidence.

Every card call's attempt is stored only once its slot in the app-wide budget is had and
the call leaves (``_paced``), and closed by its answer — a throttled try, provably not
taken, closes ``failed`` and the next try has an attempt of its own. So a stop or a takeover
while a call waits for its slot or a throttle's back-off leaves nothing that may have been
sent, and an attempt still ``started`` after a stop is one that was on the wire. Intermediate
frames carry no attempt: each carries the whole text so far, and what DingTalk took of them
is on the card's record (``streamed``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent.cards.api import FLOW_FINISHED, CardAnswer, CardAPI, CardOutcome
from agent.cards.pacing import CardPacer
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    Attempt,
    AttemptOutcome,
    Card,
    CardReason,
    CardState,
    Channel,
    Evidence,
    new_id,
    sha256_text,
)
from agent.run.broker import Broker
from storage import Store

# A card's create or frame answered like this can never show text: the answer goes as markdown.
UNFIT = (CardReason.KEY_MISMATCH, CardReason.NO_PERMISSION)


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


class CardCalls:
    """Mixed into ``CardBroker``, which supplies these."""

    store: Store
    clock: Clock
    api: CardAPI
    pacer: CardPacer
    broker: Broker
    stall_s: float

    async def _paced(
        self,
        handle: OpenCard,
        digest: str,
        send: Callable[[], Awaitable[CardAnswer]],
        deadline: float | None,
        took: Callable[[CardAnswer], None] | None = None,
    ) -> tuple[CardAnswer, int]:
        """One card call through the pacer, its attempt stored only as each try leaves —
        never while it waits for a slot or a throttle's back-off, so a stop then has sent
        nothing — and closed by that try's answer (``took`` first applies what the answer
        changes on the card, saved with the closed attempt)."""

        async def once() -> CardAnswer:
            attempt = self._attempt(handle.intent, digest)
            self.store.actions.start_attempt(attempt)  # fenced: a run taken over sends nothing
            self.broker.crash.hit("after_attempt_started")
            answer = await send()
            self.broker.crash.hit("after_send")
            self._close(attempt, answer, handle)
            if took is not None:
                took(answer)
            self.store.cards.save_card(handle.card, done=attempt)
            return answer

        return await self.pacer.call(None, once, deadline=deadline)

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
            self.store.cards.save_card(card)  # what the person sees, for a card cut off by a crash
        elif answer.outcome is CardOutcome.UNCERTAIN:
            handle.unsure = handle.sending
        elif not answer.retryable:
            if card.frames == 0 and answer.reason in UNFIT:
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

    async def close_on_platform(self, handle: OpenCard, text: str) -> tuple[CardAnswer, CardAnswer]:
        """The final frame and the finished state, each retried while throttled until the
        card counts as stalled; the card's record follows what DingTalk took (the final
        frame's text is on record before the state's call waits, so a stop in between
        finishes the card with it, not over it)."""
        card, out = handle.card, handle.card.out_track_id
        deadline = self.clock.now() + self.stall_s
        digest = sha256_text(text)[:32]

        def shown(answer: CardAnswer) -> None:
            if answer.ok:
                card.streamed, card.frames = text, card.frames + 1

        frame, tries = await self._paced(
            handle, digest, lambda: self.api.frame(out, text, final=True), deadline, shown
        )
        state, more = await self._paced(
            handle, digest, lambda: self.api.set_state(out, FLOW_FINISHED, text), deadline
        )
        handle.retries += tries + more
        if frame.ok or state.ok:
            card.state = CardState.FINALIZED  # either one stops the spinner
        elif frame.outcome is CardOutcome.REFUSED and state.outcome is CardOutcome.REFUSED:
            card.state = CardState.ABANDONED  # DingTalk takes no update for it: nothing to close
        card.updated_at = self.clock.now()
        return frame, state

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
