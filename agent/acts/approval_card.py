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
from collections.abc import Callable

from agent.acts.card_create import create_card_once
from agent.acts.shown import lines, local_time, person_names, readable
from agent.cards.api import FLOW_FINISHED, CardAPI, open_space_id
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ApprovalRecord,
    Attempt,
    CardReason,
    Channel,
    Evidence,
    MessageContent,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
)
from agent.run.broker import Broker
from storage import Store

log = logging.getLogger("dta.approvals")

def card_params(record: ApprovalRecord, timezone: str) -> dict[str, str]:
    """The card's variables: names, not staff ids; the arguments in the asker's words; the
    expiry in the team's time zone."""
    auth, english = record.authorization, record.english
    pairs = readable(record.tool, record.arguments, record.names, timezone, english, auth.object)
    return {
        "title": "Needs your approval" if english else "需要你确认",
        "action": auth.action,
        "object": auth.object,
        "audience": person_names(auth.audience, record.names, english),
        "content": lines(pairs, english)[:600],
        "reversible": ("Can be undone" if english else "可以撤销")
        if auth.reversible
        else ("Cannot be undone" if english else "不可撤销"),
        "expires": local_time(record.expires_at, timezone, english),
        "status": "Waiting" if english else "待确认",
        "msg_id": record.event_id,
    }


class ApprovalCards:
    """Delivers confirms as approval cards (``Acting.deliver``) and shows decisions."""

    def __init__(
        self,
        api: CardAPI,
        store: Store,
        clock: Clock,
        broker: Broker,
        timezone: str = "Asia/Shanghai",
        text_prompt: Callable[[ApprovalRecord, bool], str] | None = None,
    ) -> None:
        self.api = api
        self.store = store
        self.clock = clock
        self.broker = broker
        self.timezone = timezone
        # the same prompt in words with its text code, for a card DingTalk will not take
        self.text_prompt = text_prompt

    async def deliver(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        record = self.store.approvals.get_approval(intent.approval_id or "")
        space = open_space_id(intent.target)
        if record is None or space is None:
            detail = "no such approval" if record is None else "no card space for this sender"
            return self._closed(run, intent, None, ReceiptStatus.FAILED, Evidence(detail=detail))
        if record.out_track_id is not None and self.text_prompt is not None:
            # its card is out already (an earlier message asked for the same act): the code
            # in words, never a second card under the same outTrackId
            in_group = intent.target.conversation_type.value == "group"
            text = self.text_prompt(record, in_group)
            content = MessageContent(msgtype="text", text=text)
            return await self.broker.execute(
                run, intent.model_copy(update={"content": content}), "", ending
            )
        body = self.api.create_body(record.approval_id, intent.target, space)
        body["cardData"] = {"cardParamMap": card_params(record, self.timezone)}
        created = await create_card_once(
            store=self.store,
            broker=self.broker,
            api=self.api,
            clock=self.clock,
            run=run,
            intent=intent,
            body=body,
            track_id=record.approval_id,
            mark_track=lambda: self.store.approvals.set_approval_track(
                record.approval_id, record.approval_id
            ),
        )
        if isinstance(created, Receipt):
            return created
        attempt, answer, status, evidence = (
            created.attempt, created.answer, created.status, created.evidence
        )  # fmt: skip
        if status is ReceiptStatus.FAILED and self.text_prompt is not None:
            # No card was taken (refused, throttled past its tries, never sent): the asker
            # is asked in words with the text code instead, the card's reason on record.
            return await self._in_words(run, intent, record, attempt, answer.reason, ending)
        return self._closed(run, intent, attempt, status, evidence, ending)

    async def _in_words(
        self,
        run: Run,
        intent: ActionIntent,
        record: ApprovalRecord,
        card_attempt: Attempt,
        reason: CardReason,
        ending: RunEnding | None,
    ) -> Receipt:
        assert self.text_prompt is not None
        in_group = intent.target.conversation_type.value == "group"
        text = self.text_prompt(record, in_group)
        words = intent.model_copy(update={"content": MessageContent(msgtype="text", text=text)})
        self.store.approvals.set_approval_asked(
            record.approval_id,
            out_track_id=None,
            asked_with="text",
            detail=f"the card was not taken ({reason.value}): asked with the text code",
        )
        log.info(
            "approval card refused: asked in words",
            extra={"approval": record.approval_id, "reason": reason.value},
        )
        return await self.broker.deliver_instead(
            run,
            words,
            ending,
            reason.value,
            lambda attempt: self.store.actions.switch_delivery(card_attempt, words, attempt),
            tried=[Channel.CARD],
        )

    def _closed(
        self,
        run: Run,
        intent: ActionIntent,
        attempt: Attempt | None,
        status: ReceiptStatus,
        evidence: Evidence,
        ending: RunEnding | None = None,
    ) -> Receipt:
        return closed_card(self.store, self.broker, run, intent, attempt, status, evidence, ending)

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
