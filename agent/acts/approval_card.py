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

from agent.acts.card_create import CardDeliveries
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


class ApprovalCards(CardDeliveries):
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
        super().__init__(api, store, clock, broker, timezone)
        # the same prompt in words with its text code, for a card DingTalk will not take
        self.text_prompt = text_prompt

    async def deliver(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        record = self.store.approvals.get_approval(intent.approval_id or "")
        space = open_space_id(intent.target)
        if record is None or space is None:
            detail = "no such approval" if record is None else "no card space for this sender"
            return self.closed(run, intent, None, ReceiptStatus.FAILED, Evidence(detail=detail))
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
        track = record.approval_id
        created = await self.create_once(
            run, intent, body, track, lambda: self.store.approvals.set_approval_track(track, track)
        )
        if isinstance(created, Receipt):
            return created
        if created.status is ReceiptStatus.FAILED and self.text_prompt is not None:
            # No card was taken (refused, throttled past its tries, never sent): the asker
            # is asked in words with the text code instead, the card's reason on record.
            reason = created.answer.reason
            return await self._in_words(run, intent, record, created.attempt, reason, ending)
        return self.closed(run, intent, created.attempt, created.status, created.evidence, ending)

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
