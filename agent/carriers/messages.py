"""Text and Markdown messages: the fallback carrier, by the broker (session webhook while it
lives, else the OpenAPI; ``agent/run/broker.py``, ``agent/dingtalk/addressing.py`` builds
each body). A long text is several pieces stored together before the first goes; a crash
between two leaves the rest owed to the re-driven run (``agent/run/pieces.py``). Nothing to
sweep: an attempt a stop cut is ``uncertain`` and never sent again."""

from __future__ import annotations

from agent.contracts import ActionKind, Receipt
from agent.run.broker import Broker
from agent.run.carriers import CarrierBase, Delivery


class MessageCarrier(CarrierBase):
    msgtypes = ("text", "markdown")
    keeps_records = False

    def __init__(self, broker: Broker, reply_form: str) -> None:
        self.broker = broker
        # the answer's form when no card carries it: "markdown", or "text"
        self.reply_form = reply_form

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        if kind is ActionKind.REPLY and answer and self.reply_form == "markdown":
            return "markdown"
        return "text"

    async def deliver(self, d: Delivery) -> Receipt:
        return await self.broker.execute(
            d.run, d.intent, d.silence_detail, d.ending, d.payload, d.stored
        )
