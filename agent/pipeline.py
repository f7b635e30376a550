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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from agent.broker import Broker
from agent.card_stream import CardReplies, StreamHost
from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    EnrichedInvocation,
    Event,
    Evidence,
    Origin,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    ResponseDecision,
    Run,
    RunEnding,
    RunState,
    SilentReason,
    SkillSnapshot,
    Verdict,
    new_id,
)
from agent.gate_facts import load_facts
from agent.invocation import InvocationBuilder
from agent.memory import candidates_from
from agent.outcome import RunOutcome, touches_task
from agent.recovery import settled_from_records
from agent.tasks import TaskKeeper
from gates.action import ActionGate, Refusal
from gates.response import GATE_VERSION as RESPONSE_GATE_VERSION
from gates.response import ResponseGate
from skills.providers.base import Provider, ProviderFailed, ProviderReply
from skills.providers.media import host_reply
from skills.rundir import prepare_run_dir
from storage import Lease, Store
from storage.patience import is_transient, patiently

log = logging.getLogger("dta.pipeline")

# What the robot says when it could not produce an answer (never the provider's raw output).
HONEST_FAILURE = "抱歉，这次没能处理好你的请求，请稍后再试或换个说法。"
# Operator decisions that apply even to work accepted before they were made.
OPERATOR_STOPS = (SilentReason.PAUSED, SilentReason.DENIED, SilentReason.NOT_ALLOWED)
# Refusals of the answer itself: the provider produced something the gate will not send, so
# the person gets the same short honest reply as for an unreadable answer. (A repeat, a
# superseded run, another robot's event, an exhausted budget or an unreachable target
# get nothing more.)
ANSWER_REFUSALS = frozenset(
    {
        RefusalReason.SCHEMA_INVALID,
        RefusalReason.ACTION_NOT_ALLOWED,
        RefusalReason.CONTENT_TOO_LARGE,
        RefusalReason.SECRET_IN_CONTENT,
    }
)
# What it says when the answer takes a while (only then).
ACK_TEXT = "收到，我看一下，稍等。"


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
        run_dir: Path | None = None,
        ack_after_s: float = 3.0,
        owner: str = "local",
        lease_s: float = 60.0,
        reply_form: str = "text",
        cards: CardReplies | None = None,
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
        self.owner = owner
        self.lease_s = lease_s
        # How answers are delivered ("text", "markdown" or "card"); cards stream when the
        # provider can (agent/card_stream.py), else a reply is a one-frame card.
        self.reply_form = reply_form
        self.cards = cards

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
        except Exception as exc:
            if is_transient(exc):
                raise
            log.exception("run failed unexpectedly", extra={"event_id": event.event_id})
            return await self._abandon(event, exc)

    async def _abandon(self, event: Event, exc: Exception) -> Run | None:
        try:
            run = self.store.get_run(event.event_id)
            if run is None or run.state.is_finished:
                return run
            run = run.model_copy(
                update={
                    "state": RunState.FAILED,
                    "failure": f"internal_error: {type(exc).__name__}",
                    "updated_at": self.clock.now(),
                }
            )
            receipt = self.broker.receipt(
                run,
                ActionKind.SILENCE,
                ReceiptStatus.SILENT,
                reason=SilentReason.INTERNAL_ERROR.value,
                evidence=Evidence(error=type(exc).__name__),
            )
            await patiently(lambda: self.store.add_receipt(receipt, run))
            return run
        except Exception as failure:
            if is_transient(failure):
                raise  # the store is failing: the runtime drives the event again later
            log.exception("could not record the failure", extra={"event_id": event.event_id})
            return None

    async def _process(self, event: Event, generation: int | None) -> Run | None:
        opened = self._open(event, generation)
        if opened is None:
            return None
        skills, run, decision, again = opened
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
                return self._stay_silent(run, current)
        if decision.verdict is Verdict.SILENT:
            return self._stay_silent(run, decision)
        start = self.tasks.begin(run, event.text)
        if start.stop:
            ended = f"task {start.cancelled.task_id}" if start.cancelled else "nothing running"
            return self._end_silent(run, SilentReason.TASK_CANCELLED, f"stop: {ended}")
        invocation = await self.invocations.build(event, run, decision, start.continuation)
        if self.run_dir is not None:
            prepare_run_dir(self.run_dir / run.run_id, invocation, skills, run.skill_snapshot)
        outcome = RunOutcome()
        hosted = host_reply(invocation)  # a refused file or an unreadable type: no provider
        try:
            if hosted is not None:
                reply = ProviderReply([hosted], evidence={"answered_by": "host"})
            else:
                reply = await self._respond(run, invocation, skills, outcome)
        except ProviderFailed as exc:
            log.warning("provider failed", extra={"run_id": run.run_id, "reason": exc.reason})
            return await self._fail_honestly(run, exc, outcome)
        except Exception as exc:  # a provider bug must not take the daemon down
            log.exception("provider crashed", extra={"run_id": run.run_id})
            crash = ProviderFailed("provider_error", type(exc).__name__)
            return await self._fail_honestly(run, crash, outcome)
        run = run.model_copy(update={"usage": reply.usage, "evidence": reply.evidence})
        if not reply.requests and outcome.terminal is None:
            if outcome.acked:
                empty = ProviderFailed("no_answer", "nothing after the ack")
                return await self._fail_honestly(run, empty, outcome)
            return self._end_silent(run, SilentReason.PROVIDER_SILENCE, "provider returned nothing")
        # Task work settles the run only after the task has moved: a crash in between
        # leaves the run ``working``, and recovery moves both from the records.
        task_work = start.continuation is not None or any(map(touches_task, reply.requests))
        await self._act(run, reply.requests, outcome, settle_last=not task_work)
        if outcome.terminal is None and outcome.refused_answer is not None:
            refused = ProviderFailed("refused_by_gate", outcome.refused_answer)
            return await self._fail_honestly(run, refused, outcome)
        self.tasks.settle(
            run, start.continuation, outcome.terminal_request, outcome.terminal_receipt
        )
        if outcome.settled is not None:
            return outcome.settled
        run = run.model_copy(
            update={"state": outcome.final_state(), "updated_at": self.clock.now()}
        )
        self.store.save_run(run)
        return run

    async def _respond(
        self,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        outcome: RunOutcome,
    ) -> ProviderReply:
        """Ask the provider; if it takes longer than ``ack_after_s``, ack first.

        The ack ("seen, working on it") goes through the action gate like anything else,
        so it counts against the run's budget and the write budgets; a fast answer never
        causes one. Real time on purpose: it is the person who waits. In card mode, with a
        provider that streams, the card path does the same while the card fills in.
        """
        if self.cards is not None and self.cards.streams(self.provider):
            ack = partial(self._ack, run, outcome)
            host = StreamHost(self.provider, self._act, ack, self._ending, self.ack_after_s)
            return await self.cards.respond(host, run, invocation, skills, outcome)
        answer = asyncio.ensure_future(self.provider.respond(invocation, skills))
        try:
            try:
                return await asyncio.wait_for(asyncio.shield(answer), self.ack_after_s)
            except TimeoutError:
                await self._ack(run, outcome)
                return await answer
        finally:
            if not answer.done():  # we stopped waiting (shutdown, crash): so does the provider
                answer.cancel()

    async def _ack(self, run: Run, outcome: RunOutcome) -> None:
        if ActionKind.ACK in run.allowed_actions:
            ack = {"kind": "ack", "text": ACK_TEXT}
            await self._act(run, [ack], outcome, settle_last=False)

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

    def _stay_silent(self, run: Run, decision: ResponseDecision) -> Run:
        """A silent verdict: a silent receipt and zero outbound calls."""
        run = run.model_copy(update={"state": RunState.SILENT, "updated_at": self.clock.now()})
        receipt = self.broker.receipt(
            run,
            ActionKind.SILENCE,
            ReceiptStatus.SILENT,
            reason=decision.reason.value,
            gate_version=RESPONSE_GATE_VERSION,
        )
        self.store.add_silence(run, decision, receipt)
        return run

    async def _act(
        self,
        run: Run,
        requests: list[Any],
        outcome: RunOutcome,
        settle_last: bool = True,
        answer: bool = True,
    ) -> RunOutcome:
        """Each request through the action gate, then the broker. ``answer``: the
        provider's (delivered in ``reply_form``); the host's own short words go as text."""
        tally = outcome.tally
        for index, raw in enumerate(requests):
            verdict = self.action_gate.decide(
                raw,
                run,
                tally,
                load_facts(
                    self.store,
                    run,
                    self.clock.now(),
                    self.broker.transport.webhook_problem(run.origin),
                ),
                form=self.reply_form if answer else "text",
            )
            if isinstance(verdict, Refusal):
                receipt = self._refuse(run, verdict)
                outcome.receipts.append(receipt)
                if verdict.reason is RefusalReason.STALE_GENERATION:
                    outcome.stale = True
                if verdict.reason in ANSWER_REFUSALS and (verdict.kind is None or verdict.terminal):
                    outcome.refused_answer = f"{verdict.reason.value}: {verdict.detail}"[:500]
                if (
                    verdict.reason is RefusalReason.DUPLICATE_INTENT
                    and verdict.first_receipt is not None
                    and verdict.kind is not None
                    and verdict.kind.is_terminal
                ):
                    # The crashed execution already did this: its receipt is the answer.
                    outcome.terminal = verdict.first_receipt.status
                    outcome.terminal_kind = verdict.kind
                continue
            kind = verdict.request.kind
            if verdict.request.memory_candidates:
                proposals = candidates_from(run, verdict.request, self.clock.now())
                self.store.propose_memory(proposals)
            status: ReceiptStatus | None = None
            receipt = None
            for chunk, intent in enumerate(verdict.intents, start=1):
                last = settle_last and index == len(requests) - 1 and chunk == len(verdict.intents)
                ending = self._ending(outcome, kind) if last else None
                receipt = await self.broker.execute(
                    run, intent, silence_detail=verdict.request.reason or "", ending=ending
                )
                if ending is not None and receipt.status is not ReceiptStatus.REFUSED:
                    outcome.settled = ending.apply(run, receipt)  # the broker saved it so
                outcome.receipts.append(receipt)
                status = receipt.status
                if not status.delivered and status is not ReceiptStatus.SILENT:
                    break  # do not send the rest of a long reply after a failed piece
            if kind is ActionKind.ACK:
                tally.acks += 1
                outcome.acked = outcome.acked or bool(status and status.delivered)
            else:
                tally.terminal = kind
                outcome.terminal, outcome.terminal_kind = status, kind
                outcome.terminal_request, outcome.terminal_receipt = verdict.request, receipt
        return outcome

    @staticmethod
    def _ending(outcome: RunOutcome, kind: ActionKind) -> RunEnding:
        """How the run ends if this request's receipt is its last word (saved with it)."""
        if outcome.ends_as is not None:
            return RunEnding(outcome.ends_as, outcome.ends_as)
        if kind is ActionKind.ACK:  # after the terminal action: that one decided
            state = outcome.final_state()
            return RunEnding(state, state)
        if kind is ActionKind.SILENCE:
            return RunEnding(RunState.SILENT, RunState.SILENT)
        spoken = RunState.WAITING if kind is ActionKind.ASK else RunState.DONE
        return RunEnding(spoken, RunState.INTERRUPTED if outcome.stale else RunState.FAILED)

    def _refuse(self, run: Run, refusal: Refusal) -> Receipt:
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

    async def _fail_honestly(self, run: Run, failure: ProviderFailed, outcome: RunOutcome) -> Run:
        """No usable answer: say so briefly where replying is allowed, else stay silent.

        The short reply goes through the action gate like any other; the run ends
        ``failed`` either way, with the provider's reason and evidence kept on the run.
        """
        run = run.model_copy(
            update={
                "failure": f"{failure.reason}: {failure.detail}"[:500],
                "evidence": failure.evidence,
            }
        )
        # After an ack ("seen, working on it") silence would leave a promise hanging.
        say_sorry = failure.reply_on_failure or outcome.acked
        if not say_sorry or ActionKind.REPLY not in run.allowed_actions:
            return self._end_silent(run, SilentReason.PROVIDER_FAILED, run.failure or "")
        outcome.ends_as = RunState.FAILED  # saved with the reply's receipt, in one go
        await self._act(run, [{"kind": "reply", "text": HONEST_FAILURE}], outcome, answer=False)
        if outcome.settled is not None:
            return outcome.settled
        run = run.model_copy(update={"state": RunState.FAILED, "updated_at": self.clock.now()})
        self.store.save_run(run)
        return run

    def _end_silent(self, run: Run, reason: SilentReason, detail: str) -> Run:
        state = RunState.FAILED if reason is SilentReason.PROVIDER_FAILED else RunState.SILENT
        run = run.model_copy(update={"state": state, "updated_at": self.clock.now()})
        receipt = self.broker.receipt(
            run,
            ActionKind.SILENCE,
            ReceiptStatus.SILENT,
            reason=reason.value,
            evidence=Evidence(detail=detail),
        )
        self.store.add_receipt(receipt, run)
        return run

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
