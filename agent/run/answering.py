"""Asking the provider for a run's answer: the invocation it is given, the ack when the
answer takes a while, and one repair round for an answer refused as untrue or too long.

The pipeline (``agent/run/pipeline.py``) decides whether a run is answered; this decides
how the answer is asked for. A provider that fails or crashes is a value here
(``ProviderFailed``), never an exception that takes the daemon down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    EarlierAct,
    EnrichedInvocation,
    Event,
    Repair,
    ResponseDecision,
    Run,
    TaskCheckpoint,
)
from agent.run.acting import Acting
from agent.run.forgetting import Forgetting
from agent.run.invocation import InvocationBuilder
from agent.run.metering import ModelMeter, limited
from agent.run.outcome import RunOutcome
from agent.run.refusals import REPAIRABLE
from agent.run.streaming import AnswerStream, StreamHost
from agent.run.ways import ActAs
from agent.tools.registry import ToolBox
from skills.media import host_reply
from skills.providers.base import Provider, ProviderFailed, ProviderReply
from skills.providers.model_media import text_files
from skills.rundir import prepare_run_dir
from storage import LeaseLost

log = logging.getLogger("dta.pipeline")

# What it says when the answer takes a while (only then).
ACK_TEXT = "收到，我看一下，稍等。"
# The ack is due ``ack_after_s`` after the message arrived, but never sooner than this
# (or ``ack_after_s``, if less) after the run starts: a run that starts late (recovered
# after a restart, or behind the same person's earlier message) and answers at once
# needs no "稍等" just before its answer.
ACK_FLOOR_S = 0.5
NEVER_ACK_S = 10 * 365 * 86_400.0  # a timer that never fires in a run's life

# A model that cannot answer now: the fallback answers instead (invalid output is not
# among them: it gets the repair round).
DOWN_REASONS = frozenset({"unavailable", "timeout", "rejected"})


def _down(reply: ProviderReply | ProviderFailed) -> bool:
    return isinstance(reply, ProviderFailed) and reply.reason in DOWN_REASONS


def _degraded(
    reply: ProviderReply | ProviderFailed, answered_by: str, why: str, detail: str
) -> ProviderReply | ProviderFailed:
    """The fallback's reply, saying it is limited, with why on its evidence."""
    if isinstance(reply, ProviderFailed):
        return reply
    evidence = {**reply.evidence, "answered_by": answered_by, "degraded": why, "limit": detail}
    return ProviderReply(limited(reply.requests, why), reply.usage, evidence)


class Answering:
    def __init__(
        self,
        *,
        clock: Clock,
        provider: Provider,
        invocations: InvocationBuilder,
        acting: Acting,
        cards: AnswerStream | None,
        ack_after_s: float,
        provider_slots: int,
        run_dir: Path | None,
        fallback: Provider | None,
        meter: ModelMeter | None,
        forgetting: Forgetting | None = None,
        tools: ToolBox | None = None,
        earlier: Callable[[Run], Awaitable[list[EarlierAct]]] | None = None,
        ack_text: str | None = ACK_TEXT,
    ) -> None:
        self.clock = clock
        # What the ack says (a reaction's name with ``ack_style = "reaction"``); None: the
        # run never acks (``ack_style = "none"``).
        self.ack_text = ack_text
        self.provider = provider
        # Answers when the model is over its budget or down (agent/run/metering.py).
        self.fallback = fallback
        self.meter = meter
        self.forgetting = forgetting  # 「忘掉…」, answered by the host for every provider
        self.tools = tools  # the workspace tools a model may call (None: none enabled)
        # the person's recent acts and what became of them (agent/acts/runner.py), so a
        # model asked again — after a crash too — finds what it already did
        self.earlier = earlier
        self.invocations = invocations
        self.acting = acting
        self.cards = cards
        self.ack_after_s = ack_after_s
        # Runs at their provider at once (``max_concurrent_runs``). The rest of a run is
        # not held back by it, so every run's ack timer runs from its message's arrival.
        self.provider_slots = asyncio.Semaphore(provider_slots)
        self.run_dir = run_dir

    async def answer(
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
        if self.earlier is not None:
            acts = await self.earlier(run)
            if acts:
                invocation = invocation.model_copy(update={"acts": acts})
        outcome.grounds.sources = _sources(invocation)
        outcome.grounds.knowledge_used = bool(invocation.knowledge and invocation.knowledge.items)
        # a document's text answers like knowledge: its figures are the ones an answer may give
        if any(document.parts for document in invocation.documents):
            outcome.grounds.knowledge_used = True
        if self.run_dir is not None:
            prepare_run_dir(self.run_dir / run.run_id, invocation, skills, run.skill_snapshot)
        hosted = host_reply(invocation)  # a refused file or an unreadable type: no provider
        if hosted is None and self.forgetting is not None:
            hosted = self.forgetting.answer(invocation)
        if hosted is not None:
            return None, ProviderReply([hosted], evidence={"answered_by": "host"})
        metered = self.meter is not None and getattr(self.provider, "metered", False)
        over = self.meter.over_limit(event) if self.meter is not None and metered else None
        if over is not None and self.fallback is not None:
            log.warning("model budget reached; the fallback answers", extra={"limit": over})
            reply = await self._asked(run, invocation, skills, outcome, self.fallback)
            reply = _degraded(reply, self.fallback.name, "model_budget", over)
        else:
            reply = await self._asked(run, invocation, skills, outcome)
            # after an act the fallback knows nothing of, plain words tell what was done
            if metered and _down(reply) and self.fallback is not None and not outcome.acts.acted:
                assert isinstance(reply, ProviderFailed)
                failure = f"{reply.reason}: {reply.detail}"
                # A wrong key or model will not mend itself: said loudly, every time.
                level = log.error if reply.reason == "rejected" else log.warning
                level("model unavailable; the fallback answers", extra={"failure": failure})
                fallen = await self._asked(run, invocation, skills, outcome, self.fallback)
                reply = _degraded(fallen, self.fallback.name, "model_unavailable", failure)
        if isinstance(reply, ProviderReply):
            self._meter(run, event, reply.usage, reply.evidence.get("degraded"))
            if invocation.knowledge and invocation.knowledge.items:
                # what the answer was given to answer from, kept with its run for review
                # (dta feedback export)
                refs = [item.ref for item in invocation.knowledge.items]
                reply.evidence = {**reply.evidence, "sources": refs}
        else:
            self._meter(run, event, {}, None)
        return invocation, reply

    def _meter(self, run: Run, event: Event, usage: dict[str, Any], degraded: Any) -> None:
        """Keep what the run's model calls cost so far (the budgets read it)."""
        if self.meter is not None and getattr(self.provider, "metered", False):
            model = getattr(self.provider, "model_name", self.provider.name)
            self.meter.record(run, event, model, usage, degraded)

    def may_repair(
        self, outcome: RunOutcome, reply: ProviderReply, invocation: EnrichedInvocation
    ) -> bool:
        """One repair round per run: for an answer refused as untrue (a claim, a promise),
        when the provider has not used its round on unreadable output already. A streamed
        card has shown its answer as it came, so it ends with the honest words instead (a
        job's slot is never streamed: it gets its round)."""
        if outcome.terminal is not None or outcome.refused_reason not in REPAIRABLE:
            return False
        if self._streams(self.provider) and invocation.event.scheduled is None:
            return False
        return not reply.evidence.get("repaired")

    def _streams(self, provider: Provider) -> bool:
        """Does the answer stream into a card? Not when the model may call tools: its
        answer comes after them (a one-frame card), and the tool loop is the plain one."""
        if self.cards is None or not self.cards.streams(provider):
            return False
        return not (self.tools is not None and getattr(provider, "uses_tools", False))

    async def repair(
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
        run = run.model_copy(update={"usage": usage, "evidence": evidence})
        self._meter(run, invocation.event, usage, None)  # both rounds' tokens
        return run, reply

    async def _asked(
        self,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        outcome: RunOutcome,
        provider: Provider | None = None,
    ) -> ProviderReply | ProviderFailed:
        """The reply of ``provider`` (the configured one unless given), or why there is
        none: a provider that fails or crashes is a value here, never an exception that
        takes the daemon down. The ack is due ``ack_after_s`` after the message arrived (a
        repair round's too)."""
        waited = self.clock.now() - invocation.event.received_at
        ack_in = max(self.ack_after_s - waited, min(ACK_FLOOR_S, self.ack_after_s))
        if invocation.event.scheduled is not None:  # a job's run: nobody is waiting on it
            ack_in = NEVER_ACK_S
        try:
            return await self._respond(
                run, invocation, skills, outcome, ack_in, provider or self.provider
            )
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
        provider: Provider,
    ) -> ProviderReply:
        """Ask the provider (once a place is free); if no answer has come ``ack_in``
        seconds from now (``ack_after_s`` counted from the message's arrival), ack first.

        The ack ("seen, working on it") goes through the action gate like anything else,
        so it counts against the run's budget and the write budgets; a fast answer never
        causes one. Real time on purpose: it is the person who waits. In card mode, with a
        provider that streams, the card path does the same while the card fills in.
        """
        # a job's slot is looked at whole before it goes (nothing_new): never streamed
        if self._streams(provider) and invocation.event.scheduled is None:
            assert self.cards is not None
            ack = partial(self._ack, run, outcome)
            acting = self.acting
            host = StreamHost(
                provider,
                acting.act,
                ack,
                acting.ending,
                ack_in,
                self.provider_slots,
                acting.accept,
                acting.send_after,
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
                if self.tools is not None and getattr(provider, "uses_tools", False):
                    act = partial(self._tool_act, run, outcome)
                    runner = self.tools.for_run(invocation.event, outcome, act, only=run.tools)
                    reply = await provider.respond(invocation, skills, tools=runner)
                else:
                    reply = await provider.respond(invocation, skills)
        except BaseException:
            if acking is not None:
                acking.cancel()
            raise
        finally:
            timer.cancel()
        if acking is not None:  # the ack goes out (or fails) before the answer is acted on
            await acking
        return reply

    async def _tool_act(self, run: Run, outcome: RunOutcome, request: dict[str, Any]) -> None:
        """A model's write tool call, as an act through the acting step (never the run's
        last word: the model still answers after it)."""
        await self.acting.act(run, [request], outcome, ActAs.TOOL_CALL)

    async def _ack(self, run: Run, outcome: RunOutcome) -> None:
        if self.ack_text is not None and ActionKind.ACK in run.allowed_actions:
            ack = {"kind": "ack", "text": self.ack_text}
            await self.acting.act(run, [ack], outcome, ActAs.ACK)


# as much of a text file as may be quoted from it (what a model is shown is cut shorter)
SOURCE_FILE_CHARS = 20_000


def _sources(invocation: EnrichedInvocation) -> tuple[str, ...]:
    """What the run was given to read, whose words an answer may quote as theirs: the
    knowledge and memory items, the text files sent with the message, a quoted message (a
    file that says 「我会在下午提交」 is the file's, not the robot's promise), the text of
    the documents sent."""
    sources = [item.content for item in invocation.knowledge.items] if invocation.knowledge else []
    sources += [file["text"] for file in text_files(invocation, SOURCE_FILE_CHARS)]
    if invocation.quote is not None and invocation.quote.text:
        sources.append(invocation.quote.text)
    # the PDF, Word and Excel files' text, as read (agent/run/documents.py)
    sources += [part.text for document in invocation.documents for part in document.parts]
    return tuple(sources)
