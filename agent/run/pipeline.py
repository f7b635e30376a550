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

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent.acts.settle import ApprovalSettlement
from agent.cards.stream import CardReplies
from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    Event,
    Origin,
    ResponseDecision,
    Run,
    SilentReason,
    SkillSnapshot,
    Verdict,
    new_id,
)
from agent.proactive.schedule import SchedulePolicy
from agent.proactive.work import ProactiveWork
from agent.run.acting import Acting
from agent.run.answering import ACK_TEXT, Answering
from agent.run.broker import Broker
from agent.run.endings import HONEST_FAILURE, Endings
from agent.run.forgetting import Forgetting
from agent.run.invocation import InvocationBuilder
from agent.run.metering import ModelMeter
from agent.run.outcome import RunOutcome, touches_task
from agent.run.reactions import ReactionSignal
from agent.run.recovery import settled_from_records
from agent.run.tasks import TaskKeeper
from agent.run.tooling import ToolBox
from gates.action import ActionGate
from gates.response import ResponseGate
from skills.providers.base import Provider, ProviderFailed
from storage import Lease, LeaseLost, Store
from storage.patience import is_transient

if TYPE_CHECKING:
    from agent.components import ActParts

log = logging.getLogger("dta.pipeline")

__all__ = ["ACK_TEXT", "HONEST_FAILURE", "OPERATOR_STOPS", "Pipeline", "SkillSource"]


# Operator decisions that apply even to work accepted before they were made.
OPERATOR_STOPS = (SilentReason.PAUSED, SilentReason.DENIED, SilentReason.NOT_ALLOWED)


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
        fallback: Provider | None,
        meter: ModelMeter | None,
        forgetting: Forgetting | None = None,
        tools: ToolBox | None = None,
        acts: ActParts | None = None,
        reactions: ReactionSignal | None = None,
        ack_text: str | None = ACK_TEXT,
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
            acts=acts.runner if acts is not None else None,
            approval_cards=acts.cards if acts is not None else None,
            reactions=reactions,
        )
        self.endings = Endings(store=store, clock=clock, broker=broker, acting=self.acting)
        # Decisions on approvals carried out (a click's event, a text code, an expiry).
        settlement = None
        if acts is not None:
            settlement = ApprovalSettlement(
                store=store, clock=clock, acting=self.acting, endings=self.endings, cards=acts.cards
            )
        self.answering = Answering(
            clock=clock,
            provider=provider,
            invocations=invocations,
            acting=self.acting,
            cards=cards,
            ack_after_s=ack_after_s,
            provider_slots=provider_slots,
            run_dir=run_dir,
            fallback=fallback,
            meter=meter,
            forgetting=forgetting,
            tools=tools,
            ack_text=ack_text,
        )
        # The runtime's own events (heartbeat items, operator sends) and 「取消提醒」.
        self.proactive = ProactiveWork(
            store=store,
            clock=clock,
            acting=self.acting,
            endings=self.endings,
            policy=schedule,
            approvals=(acts.desk, settlement) if acts is not None and settlement else None,
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
            run = await self._process(event, generation)
            if run is not None and run.state.is_finished:
                await self._recall_reaction(event)
            return run
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

    async def _recall_reaction(self, event: Event) -> None:
        """The run has ended: its working-signal reaction comes off the message (a failure
        is logged; the answer has gone already)."""
        reactions = self.acting.reactions
        if reactions is None:
            return
        try:
            await reactions.recall(event.event_id)
        except Exception:
            log.exception("recalling the reaction failed", extra={"event_id": event.event_id})

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
        invocation, reply = await self.answering.answer(
            event, skills, run, decision, start.continuation, outcome
        )
        if isinstance(reply, ProviderFailed):
            return await self.endings.fail_honestly(run, reply, outcome)
        run = run.model_copy(
            update={
                "usage": reply.usage,
                "evidence": reply.evidence,
                "answered_by": reply.evidence.get("answered_by"),
                "degraded": reply.evidence.get("degraded"),
            }
        )
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
        if invocation is not None and self.answering.may_repair(outcome, reply):
            repaired = await self.answering.repair(run, invocation, skills, reply, outcome)
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
