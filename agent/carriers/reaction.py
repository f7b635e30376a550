"""The working signal as a reaction (``ack_style = "reaction"``): the run's ack is an emotion
on the person's message (``agent/run/reactions.py`` over ``agent/dingtalk/reactions.py``),
judged by the gate as any ack, recalled when the run ends however it ends, and — a recall
refused, or one a crash never made — by the recovery pass with back-off until DingTalk
answers."""

from __future__ import annotations

from agent.contracts import ActionKind, Receipt
from agent.run.carriers import CarrierBase, Delivery
from agent.run.reactions import ReactionSignal


class ReactionCarrier(CarrierBase):
    msgtypes = ("reaction",)
    keeps_records = True

    def __init__(self, signal: ReactionSignal) -> None:
        self.signal = signal

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        return "reaction" if kind is ActionKind.ACK else None

    async def deliver(self, d: Delivery) -> Receipt:
        return await self.signal.deliver(d.run, d.intent, d.ending)

    async def finished(self, event_id: str) -> None:
        await self.signal.recall(event_id)

    async def sweep(self, everything: bool) -> int:
        return await self.signal.recall_owed(everything=everything)
