"""The working signal as a reaction (``ack_style = "reaction"``): the run's ack, on the
channel ``reaction``, put on the person's message and recalled when the run ends.

The ack passes the action gate like any ack (one per run, the write budgets, silence never
gets one); its intent and attempt are stored before the call, its receipt is ``accepted`` or
``failed`` with ``reaction_failed`` — a failed reaction never delays or blocks the answer.
When the run ends, however it ends, ``recall`` takes it off again: once (the recall is the
intent's second attempt, so a re-driven run or another replica sees it was done).
"""

from __future__ import annotations

import logging

from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    Attempt,
    AttemptOutcome,
    Channel,
    Evidence,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    SignalReason,
    new_id,
)
from agent.dingtalk.reactions import ReactionAnswer, ReactionAPI
from agent.run.broker import Broker
from storage import Store

log = logging.getLogger("dta.reactions")

RECALL = "recall"  # the request digest of a recall attempt


class ReactionSignal:
    def __init__(self, store: Store, clock: Clock, broker: Broker, api: ReactionAPI) -> None:
        self.store = store
        self.clock = clock
        self.broker = broker
        self.api = api

    def _attempt(self, intent: ActionIntent, digest: str) -> Attempt:
        return Attempt(
            attempt_id=new_id("att"),
            intent_id=intent.intent_id,
            channel=Channel.REACTION,
            started_at=self.clock.now(),
            request_digest=digest,
        )

    @staticmethod
    def _close(attempt: Attempt, answer: ReactionAnswer, now: float) -> Evidence:
        evidence = Evidence(
            http_status=answer.http_status,
            detail=answer.detail,
            channels_tried=[Channel.REACTION],
        )
        attempt.outcome = AttemptOutcome.ACCEPTED if answer.ok else AttemptOutcome.FAILED
        attempt.finished_at, attempt.evidence = now, evidence
        return evidence

    async def deliver(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        """Put the reaction on the person's message (the run's ack)."""
        attempt = self._attempt(intent, "reply")
        if not self.store.add_intent(intent, attempt):
            return self.broker.refuse_duplicate(run, intent)
        name = intent.content.text if intent.content is not None else ""
        answer = await self.api.put(intent.target, run.event_id, name)
        evidence = self._close(attempt, answer, self.clock.now())
        status = ReceiptStatus.ACCEPTED if answer.ok else ReceiptStatus.FAILED
        reason = None if answer.ok else SignalReason.REACTION_FAILED.value
        if not answer.ok:
            log.warning("reaction failed", extra={"run_id": run.run_id, "detail": answer.detail})
        receipt = self.broker.receipt(
            run,
            ActionKind.ACK,
            status,
            intent_id=intent.intent_id,
            reason=reason,
            evidence=evidence,
        )
        settled = ending.apply(run, receipt) if ending else None
        self.store.finish_delivery(attempt, receipt, None, settled)
        return receipt

    async def recall(self, event_id: str) -> bool:
        """Take the run's reaction off the person's message, once; True when it did."""
        for intent in self.store.intents(event_id):
            if intent.kind is not ActionKind.ACK or intent.content is None:
                continue
            if intent.content.msgtype != "reaction":
                continue
            attempts = self.store.attempts(intent.intent_id)
            put = [a for a in attempts if a.request_digest != RECALL]
            if not any(a.outcome is AttemptOutcome.ACCEPTED for a in put):
                return False  # nothing is on the message
            if any(a.request_digest == RECALL for a in attempts):
                return False  # already recalled
            recall = self._attempt(intent, RECALL)
            self.store.finish_attempt(put[-1], start_next=recall)
            answer = await self.api.recall(intent.target, event_id, intent.content.text)
            self._close(recall, answer, self.clock.now())
            self.store.finish_attempt(recall)
            return answer.ok
        return False
