"""One card created once, as an approval card and a form card both are: the attempt stored
before any I/O (a second intent for the same key is refused as a duplicate), the card's
track marked as taken, the create, and what its answer makes of the attempt — the caller
then closes the delivery (``closed_card``) or asks in words instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.cards.api import CardAPI, CardOutcome
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    Attempt,
    AttemptOutcome,
    Channel,
    Evidence,
    Receipt,
    ReceiptStatus,
    Run,
    new_id,
)
from agent.run.broker import Broker
from storage import Store

_STATUS = {
    CardOutcome.OK: (AttemptOutcome.ACCEPTED, ReceiptStatus.ACCEPTED),
    CardOutcome.UNCERTAIN: (AttemptOutcome.UNCERTAIN, ReceiptStatus.UNCERTAIN),
}


@dataclass(frozen=True)
class CardCreated:
    attempt: Attempt
    answer: Any  # the card API's answer (its outcome, reason, code, detail)
    status: ReceiptStatus
    evidence: Evidence


async def create_card_once(
    *,
    store: Store,
    broker: Broker,
    api: CardAPI,
    clock: Clock,
    run: Run,
    intent: ActionIntent,
    body: dict[str, Any],
    track_id: str,
    mark_track: Callable[[], None],
) -> CardCreated | Receipt:
    """The card created under ``track_id``, or the duplicate's refusal (a receipt)."""
    attempt = Attempt(
        attempt_id=new_id("att"),
        intent_id=intent.intent_id,
        channel=Channel.CARD,
        started_at=clock.now(),
        request_digest=api.digest(body),
    )
    if not store.actions.add_intent(intent, attempt):
        return broker.refuse_duplicate(run, intent)
    mark_track()
    broker.crash.hit("after_attempt_started")
    answer = await api.create(body)
    broker.crash.hit("after_send")
    outcome, status = _STATUS.get(answer.outcome, (AttemptOutcome.FAILED, ReceiptStatus.FAILED))
    evidence = Evidence(
        http_status=answer.http_status,
        errmsg=answer.code,
        detail=answer.detail,
        channels_tried=[Channel.CARD],
        out_track_id=track_id,
    )
    attempt.outcome, attempt.finished_at, attempt.evidence = outcome, clock.now(), evidence
    return CardCreated(attempt, answer, status, evidence)
