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
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

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
from agent.run.acting import Acting
from agent.run.answering import ACK_TEXT, Answering
from agent.run.endings import HONEST_FAILURE, Endings
from agent.run.form_replies import FormReplies
from agent.run.outcome import ActLedger, Grounds, RunOutcome, touches_task
from agent.run.own_events import Hands, OwnEvents
from agent.run.pieces import send_owed
from agent.run.recovery import settled_from_records
from agent.run.streaming import AnswerStream
from agent.run.tasks import TaskKeeper, TaskStart
from agent.run.together import answered_by, supplies
from agent.run.ways import ActAs
from gates.response import ResponseGate
from skills.language import is_english
from skills.loader import allowed_tools
from skills.providers.base import ProviderFailed, ProviderReply
from storage import Lease, LeaseLost, Store
from storage.patience import is_transient

log = logging.getLogger("dta.pipeline")

__all__ = ["ACK_TEXT", "HONEST_FAILURE", "OPERATOR_STOPS", "LeaseTerms", "Pipeline", "SkillSource"]


# Operator decisions that apply even to work accepted before they were made.
OPERATOR_STOPS = (SilentReason.PAUSED, SilentReason.DENIED, SilentReason.NOT_ALLOWED)


class SkillSource(Protocol):
    def for_event(
        self, msgtype: str, scene: str, provider: str
    ) -> tuple[Sequence[Any], SkillSnapshot, list[ActionKind]]: ...


@dataclass(frozen=True)
class LeaseTerms:
    """Whom this runtime claims the runs it opens for, and for how long at a time."""

    owner: str
    lease_s: float


class Pipeline:
    """Which way a run goes. Its steps are built in ``agent/components/`` and handed in:
    the acting step and the endings (the approval settlement and the own events' rows act
    and end runs with the same two), the answering step, the own events' table."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        response_gate: ResponseGate,
        skills: SkillSource,
        answering: Answering,
        acting: Acting,
        endings: Endings,
        own: OwnEvents,
        tasks: TaskKeeper,
        lease: LeaseTerms,
        stream: AnswerStream | None,
        forms: FormReplies | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.response_gate = response_gate
        self.skills = skills
        self.tasks = tasks
        self.terms = lease
        # Requests to receipts, and the endings without an answer: one place each, shared
        # with the card stream (agent/run/acting.py, agent/run/endings.py).
        self.acting = acting
        self.endings = endings
        self.broker = acting.broker
        # The invocation, the provider's answer (streamed where ``stream`` can), the ack
        # and the repair round (agent/run/answering.py).
        self.answering = answering
        self.provider = answering.provider
        self.invocations = answering.invocations
        # What streams answers (AI cards, agent/cards/stream.py; None out of card mode):
        # what a stopped execution left open on it is settled before the event runs again.
        self.stream = stream
        # The runtime's own events (approvals, due items, operator sends, 「取消提醒」…): one
        # routing table (agent/run/own_events.py), asked before the answering path.
        self.own = own
        self.hands = Hands(acting, endings)
        # A form asked as a numbered question (no card template): the asker's reply is read
        # into its fields before the task resumes (agent/run/form_replies.py).
        self.forms = forms

    def lease(self, now: float) -> Lease:
        """The claim this runtime puts on a run it opens (renewed while it works)."""
        return Lease(self.terms.owner, now + self.terms.lease_s, now)

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
                # what a carrier owes once the run has ended (its reaction comes off)
                await self.acting.carriers.finished(event.event_id)
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

    async def _process(self, event: Event, generation: int | None) -> Run | None:
        """The run's one exit: settled early (already finished, settled from the records,
        stopped, silent) or worked to its end; None while another owner holds it."""
        if self._waits_for_resume(event):
            return None  # left in the store: the first pass after the pause runs it
        opened = self._open(event, generation)
        if opened is None:
            run = None
        else:
            skills, run, decision, again = opened
            early = await self._settle_early(event, run, decision, again)
            run = early if early is not None else await self._work(event, skills, run, decision)
        return run

    def _waits_for_resume(self, event: Event) -> bool:
        """A decision the asker made while the robot is paused (a click), or an act's
        read-back they are owed word of, is carried out once the operator resumes it —
        never dropped as a paused message would be."""
        return self.response_gate.policy.paused and self.own.held(event)

    async def _settle_early(
        self, event: Event, run: Run, decision: ResponseDecision, again: bool
    ) -> Run | None:
        """The run's end before any work, or None when it is engaged and still to do."""
        if run.state.is_finished:
            return run
        if again:
            # An earlier execution stopped (a crash, or a store that failed under it):
            # what it left open is uncertain or provably unsent before anything else.
            if self.stream is not None:  # a card it left open ends cut off, never re-created
                await self.stream.recover(event.event_id)
            self.broker.reconcile_interrupted(event.event_id)
            self.store.actions.drop_unsent_intents(event.event_id)
            # the pieces of an answer a crash cut off: sent now, once each
            await send_owed(
                self.store,
                self.broker,
                run,
                lambda line: self.acting.follow_up(run, line),
                english=is_english(event.text),
            )
            # an approval prompt a crash cut may have reached nobody: its code, in a line
            if self.acting.acts is not None:
                for line in self.acting.acts.prompts_in_doubt(run):
                    await self.acting.follow_up(run, line)
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
        now = self.clock.now()
        words = answered_by(event, self.invocations, lambda e: self.response_gate.engages(e, now))
        if words is not None:  # a file sent with 「帮我看下这个文件」: that run answers both
            detail = f"its media are answered by the run of {words.event_id}"
            return self.endings.end_silent(run, SilentReason.ANSWERED_TOGETHER, detail)
        return None

    async def _work(
        self, event: Event, skills: Sequence[Any], run: Run, decision: ResponseDecision
    ) -> Run:
        """The engaged path: the task, the provider's answer, its actions, the run's end."""
        own = await self._own_or_form_reply(event, run)
        if own is not None:
            return own
        start = self._task_start(event, run)
        if start.stop:
            ended = f"task {start.cancelled.task_id}" if start.cancelled else "nothing running"
            return self.endings.end_silent(run, SilentReason.TASK_CANCELLED, f"stop: {ended}")
        outcome = RunOutcome(
            acts=ActLedger(people=_named_here(event)),
            grounds=Grounds(question=event.text),
            english=is_english(event.text),
        )
        invocation, reply = await self.answering.answer(
            event, skills, run, decision, start.continuation, outcome
        )
        if isinstance(reply, ProviderFailed):
            return await self.endings.fail_honestly(run, reply, outcome)
        run = _answered(run, reply)
        if not reply.requests and outcome.terminal is None:
            if outcome.acked:
                empty = ProviderFailed("no_answer", "nothing after the ack")
                return await self.endings.fail_honestly(run, empty, outcome)
            return self.endings.end_silent(
                run, SilentReason.PROVIDER_SILENCE, "provider returned nothing"
            )
        reviewed = self.own.review(event, run, reply.requests, outcome, self.hands)
        if reviewed is not None:  # the row's look at the answer stopped it (nothing new)
            return reviewed
        # Task work settles the run only after the task has moved: a crash in between
        # leaves the run ``working``, and recovery moves both from the records.
        task_work = start.continuation is not None or any(map(touches_task, reply.requests))
        # the host's own answer (a file it refused, 「忘掉…」) says what the host did: its
        # words are true by construction, not a provider's claims
        hosts = reply.evidence.get("answered_by") == "host"
        await self.acting.act(run, reply.requests, outcome, _answer_way(task_work, hosts))
        if invocation is not None and self.answering.may_repair(outcome, reply, invocation):
            repaired = await self.answering.repair(run, invocation, skills, reply, outcome)
            if isinstance(repaired, ProviderFailed):
                return await self.endings.fail_honestly(run, repaired, outcome)
            run, reply = repaired
            task_work = task_work or any(map(touches_task, reply.requests))
            await self.acting.act(run, reply.requests, outcome, _answer_way(task_work))
        if outcome.terminal is None and outcome.refused_answer is not None:
            refused = ProviderFailed("refused_by_gate", outcome.refused_answer)
            return await self.endings.fail_honestly(run, refused, outcome)
        self.tasks.settle(
            run, start.continuation, outcome.terminal_request, outcome.terminal_receipt
        )
        return self.endings.finish(run, outcome, outcome.final_state())

    async def _own_or_form_reply(self, event: Event, run: Run) -> Run | None:
        """The run's end when the event is the runtime's own, or the asker's reply to a
        numbered form with a field missing or wrong (said in one line; the form waits on);
        None: on to the answering path."""
        own = await self.own.handle(event, run, self.hands)
        if own is not None or self.forms is None:
            return own
        problem = self.forms.take(event)
        return None if problem is None else await self.hands.say(run, problem)

    def _task_start(self, event: Event, run: Run) -> TaskStart:
        """Where the run stands with the thread's task: resumed, stopped or none."""
        # a job's slot, answered like its owner's question, is no word of the person's: it
        # neither resumes nor stops their task (a form's submit does resume its own)
        if event.scheduled is not None and event.scheduled.kind == "job":
            return TaskStart()
        # (a look at the burst's media only when a waiting task needs it)
        brings = partial(supplies, event, self.invocations)
        return self.tasks.begin(run, event.text, supplies=self._answers_form(event) or brings)

    def _answers_form(self, event: Event) -> bool:
        """The event carries a form's answer (its card's submit, or the asker's numbered
        reply): it answers the waiting task, whatever its words."""
        return self.store.forms.answered_by(event.event_id) is not None

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
            generation = self.store.events.event_generation(event.event_id)
        decision = self.response_gate.decide(event, now)
        fresh = self._new_run(event, snapshot, allowed, generation, now)
        narrowed = allowed_tools(skills)
        if narrowed is not None:
            fresh = fresh.model_copy(update={"tools": sorted(narrowed)})
        run = self.store.work.open_run(fresh, decision, self.lease(now))
        if run is None:
            log.info("run held by another owner", extra={"event_id": event.event_id})
            return None
        again = run.run_id != fresh.run_id
        if again:
            # The event already had a run: its first recorded verdict stands.
            recorded = self.store.events.get_decision(event.event_id)
            if recorded is None:
                self.store.events.add_decision(run.run_id, decision)
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


def _answered(run: Run, reply: ProviderReply) -> Run:
    """The run with what the provider's reply says of itself: tokens, evidence, who answered."""
    return run.model_copy(
        update={
            "usage": reply.usage,
            "evidence": reply.evidence,
            "answered_by": reply.evidence.get("answered_by"),
            "degraded": reply.evidence.get("degraded"),
        }
    )


def _answer_way(task_work: bool, by_host: bool = False) -> ActAs:
    """The answer's way: the host's or the provider's; with task work, its task moves
    first and settles the run."""
    way = ActAs.HOST_ANSWER if by_host else ActAs.ANSWER
    return way.before_its_task() if task_work else way


def _named_here(event: Event) -> set[str]:
    """Whom an act in this run may name before any look-up: the asker and those @-ed."""
    return {event.actor.user_id, *event.at_users}
