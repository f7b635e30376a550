"""The AI card (``reply_mode = "card"``): the answer in a card DingTalk renders, created with
an outTrackId derived from its intent, filled frame by frame when the provider streams
(``agent/cards/stream.py``) or in one frame (``agent/cards/broker.py``), one card per part
of a long answer, falling back to Markdown when DingTalk will not take a card. The gate
judges its text as a card's, every streamed frame too (``gates/frames.py``). Its record
(``storage/cards.py``) is its own; a card a stop left open is settled before its event runs
again (``CardReplies.recover``), and the recovery pass closes those of ended runs."""

from __future__ import annotations

from agent.cards.stream import CardReplies
from agent.contracts import ActionKind, Receipt
from agent.run.carriers import CarrierBase, Delivery


class CardCarrier(CarrierBase):
    msgtypes = ("card",)
    keeps_records = True

    def __init__(self, cards: CardReplies) -> None:
        self.cards = cards

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        return "card" if kind is ActionKind.REPLY and answer else None

    async def deliver(self, d: Delivery) -> Receipt:
        return await self.cards.cards.deliver(d.run, d.intent, d.ending)

    async def sweep(self, everything: bool) -> int:
        return await self.cards.sweep(everything)
