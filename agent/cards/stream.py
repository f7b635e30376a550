"""Card mode: a streaming provider's answer, approved and shown in an AI card as it is written.

    provider ──events──▶ consumer ──(first reply text)──▶ action gate ──approved──▶ card opens
                          │  each newer text: content check ─refused─▶ the stream stops,
                          │                   the card ends with a short refusal
                          └──▶ offer ──▶ pump (agent/cards/broker.py): paced frames, newest text
    answer complete ──▶ schema/content check of the whole answer ──▶ card finished with it
                    ──▶ its pictures and files (perhaps only in the finished request): each
                        its own message after the card (``Acting.send_after``), as for text

The card is the reply: its intent takes the event's terminal slot and counts once against
the write budgets, decided by the gate on the answer's first text, exactly as a text reply
is decided on its whole text. A reply whose first text the gate refuses gets no card; the
finished answer then goes through ``Acting.act`` like any other, and its refusal (or its
approval, as a one-frame card) is recorded there. Acks the model wrote before its reply go
out first, in order. Nothing else about the run changes: the ack timer, the honest failure
and the run's end follow the pipeline's rules (``StreamHost`` carries them here).

A long answer goes on in the next card when one is full; a stop pressed on any of its cards
stops it (``LiveAnswer.tracks``).

Never spinning: a provider that fails or stalls (no new text for ``card_stall_s``) after
the card opened ends it with what was streamed and a note that it was cut off; a crash
leaves the card in the store, and the next execution of the event settles it before
anything else (``agent/cards/recovery.py``): one that showed part of the answer is finalized
the same way, one that shows nothing yet carries that execution's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from agent.cards import recovery as card_recovery
from agent.cards.api import CardAPI
from agent.cards.broker import CardBroker
from agent.cards.endings import CardEndings
from agent.cards.live import STOP_POLL_S, LiveAnswer
from agent.cards.parts import card_parts, part_end, part_intent
from agent.contracts import (
    ActionKind,
    ActionRequest,
    EnrichedInvocation,
    Receipt,
    Run,
    RunEnding,
)
from agent.crashpoints import CrashPoints
from agent.run.gate_facts import load_facts
from agent.run.outcome import RunOutcome, touches_task
from agent.run.streaming import StreamHost
from agent.run.ways import ActAs
from gates.action import ActionGate, Refusal
from gates.frames import final_check, frame_refusal, unsafe_tail
from gates.reminders import EVERYONE_WORDS
from skills.providers.base import ProviderFailed, ProviderReply
from skills.providers.streaming import ReplyText, RequestDone, StreamEvent, StreamingProvider


def _kind(raw: Any) -> Any:
    return raw.get("kind") if isinstance(raw, dict) else getattr(raw, "kind", None)


class CardReplies(CardEndings):
    def __init__(
        self, cards: CardBroker, gate: ActionGate, crash: CrashPoints, stall_s: float
    ) -> None:
        self.cards = cards
        self.gate = gate
        self.crash = crash
        self.stall_s = stall_s

    @staticmethod
    def streams(provider: object) -> bool:
        return isinstance(provider, StreamingProvider)

    @property
    def api(self) -> CardAPI:
        return self.cards.api

    async def recover(self, event_id: str) -> int:
        """The event's cards an earlier execution left open, settled before it runs again
        (a card that shows nothing yet is left for this execution's answer), then the cards
        of a long one-frame answer it never opened, sent once each."""
        closed = await card_recovery.recover(self.cards, event_id, take_up=True)
        run = self.cards.store.events.get_run(event_id)
        if run is not None:
            await card_recovery.send_owed_parts(self.cards, run)
        return closed

    async def sweep(self, everything: bool = False) -> int:
        """Open cards of ended runs, closed (the recovery loop; everything at start-up)."""
        return await card_recovery.sweep(self.cards, everything)

    async def respond(
        self,
        host: StreamHost,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        outcome: RunOutcome,
    ) -> ProviderReply:
        """The provider's reply; with a card opened, the card already carries (and has
        finished) the reply, and only what the pipeline still owes is returned."""
        events: asyncio.Queue[StreamEvent] = asyncio.Queue()

        async def respond() -> ProviderReply:
            async with host.slots:
                return await host.provider.respond_streaming(invocation, skills, events.put_nowait)

        answer = asyncio.ensure_future(respond())
        live = LiveAnswer(run, outcome, asyncio.get_running_loop().time())
        live.invocation, live.skills = invocation, skills
        try:
            await self._consume(host, live, events, answer)
            return await self._settle(host, live, invocation, answer)
        finally:
            if not answer.done():  # stopped early (a refusal, a stall, a crash, a stop)
                answer.cancel()
            if live.card is not None and not live.card.done:
                self.cards.abandon(live.card)

    # ------------------------------------------------------------------ while it writes

    async def _consume(
        self,
        host: StreamHost,
        live: LiveAnswer,
        events: asyncio.Queue[StreamEvent],
        answer: asyncio.Future[ProviderReply],
    ) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            getter = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait(
                {getter, answer},
                timeout=self._timeout(host, live, started, loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getter in done:
                live.last = loop.time()
                await self._on_event(host, live, getter.result())
            else:
                getter.cancel()
            if live.refusal is not None or self._stop_asked(live, loop.time()):
                return
            if live.card is not None and live.card.card.frames:
                self.crash.hit("mid_stream")
            if getter in done:
                continue
            if answer in done:
                while not events.empty() and live.refusal is None:
                    await self._on_event(host, live, events.get_nowait())
                return
            if live.card is None:  # the answer takes a while: say so, once
                live.acked = True
                await host.ack()
            elif loop.time() - live.last >= self.stall_s:
                live.stalled = True
                return

    def _stop_asked(self, live: LiveAnswer, now: float) -> bool:
        """Has the asker pressed stop on any card of the answer (asked of the store at most
        every ``STOP_POLL_S``: the click may have reached another replica)?"""
        if live.card is None or now - live.stop_checked < STOP_POLL_S:
            return False
        live.stop_checked = now
        live.stopped = self.cards.store.cards.card_stop_requested(*live.tracks)
        return live.stopped

    def _timeout(
        self, host: StreamHost, live: LiveAnswer, started: float, now: float
    ) -> float | None:
        if live.card is not None:  # a stall, or the next look for a stop
            return max(0.0, min(live.last + self.stall_s - now, STOP_POLL_S))
        if not live.acked:
            return max(0.0, started + host.ack_after_s - now)
        return None

    async def _on_event(self, host: StreamHost, live: LiveAnswer, event: StreamEvent) -> None:
        if isinstance(event, RequestDone):
            live.complete[event.index] = event.raw
            if live.card is None and _kind(event.raw) == "ack" and event.index not in live.acted:
                live.acted.add(event.index)
                await host.act(live.run, [event.raw], live.outcome, ActAs.ACK)
            return
        assert isinstance(event, ReplyText)
        if live.card is not None:
            if event.index == live.index:
                await self._offer(live, event.text)
            return
        if event.index not in live.declined and event.text.strip():
            await self._open(host, live, event)

    async def _open(self, host: StreamHost, live: LiveAnswer, event: ReplyText) -> None:
        """Approve the reply on its first text (and whatever else of the request is
        complete by then) and open its card; what the model wrote before it goes first."""
        index, text = event.index, event.text
        for earlier in sorted(live.complete):
            if earlier < index and earlier not in live.acted:
                live.acted.add(earlier)
                await host.act(live.run, [live.complete[earlier]], live.outcome, ActAs.STREAMED)
        run, outcome = live.run, live.outcome
        if outcome.tally.terminal is not None:
            live.declined.add(index)
            return
        store, broker = self.cards.store, self.cards.broker
        facts = load_facts(store, run, self.cards.clock.now(), broker.webhook_problem(run.origin))
        verdict = self.gate.decide(event.head, run, outcome.tally, facts, form="card")
        if isinstance(verdict, Refusal):
            live.declined.add(index)  # no card: the finished answer is decided (and recorded)
            return
        handle = await self.cards.open(run, verdict.intents[0])
        if handle is None:
            live.declined.add(index)
            return
        outcome.tally.terminal = ActionKind.REPLY
        live.card, live.index = handle, index
        live.tracks.append(handle.card.out_track_id)
        await self._offer(live, text)

    async def _offer(self, live: LiveAnswer, text: str) -> None:
        """Check the full text so far like a text reply; a tail that could begin a secret
        waits for the next text. Past what one card shows, the card ends with its part and
        the answer goes on in the next one."""
        assert live.card is not None
        refusal = frame_refusal(self.gate, text, live.run, live.outcome.grounds.sources)
        if refusal is not None:
            live.refusal = refusal
            return
        held = (*self.gate.policy.secrets, *EVERYONE_WORDS)  # neither may show, even in part
        shown = text[: len(text) - unsafe_tail(text, held)]
        block = self.cards.block_chars
        while len(shown) - live.start > block and live.broken is None:
            end = live.start + part_end(shown[live.start :], block)
            await self._next_card(live, shown[live.start : end].rstrip())
            live.start = end
        if live.broken is None:
            self.cards.offer(live.card, shown[live.start :].lstrip())

    async def _next_card(self, live: LiveAnswer, part: str) -> None:
        """End the current card with ``part`` and open the next one of the answer."""
        assert live.card is not None
        receipt = await self.cards.finish(live.run, live.card, part, None, continues=True)
        live.outcome.receipts.append(receipt)
        if not receipt.status.delivered:
            live.broken = f"card {live.part} of the answer was not taken"
            return
        self.crash.hit(
            "between_pieces"
        )  # a stop here cuts the answer (store.cards.card_answer_cut)
        live.part += 1
        handle = await self.cards.open(live.run, part_intent(live.card.intent, live.part))
        if handle is None:
            live.broken = f"card {live.part} of the answer could not be opened"
            return
        live.card = handle
        live.tracks.append(handle.card.out_track_id)

    # ------------------------------------------------------------------ when it is done

    async def _settle(
        self,
        host: StreamHost,
        live: LiveAnswer,
        invocation: EnrichedInvocation,
        answer: asyncio.Future[ProviderReply],
    ) -> ProviderReply:
        if live.card is None:
            reply = await answer
            rest = [raw for at, raw in enumerate(reply.requests) if at not in live.acted]
            return ProviderReply(rest, reply.usage, reply.evidence)
        if not answer.done():
            answer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await answer
        if live.refusal is not None:
            return await self._refused(host, live, live.refusal, None)
        if live.stopped:
            return await self._stopped(host, live)
        if live.broken is not None:
            return self._ended_early(live)
        if live.stalled:
            return await self._cut(host, live, f"no new text for {self.stall_s:g}s", {})
        try:
            reply = answer.result()
        except ProviderFailed as exc:
            return await self._cut(host, live, f"{exc.reason}: {exc.detail}", exc.evidence)
        except Exception as exc:  # a provider bug must not leave the card open
            return await self._cut(host, live, f"provider_error: {type(exc).__name__}", {})
        return await self._finish(host, live, invocation, reply)

    async def _finish(
        self,
        host: StreamHost,
        live: LiveAnswer,
        invocation: EnrichedInvocation,
        reply: ProviderReply,
    ) -> ProviderReply:
        requests, outcome = reply.requests, live.outcome
        index = live.index
        if reply.evidence.get("repaired"):  # a second, whole answer: its reply is the card's
            index = next((at for at, raw in enumerate(requests) if _kind(raw) == "reply"), None)
        if index is not None and index >= len(requests):
            index = None
        rest = [
            (at, raw) for at, raw in enumerate(requests) if at not in live.acted and at != index
        ]
        before = [raw for at, raw in rest if index is None or at < index]
        after = [raw for at, raw in rest if index is not None and at > index]
        final = requests[index] if index is not None else None
        if final is None or _kind(final) != "reply":
            # The card took the terminal slot already: the rest are refused after it.
            why = "the finished answer is not the reply its card began"
            cut = await self._cut(host, live, why, reply.evidence, reply)
            if before or after:
                await host.act(live.run, before + after, outcome, ActAs.STREAMED)
            return cut
        if before:
            await host.act(live.run, before, outcome, ActAs.STREAMED)
        run = live.run.model_copy(update={"usage": reply.usage, "evidence": reply.evidence})
        live.run = run
        check = final_check(self.gate, final, run, self.cards.clock.now(), outcome.grounds.sources)
        if check.refusal is not None:
            return await self._refused(host, live, check.refusal, reply)
        request = ActionRequest.model_validate(final)
        host.accept(run, request, check.reminder_due)
        task_work = invocation.continuation is not None or any(map(touches_task, requests))
        last = not (after or task_work)
        # its pictures and files go after the card: then the last of them ends the run
        ending = (
            host.ending(outcome, ActionKind.REPLY) if last and not request.attachments else None
        )
        body = request.text if request.text is not None else request.markdown or ""
        receipt = await self._finish_parts(live, body + check.label_footer, ending)
        self._record(outcome, request, receipt, run, ending)
        if request.attachments:
            await host.send_after(run, final, receipt, outcome, last)
        if after:
            way = ActAs.ANSWER.before_its_task() if task_work else ActAs.ANSWER
            await host.act(run, after, outcome, way)
        return ProviderReply([], reply.usage, reply.evidence)

    async def _finish_parts(self, live: LiveAnswer, body: str, ending: RunEnding | None) -> Receipt:
        """The finished answer on its cards: what earlier cards showed stays, the rest ends
        the current card (and, longer than it shows, the cards after it, in order)."""
        rest = body[live.start :].lstrip() if live.start else body
        parts = card_parts(rest, self.cards.block_chars)
        for part in parts[:-1]:
            await self._next_card(live, part)
            if live.broken is not None:
                return live.outcome.receipts[-1]  # the last card that ended says how
        assert live.card is not None
        return await self.cards.finish(live.run, live.card, parts[-1], ending)
