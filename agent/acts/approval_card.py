"""The approval card: the minimal facts that decide the risk, with approve / deny buttons.

The template (``approval_card_template_id``) is the operator's; its contract is:

- variables (all strings): ``title``, ``action``, ``object``, ``audience``, ``content``,
  ``reversible``, ``expires``, ``status`` (what the card says of the decision), ``msg_id``;
- two buttons of the "回传请求" kind with the param ``action`` = ``approve`` | ``deny``
  (their action ids may be the same words), and ``callbackType: STREAM`` so the clicks come
  back over the Stream connection (topic ``/v1.0/card/instances/callback``).

The card's ``outTrackId`` is the approval's id: the handle a click names. The card goes out
like any message — stored intent, stored attempt, one create, one receipt — and after a
decision its ``status`` is updated by key (``show``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from agent.cards.api import FLOW_FINISHED, CardAPI, CardOutcome, open_space_id
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ApprovalRecord,
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

log = logging.getLogger("dta.approvals")

_STATUS = {
    CardOutcome.OK: (AttemptOutcome.ACCEPTED, ReceiptStatus.ACCEPTED),
    CardOutcome.UNCERTAIN: (AttemptOutcome.UNCERTAIN, ReceiptStatus.UNCERTAIN),
}


def card_params(record: ApprovalRecord) -> dict[str, str]:
    auth = record.authorization
    expires = datetime.fromtimestamp(record.expires_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    content = "，".join(f"{k}={v}" for k, v in sorted(record.arguments.items()))
    return {
        "title": "需要你确认",
        "action": auth.action,
        "object": auth.object,
        "audience": "、".join(auth.audience),
        "content": content[:600],
        "reversible": "可以撤销" if auth.reversible else "不可撤销",
        "expires": expires,
        "status": "待确认",
        "msg_id": record.event_id,
    }


class ApprovalCards:
    """Delivers confirms as approval cards (``Acting.deliver``) and shows decisions."""

    def __init__(self, api: CardAPI, store: Store, clock: Clock, broker: Broker) -> None:
        self.api = api
        self.store = store
        self.clock = clock
        self.broker = broker

    async def deliver(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        record = self.store.get_approval(intent.approval_id or "")
        space = open_space_id(intent.target)
        if record is None or space is None:
            detail = "no such approval" if record is None else "no card space for this sender"
            return self._closed(run, intent, None, ReceiptStatus.FAILED, Evidence(detail=detail))
        body = self.api.create_body(record.approval_id, intent.target, space)
        body["cardData"] = {"cardParamMap": card_params(record)}
        attempt = Attempt(
            attempt_id=new_id("att"),
            intent_id=intent.intent_id,
            channel=Channel.CARD,
            started_at=self.clock.now(),
            request_digest=self.api.digest(body),
        )
        if not self.store.add_intent(intent, attempt):
            return self.broker.refuse_duplicate(run, intent)
        self.store.set_approval_track(record.approval_id, record.approval_id)
        answer = await self.api.create(body)
        outcome, status = _STATUS.get(answer.outcome, (AttemptOutcome.FAILED, ReceiptStatus.FAILED))
        evidence = Evidence(
            http_status=answer.http_status,
            errmsg=answer.code,
            detail=answer.detail,
            channels_tried=[Channel.CARD],
            out_track_id=record.approval_id,
        )
        attempt.outcome, attempt.finished_at, attempt.evidence = outcome, self.clock.now(), evidence
        return self._closed(run, intent, attempt, status, evidence, ending)

    def _closed(
        self,
        run: Run,
        intent: ActionIntent,
        attempt: Attempt | None,
        status: ReceiptStatus,
        evidence: Evidence,
        ending: RunEnding | None = None,
    ) -> Receipt:
        receipt = self.broker.receipt(
            run, intent.kind, status, intent_id=intent.intent_id, evidence=evidence
        )
        settled = ending.apply(run, receipt) if ending else None
        if attempt is None:
            self.store.add_receipt(receipt, settled)
        else:
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
            self.store.finish_delivery(attempt, receipt, outbound, settled)
        return receipt

    async def show(self, record: ApprovalRecord, status: str) -> bool:
        """Put the decision on the card (by key: the rest of the card stays)."""
        if record.out_track_id is None:
            return False
        answer = await self.api.update(
            record.out_track_id, {"status": status, "flowStatus": FLOW_FINISHED}
        )
        if not answer.ok:
            log.warning("approval card not updated", extra={"approval": record.approval_id})
        return answer.ok
