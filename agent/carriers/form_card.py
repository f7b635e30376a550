"""The form card (``form_card_template_id`` set): an ask with a form as one card its asker
fills in and submits, whose presses come back over the card callback
(``agent/acts/forms.py``); a card DingTalk refuses is asked in words instead, the numbered
question. Without a template an ask's form goes as that numbered question in its text
(``messages.py``; the gate puts it there). Its card's record is the form's own row
(``storage/forms.py``); nothing to sweep: expiry is the recovery pass's
(``FormDesk.expire_due``)."""

from __future__ import annotations

from agent.acts.form_card import FormCards
from agent.contracts import ActionKind, Receipt
from agent.run.carriers import CarrierBase, Delivery


class FormCardCarrier(CarrierBase):
    msgtypes = ("form",)
    keeps_records = True

    def __init__(self, cards: FormCards) -> None:
        self.cards = cards

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        # every ask is judged as a form card's; the gate sends one only with a form
        return "form" if kind is ActionKind.ASK else None

    async def deliver(self, d: Delivery) -> Receipt:
        return await self.cards.deliver(d.run, d.intent, d.ending)
