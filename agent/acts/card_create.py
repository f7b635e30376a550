"""What an approval card and a form card share (``CardDeliveries``): one card created once
— the attempt stored before any I/O (a second intent for the same key is refused as a
duplicate), the card's track marked as taken, the create, what its answer makes of the
attempt — and the delivery closed with its receipt (``closed_card``); each subclass says
what its card holds, and asks in words when DingTalk takes no card."""

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
    RunEnding,
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


class CardDeliveries:
    """A kind of card the acting step delivers (``Acting.deliver``) and shows changes on."""

    def __init__(
        self,
        api: CardAPI,
        store: Store,
        clock: Clock,
        broker: Broker,
        timezone: str = "Asia/Shanghai",
    ) -> None:
        self.api = api
        self.store = store
        self.clock = clock
        self.broker = broker
        self.timezone = timezone

    async def create_once(
        self,
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
            started_at=self.clock.now(),
            request_digest=self.api.digest(body),
        )
        if not self.store.actions.add_intent(intent, attempt):
            return self.broker.refuse_duplicate(run, intent)
        mark_track()
        self.broker.crash.hit("after_attempt_started")
        answer = await self.api.create(body)
        self.broker.crash.hit("after_send")
        default = (AttemptOutcome.FAILED, ReceiptStatus.FAILED)
        outcome, status = _STATUS.get(answer.outcome, default)
        evidence = Evidence(
            http_status=answer.http_status,
            errmsg=answer.code,
            detail=answer.detail,
            channels_tried=[Channel.CARD],
            out_track_id=track_id,
        )
        attempt.outcome, attempt.finished_at = outcome, self.clock.now()
        attempt.evidence = evidence
        return CardCreated(attempt, answer, status, evidence)

    def closed(
        self,
        run: Run,
        intent: ActionIntent,
        attempt: Attempt | None,
        status: ReceiptStatus,
        evidence: Evidence,
        ending: RunEnding | None = None,
    ) -> Receipt:
        return closed_card(self.store, self.broker, run, intent, attempt, status, evidence, ending)


def closed_card(
    store: Store,
    broker: Broker,
    run: Run,
    intent: ActionIntent,
    attempt: Attempt | None,
    status: ReceiptStatus,
    evidence: Evidence,
    ending: RunEnding | None = None,
) -> Receipt:
    """A card's delivery closed (an approval card's, a form card's): its receipt, saved
    with the run's ending when given; with its attempt, the outbound index when it went."""
    receipt = broker.receipt(
        run, intent.kind, status, intent_id=intent.intent_id, evidence=evidence
    )
    settled = ending.apply(run, receipt) if ending else None
    if attempt is None:
        store.actions.add_receipt(receipt, settled)
        return receipt
    outbound = None
    if status.delivered and intent.content is not None:
        outbound = {
            "intent_id": intent.intent_id,
            "process_query_key": None,
            "conversation_id": intent.target.conversation_id,
            "channel": Channel.CARD.value,
            "text": intent.content.text,
            "sent_at": attempt.finished_at,
        }
    store.actions.finish_delivery(attempt, receipt, outbound, settled)
    return receipt
