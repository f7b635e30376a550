"""How a run ends when it does not end with an answer: silence, an honest failure, a crash.

Each ending leaves exactly one last receipt, saved together with the run's final state, so
a run never stays ``working`` and the person is never left with a promise (an ack) and
nothing after it.
"""

from __future__ import annotations

import logging

from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    Event,
    Evidence,
    ReceiptStatus,
    RefusalReason,
    ResponseDecision,
    Run,
    RunState,
    SilentReason,
)
from agent.run.acting import Acting
from agent.run.broker import Broker
from agent.run.outcome import RunOutcome
from agent.run.ways import ActAs
from gates.response import GATE_VERSION as RESPONSE_GATE_VERSION
from skills.providers.base import ProviderFailed
from storage import Store
from storage.patience import is_transient, patiently

log = logging.getLogger("dta.pipeline")

# What the robot says when it could not produce an answer (never the provider's raw output):
# the generic words, and plainer ones where the cause is known.
HONEST_FAILURE = "抱歉，这次没能处理好你的请求，请稍后再试或换个说法。"
UNAVAILABLE_SAY = "抱歉，助手现在连不上，暂时答不了，请稍后再试。"
TOO_SLOW_SAY = "抱歉，这次想得太久没能答上来，请再问一次，或者把问题说得简单一些。"
TOO_LONG_SAY = "抱歉，这个回答太长发不出来，请把问题问得具体一些，我分开回答。"
OTHERS_NOT_DONE = (
    "除此之外的事我没有办成，刚才也没有这样做。需要的话请再说一次具体要办什么，或者直接联系对方。"
)
# What a card ends with when its answer may not be shown (a leaking frame, an invalid answer).
REFUSAL_TEXT = "抱歉，这个回答不能发出，已经停止。请换个说法再问一次。"
UNSAFE_SAY = REFUSAL_TEXT  # what a card that stopped for the same reason ends with
# A provider's failure reasons (skills/providers/) and the gate's refusals of an answer,
# by what the person is told.
_SAID_FOR = {
    "unavailable": UNAVAILABLE_SAY,
    "rejected": UNAVAILABLE_SAY,
    "exit_status": UNAVAILABLE_SAY,
    "timeout": TOO_SLOW_SAY,
    "content_too_large": TOO_LONG_SAY,
    "secret_in_content": UNSAFE_SAY,
    "at_all": UNSAFE_SAY,
}


def failure_words(failure: ProviderFailed, outcome: RunOutcome) -> str:
    """What the person is told when the run has no answer of its own: what its acts did
    (each as its receipt says: an act carried out is never left untold), then a refusal's
    own plain words (reminders switched off, a claim nothing backs), else the words for its
    cause."""
    if outcome.acts.acted and outcome.refused_reason is RefusalReason.UNBACKED_CLAIM:
        said = OTHERS_NOT_DONE  # beside the acts just told, "this was not done" is ambiguous
    elif outcome.refused_say:
        said = outcome.refused_say
    elif failure.reason == "refused_by_gate" and outcome.refused_reason is not None:
        said = _SAID_FOR.get(outcome.refused_reason.value, HONEST_FAILURE)
    else:
        said = _SAID_FOR.get(failure.reason, HONEST_FAILURE)
    return "\n".join([*outcome.acts.acted, said])


class Endings:
    """The ways a run ends without an answer of its own; the pipeline owns one."""

    def __init__(self, *, store: Store, clock: Clock, broker: Broker, acting: Acting) -> None:
        self.store = store
        self.clock = clock
        self.broker = broker
        self.acting = acting

    def stay_silent(self, run: Run, decision: ResponseDecision) -> Run:
        """A silent verdict: a silent receipt and zero outbound calls."""
        run = run.model_copy(update={"state": RunState.SILENT, "updated_at": self.clock.now()})
        receipt = self.broker.receipt(
            run,
            ActionKind.SILENCE,
            ReceiptStatus.SILENT,
            reason=decision.reason.value,
            gate_version=RESPONSE_GATE_VERSION,
        )
        self.store.events.add_silence(run, decision, receipt)
        return run

    def end_silent(self, run: Run, reason: SilentReason, detail: str) -> Run:
        """Engaged, yet nothing to say: a silent receipt with why (``failed`` if the
        provider failed)."""
        state = RunState.FAILED if reason is SilentReason.PROVIDER_FAILED else RunState.SILENT
        run = run.model_copy(update={"state": state, "updated_at": self.clock.now()})
        receipt = self.broker.receipt(
            run,
            ActionKind.SILENCE,
            ReceiptStatus.SILENT,
            reason=reason.value,
            evidence=Evidence(detail=detail),
        )
        self.store.actions.add_receipt(receipt, run)
        return run

    async def fail_honestly(self, run: Run, failure: ProviderFailed, outcome: RunOutcome) -> Run:
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
            return self.end_silent(run, SilentReason.PROVIDER_FAILED, run.failure or "")
        outcome.ends_as = RunState.FAILED  # saved with the reply's receipt, in one go
        reply = [{"kind": "reply", "text": failure_words(failure, outcome)}]
        await self.acting.act(run, reply, outcome, ActAs.HONEST_FAILURE)
        return self.finish(run, outcome, RunState.FAILED)

    def finish(self, run: Run, outcome: RunOutcome, state: RunState) -> Run:
        """The run as its last receipt settled it, or else saved now in ``state``."""
        if outcome.settled is not None:
            return outcome.settled
        run = run.model_copy(update={"state": state, "updated_at": self.clock.now()})
        self.store.events.save_run(run)
        return run

    async def abandon(self, event: Event, exc: Exception) -> Run | None:
        """An unexpected error: the run ends ``failed`` with an ``internal_error`` receipt;
        None if even that cannot be recorded (a transient store failure is raised)."""
        try:
            run = self.store.events.get_run(event.event_id)
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
            await patiently(lambda: self.store.actions.add_receipt(receipt, run))
            return run
        except Exception as failure:
            if is_transient(failure):
                raise  # the store is failing: the runtime drives the event again later
            log.exception("could not record the failure", extra={"event_id": event.event_id})
            return None
