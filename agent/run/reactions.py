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
RECALL_WITHIN_S = 86400.0  # a day: after that a reaction is left as it is
RECALL_BACKOFF_S = (5.0, 600.0)  # first wait after a refused recall, and the longest


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
        if not self.store.actions.add_intent(intent, attempt):
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
        self.store.actions.finish_delivery(attempt, receipt, None, settled)
        return receipt

    async def recall(self, event_id: str) -> bool:
        """Take the run's reaction off the person's message; True when DingTalk said it
        did. A put whose outcome is unknown (a crash cut it) is recalled too — recalling a
        reaction that is not there is harmless; a refused recall is tried again by the
        recovery pass (``recall_owed``)."""
        for intent in self.store.actions.intents(event_id):
            if _is_reaction(intent):
                return await self._recall(intent)
        return False

    async def _recall(self, intent: ActionIntent) -> bool:
        attempts = self.store.actions.attempts(intent.intent_id)
        if not owes_recall(attempts):
            return False
        put = [a for a in attempts if a.request_digest != RECALL]
        recall = self._attempt(intent, RECALL)
        self.store.actions.finish_attempt(put[-1], start_next=recall)
        name = intent.content.text if intent.content is not None else ""
        answer = await self.api.recall(intent.target, intent.event_id, name)
        self._close(recall, answer, self.clock.now())
        self.store.actions.finish_attempt(recall)
        if not answer.ok:
            log.warning("reaction recall refused", extra={"event_id": intent.event_id})
        return answer.ok

    async def recall_owed(self, within_s: float = RECALL_WITHIN_S, everything: bool = False) -> int:
        """The recovery pass: reactions of runs that have ended and are still on a message
        (a recall refused, or never made: a crash), recalled with back-off (``everything``,
        at start-up: each tried once now); how many were."""
        now = self.clock.now()
        done = 0
        for intent in self.store.actions.finished_acks_since(now - within_s):
            if not _is_reaction(intent):
                continue
            attempts = self.store.actions.attempts(intent.intent_id)
            due = everything or _due(attempts, now)
            if owes_recall(attempts) and due and await self._recall(intent):
                done += 1
        return done


def _is_reaction(intent: ActionIntent) -> bool:
    content = intent.content
    return intent.kind is ActionKind.ACK and content is not None and content.msgtype == "reaction"


def owes_recall(attempts: list[Attempt]) -> bool:
    """A reaction may be on the message (its put accepted, or cut by a crash) and no
    recall has been accepted."""
    put = [a for a in attempts if a.request_digest != RECALL]
    recalls = [a for a in attempts if a.request_digest == RECALL]
    if not put or all(a.outcome is AttemptOutcome.FAILED for a in put):
        return False  # nothing was put, or DingTalk said no to it
    # a recall answered yes, or refused for what it asks (a 4xx: nothing there to take
    # off, which is what a recall after an unknown put may find), is the last one
    return not any(a.outcome is AttemptOutcome.ACCEPTED or _refused_for_good(a) for a in recalls)


def _refused_for_good(attempt: Attempt) -> bool:
    status = attempt.evidence.http_status if attempt.evidence is not None else None
    return attempt.outcome is AttemptOutcome.FAILED and status is not None and 400 <= status < 500


def _due(attempts: list[Attempt], now: float) -> bool:
    """Whether the next recall may be tried: back-off doubling per refused recall."""
    refused = [a for a in attempts if a.request_digest == RECALL]
    if not refused:
        return True
    first, longest = RECALL_BACKOFF_S
    last = refused[-1].finished_at or refused[-1].started_at
    return now >= last + min(first * 2 ** (len(refused) - 1), longest)
