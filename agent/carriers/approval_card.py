"""The approval card (``approval_card_template_id`` set): an act's confirm as a card with
「同意」 and 「拒绝」, whose clicks come back over the card callback
(``agent/acts/clicks.py``); a card DingTalk refuses is asked in words with the text code
instead, and a prompt whose send is in doubt gives the asker the code in a line
(``agent/acts/steps.py``). Without a template a confirm is text (``messages.py``). Its
card's record is the approval's own row (``storage/approvals.py``); nothing to sweep."""

from __future__ import annotations

from agent.acts.approval_card import ApprovalCards
from agent.contracts import ActionKind, Receipt
from agent.run.carriers import CarrierBase, Delivery


class ApprovalCardCarrier(CarrierBase):
    msgtypes = ("approval",)
    keeps_records = True

    def __init__(self, cards: ApprovalCards) -> None:
        self.cards = cards

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        return "approval" if kind is ActionKind.CONFIRM else None

    async def deliver(self, d: Delivery) -> Receipt:
        return await self.cards.deliver(d.run, d.intent, d.ending)
