"""One event's way from the response gate to its receipts.

    decide (response gate) ─silent─▶ silent receipt, run ends, zero outbound calls
        │ engage
    build invocation ─▶ provider ─▶ ActionRequest[]
        │ for each request
    action gate ─refused─▶ refused receipt with the reason
        │ approved intent(s)
    broker ─▶ attempts ─▶ receipt

``Pipeline.process`` is safe to call again for the same event after a crash: the run and
its decision are reused, and anything the crashed execution already did is caught by the
idempotency keys.

Acting on requests lives in agent/run/acting.py and the endings without an answer (silence,
the honest failure, a crash) in agent/run/endings.py; this module decides which way a run goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from agent.cards.stream import CardReplies, StreamHost
from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    EnrichedInvocation,
    Event,
    Origin,
    Repair,
    ResponseDecision,
    Run,
    SilentReason,
    SkillSnapshot,
    TaskCheckpoint,
    Verdict,
    new_id,
)
from agent.proactive.schedule import SchedulePolicy
from agent.proactive.work import ProactiveWork
from agent.run.acting import REPAIRABLE, Acting
from agent.run.broker import Broker
from agent.run.endings import HONEST_FAILURE, Endings
from agent.run.invocation import InvocationBuilder
from agent.run.outcome import RunOutcome, touches_task
from agent.run.recovery import settled_from_records
from agent.run.tasks import TaskKeeper
from gates.action import ActionGate
from gates.response import ResponseGate
from skills.media import host_reply
from skills.providers.base import Provider, ProviderFailed, ProviderReply
from skills.rundir import prepare_run_dir
from storage import Lease, LeaseLost, Store
from storage.patience import is_transient

log = logging.getLogger("dta.pipeline")

__all__ = ["ACK_TEXT", "HONEST_FAILURE", "OPERATOR_STOPS", "Pipeline", "SkillSource"]

# Operator decisions that apply even to work accepted before they were made.
OPERATOR_STOPS = (SilentReason.PAUSED, SilentReason.DENIED, SilentReason.NOT_ALLOWED)
# What it says when the answer takes a while (only then).
ACK_TEXT = "收到，我看一下，稍等。"
# The ack is due ``ack_after_s`` after the message arrived, but never sooner than this
# (or ``ack_after_s``, if less) after the run starts: a run that starts late (recovered
# after a restart, or behind the same person's earlier message) and answers at once
# needs no "稍等" just before its answer.
ACK_FLOOR_S = 0.5


class SkillSource(Protocol):
    def for_event(
        self, msgtype: str, scene: str, provider: str
    ) -> tuple[Sequence[Any], SkillSnapshot, list[ActionKind]]: ...


class Pipeline:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        response_gate: ResponseGate,
        action_gate: ActionGate,
        skills: SkillSource,
        provider: Provider,
        broker: Broker,
        invocations: InvocationBuilder,
        tasks: TaskKeeper,
        run_dir: Path | None,
        ack_after_s: float,
        provider_slots: int,
        owner: str,
        lease_s: float,
        reply_form: str,
        cards: CardReplies | None,
        schedule: SchedulePolicy,
    ) -> None:
        self.store = store
        self.clock = clock
        self.response_gate = response_gate
        self.action_gate = action_gate
        self.skills = skills
        self.provider = provider
        self.broker = broker
        self.invocations = invocations
        self.tasks = tasks
        self.run_dir = run_dir
        self.ack_after_s = ack_after_s
        # Runs at their provider at once (``max_concurrent_runs``). The rest of a run is
        # not held back by it, so every run's ack timer runs from its message's arrival.
        self.provider_slots = asyncio.Semaphore(provider_slots)
        self.owner = owner
        self.lease_s = lease_s
        # How answers are delivered ("text", "markdown" or "card"); cards stream when the
        # provider can (agent/cards/stream.py), else a reply is a one-frame card.
        self.reply_form = reply_form
        self.cards = cards
        # Requests to receipts, and the endings without an answer: one place each, shared
        # with the card stream (agent/run/acting.py, agent/run/endings.py).
        self.acting = Acting(
            store=store,
            clock=clock,
            action_gate=action_gate,
            broker=broker,
            reply_form=reply_form,
            cards=cards.cards if cards is not None else None,
        )
        self.endings = Endings(store=store, clock=clock, broker=broker, acting=self.acting)
        # The runtime's own events (heartbeat items, operator sends) and 「取消提醒」.
        self.proactive = ProactiveWork(
            store=store,
            clock=clock,
            acting=self.acting,
            endings=self.endings,
            policy=schedule,
        )

    def lease(self, now: float) -> Lease:
        """The claim this runtime puts on a run it opens (renewed while it works)."""
        return Lease(self.owner, now + self.lease_s, now)

    async def process(self, event: Event, generation: int | None = None) -> Run | None:
        """Run the event end to end; None when another owner holds its run.

        A store that cannot take writes for a while (locked, full) raises
        ``StoreUnavailable``: the run stays ``working`` and the runtime drives it again once
        the store recovers. Whatever else goes wrong, the run ends with a receipt
        (``internal_error``) rather than staying ``working``.
        """
        try:
            return await self._process(event, generation)
        except LeaseLost as lost:
            # Another replica took the run over while this one was away (paused, cut off
            # from the store): the write was refused and nothing more is sent from here.
            log.warning(
                "run taken over by another owner; left to it",
                extra={"event_id": event.event_id, "owner": lost.holder},
            )
            return None
        except Exception as exc:
            if is_transient(exc):
                raise
            log.exception("run failed unexpectedly", extra={"event_id": event.event_id})
            return await self.endings.abandon(event, exc)

    async def _process(self, event: Event, generation: int | None) -> Run | None:
        """The run's one exit: settled early (already finished, settled from the records,
        stopped, silent) or worked to its end; None while another owner holds it."""
        opened = self._open(event, generation)
        if opened is None:
            run = None
        else:
            skills, run, decision, again = opened
            early = await self._settle_early(event, run, decision, again)
            run = early if early is not None else await self._work(event, skills, run, decision)
        return run

    async def _settle_early(
        self, event: Event, run: Run, decision: ResponseDecision, again: bool
    ) -> Run | None:
        """The run's end before any work, or None when it is engaged and still to do."""
        if run.state.is_finished:
            return run
        if again:
            # An earlier execution stopped (a crash, or a store that failed under it):
            # what it left open is uncertain or provably unsent before anything else.
            if self.cards is not None:  # a card it left open ends cut off, never re-created
                await self.cards.recover(event.event_id)
            self.broker.reconcile_interrupted(event.event_id)
            self.store.drop_unsent_intents(event.event_id)
            settled = settled_from_records(self.store, self.tasks, run, self.clock.now())
            if settled is not None:
                return settled
        if again and decision.verdict is Verdict.ENGAGE:
            # The first verdict stands, except where the operator has since said stop.
            current = self.response_gate.decide(event, self.clock.now())
            if current.reason in OPERATOR_STOPS:
                return self.endings.stay_silent(run, current)
        if decision.verdict is Verdict.SILENT:
            return self.endings.stay_silent(run, decision)
        return None

    async def _work(
        self, event: Event, skills: Sequence[Any], run: Run, decision: ResponseDecision
    ) -> Run:
        """The engaged path: the task, the provider's answer, its actions, the run's end."""
        proactive = await self.proactive.handle(event, run)
        if proactive is not None:
            return proactive
        supplies = bool(event.attachments) or event.quote is not None
        start = self.tasks.begin(run, event.text, supplies=supplies)
        if start.stop:
            ended = f"task {start.cancelled.task_id}" if start.cancelled else "nothing running"
            return self.endings.end_silent(run, SilentReason.TASK_CANCELLED, f"stop: {ended}")
        outcome = RunOutcome()
        invocation, reply = await self._answer(
            event, skills, run, decision, start.continuation, outcome
        )
        if isinstance(reply, ProviderFailed):
            return await self.endings.fail_honestly(run, reply, outcome)
        run = run.model_copy(update={"usage": reply.usage, "evidence": reply.evidence})
        if not reply.requests and outcome.terminal is None:
            if outcome.acked:
                empty = ProviderFailed("no_answer", "nothing after the ack")
                return await self.endings.fail_honestly(run, empty, outcome)
            return self.endings.end_silent(
                run, SilentReason.PROVIDER_SILENCE, "provider returned nothing"
            )
        # Task work settles the run only after the task has moved: a crash in between
        # leaves the run ``working``, and recovery moves both from the records.
        task_work = start.continuation is not None or any(map(touches_task, reply.requests))
        await self.acting.act(run, reply.requests, outcome, settle_last=not task_work)
        if invocation is not None and self._may_repair(outcome, reply):
            repaired = await self._repair(run, invocation, skills, reply, outcome)
            if isinstance(repaired, ProviderFailed):
                return await self.endings.fail_honestly(run, repaired, outcome)
            run, reply = repaired
            task_work = task_work or any(map(touches_task, reply.requests))
            await self.acting.act(run, reply.requests, outcome, settle_last=not task_work)
        if outcome.terminal is None and outcome.refused_answer is not None:
            refused = ProviderFailed("refused_by_gate", outcome.refused_answer)
            return await self.endings.fail_honestly(run, refused, outcome)
        self.tasks.settle(
            run, start.continuation, outcome.terminal_request, outcome.terminal_receipt
        )
        return self.endings.finish(run, outcome, outcome.final_state())

    async def _answer(
        self,
        event: Event,
        skills: Sequence[Any],
        run: Run,
        decision: ResponseDecision,
        continuation: TaskCheckpoint | None,
        outcome: RunOutcome,
    ) -> tuple[EnrichedInvocation | None, ProviderReply | ProviderFailed]:
        """The invocation and the provider's reply to it (or the host's own: no invocation
        to repair), or why there is none."""
        invocation = await self.invocations.build(event, run, decision, continuation)
        if self.run_dir is not None:
            prepare_run_dir(self.run_dir / run.run_id, invocation, skills, run.skill_snapshot)
        hosted = host_reply(invocation)  # a refused file or an unreadable type: no provider
        if hosted is not None:
            return None, ProviderReply([hosted], evidence={"answered_by": "host"})
        return invocation, await self._asked(run, invocation, skills, outcome)

    def _may_repair(self, outcome: RunOutcome, reply: ProviderReply) -> bool:
        """One repair round per run: for an answer refused as untrue (a claim, a promise),
        when the provider has not used its round on unreadable output already. A streamed
        card has shown its answer as it came, so it ends with the honest words instead."""
        if outcome.terminal is not None or outcome.refused_reason not in REPAIRABLE:
            return False
        if self.cards is not None and self.cards.streams(self.provider):
            return False
        return not reply.evidence.get("repaired")

    async def _repair(
        self,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        refused: ProviderReply,
        outcome: RunOutcome,
    ) -> tuple[Run, ProviderReply] | ProviderFailed:
        """The provider asked again, told what was refused and why; the run keeps both
        rounds' usage."""
        reason, detail = outcome.refused_reason, outcome.refused_answer or ""
        note = Repair(reason=str(reason), detail=detail, previous=list(refused.requests))
        log.info("answer refused; repair round", extra={"run_id": run.run_id, "reason": reason})
        again = invocation.model_copy(update={"repair": note})
        reply = await self._asked(run, again, skills, outcome)
        if isinstance(reply, ProviderFailed):
            return reply
        usage = {k: run.usage.get(k, 0) + reply.usage.get(k, 0) for k in {*run.usage, *reply.usage}}
        evidence = {**reply.evidence, "repaired": True, "repaired_for": str(reason)}
        return run.model_copy(update={"usage": usage, "evidence": evidence}), reply

    async def _asked(
        self,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        outcome: RunOutcome,
    ) -> ProviderReply | ProviderFailed:
        """The provider's reply, or why there is none: a provider that fails or crashes is
        a value here, never an exception that takes the daemon down. The ack is due
        ``ack_after_s`` after the message arrived (a repair round's too)."""
        waited = self.clock.now() - invocation.event.received_at
        ack_in = max(self.ack_after_s - waited, min(ACK_FLOOR_S, self.ack_after_s))
        try:
            return await self._respond(run, invocation, skills, outcome, ack_in)
        except ProviderFailed as exc:
            log.warning("provider failed", extra={"run_id": run.run_id, "reason": exc.reason})
            return exc
        except LeaseLost:
            raise  # a write while answering (the ack, a streamed card) found the run taken
        except Exception as exc:  # a provider bug must not take the daemon down
            log.exception("provider crashed", extra={"run_id": run.run_id})
            return ProviderFailed("provider_error", type(exc).__name__)

    async def _respond(
        self,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        outcome: RunOutcome,
        ack_in: float,
    ) -> ProviderReply:
        """Ask the provider (once a place is free); if no answer has come ``ack_in``
        seconds from now (``ack_after_s`` counted from the message's arrival), ack first.

        The ack ("seen, working on it") goes through the action gate like anything else,
        so it counts against the run's budget and the write budgets; a fast answer never
        causes one. Real time on purpose: it is the person who waits. In card mode, with a
        provider that streams, the card path does the same while the card fills in.
        """
        if self.cards is not None and self.cards.streams(self.provider):
            ack = partial(self._ack, run, outcome)
            acting = self.acting
            host = StreamHost(
                self.provider,
                acting.act,
                ack,
                acting.ending,
                ack_in,
                self.provider_slots,
                acting.accept,
            )
            return await self.cards.respond(host, run, invocation, skills, outcome)
        # A timer, not a second task: almost every answer comes before it fires.
        acking: asyncio.Task[None] | None = None

        def ack_now() -> None:
            nonlocal acking
            acking = asyncio.ensure_future(self._ack(run, outcome))

        timer = asyncio.get_running_loop().call_later(ack_in, ack_now)
        try:
            async with self.provider_slots:
                reply = await self.provider.respond(invocation, skills)
        except BaseException:
            if acking is not None:
                acking.cancel()
            raise
        finally:
            timer.cancel()
        if acking is not None:  # the ack goes out (or fails) before the answer is acted on
            await acking
        return reply

    async def _ack(self, run: Run, outcome: RunOutcome) -> None:
        if ActionKind.ACK in run.allowed_actions:
            ack = {"kind": "ack", "text": ACK_TEXT}
            await self.acting.act(run, [ack], outcome, settle_last=False)

    def _open(
        self, event: Event, generation: int | None
    ) -> tuple[Sequence[Any], Run, ResponseDecision, bool] | None:
        """The run and its verdict: new, or as an earlier (stopped) execution left them;
        None while another owner's lease on the run holds."""
        now = self.clock.now()
        skills, snapshot, allowed = self.skills.for_event(
            event.msgtype, event.conversation.type.value, self.provider.name
        )
        if generation is None:
            generation = self.store.event_generation(event.event_id)
        decision = self.response_gate.decide(event, now)
        fresh = self._new_run(event, snapshot, allowed, generation, now)
        run = self.store.open_run(fresh, decision, self.lease(now))
        if run is None:
            log.info("run held by another owner", extra={"event_id": event.event_id})
            return None
        again = run.run_id != fresh.run_id
        if again:
            # The event already had a run: its first recorded verdict stands.
            recorded = self.store.get_decision(event.event_id)
            if recorded is None:
                self.store.add_decision(run.run_id, decision)
            decision = recorded or decision
        log.info(
            "decision",
            extra={
                "run_id": run.run_id,
                "event_id": event.event_id,
                "conversation_id": event.conversation.id,
                "sender_id": event.actor.user_id,
                "verdict": decision.verdict.value,
                "reason": decision.reason.value,
            },
        )
        return skills, run, decision, again

    def _new_run(
        self,
        event: Event,
        snapshot: SkillSnapshot,
        allowed: list[ActionKind],
        generation: int,
        now: float,
    ) -> Run:
        return Run(
            run_id=new_id("run"),
            event_id=event.event_id,
            thread_key=event.thread_key,
            generation=generation,
            allowed_actions=allowed,
            origin=Origin.of(event),
            skill_snapshot=snapshot,
            provider=self.provider.name,
            created_at=now,
            updated_at=now,
        )
