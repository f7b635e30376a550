"""The carriers: each form an approved message can go in, one object each, in one table.

A message's form is settled before the gate judges it (a card's text is checked as a card's):
the answer in the robot's reply form (text, markdown or an AI card), a confirm as an
approval card where a template is set, an ack as a reaction with ``ack_style =
"reaction"``, anything else as text (``Carriers.form``). Once approved, each intent goes by
the carrier of its msgtype (``Carriers.deliver``); a carrier that keeps a record of its own
per message (a card, a reaction) is not one of the broker's stored pieces; when a run ends,
each carrier may owe something (a reaction comes off the message: ``finished``); and what a
stop left on a carrier, the recovery pass settles (``sweep``: cards left open, reactions
still on a message).

The carriers themselves are agent/carriers/ (one module each: how it is gated, sent and
recovered); agent/components/ puts them in the table. ``agent/run/`` knows only this
Protocol, so the acting step dispatches on the table, never on a msgtype's name.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.contracts import ActionIntent, ActionKind, Receipt, Run, RunEnding
from storage.patience import is_transient

log = logging.getLogger("dta.carriers")


@dataclass(frozen=True)
class Delivery:
    """An approved intent on its way to its carrier: how the run ends if its receipt is the
    run's last word (``ending``), an attachment's bytes (``payload``), whether it is a piece
    stored with its answer's others (``stored``), why a silence is silent."""

    run: Run
    intent: ActionIntent
    ending: RunEnding | None = None
    payload: bytes | None = None
    stored: bool = False
    silence_detail: str = ""


class Carrier(Protocol):
    """One outbound form (``agent/carriers/``)."""

    # the intents' ``content.msgtype`` it delivers
    msgtypes: tuple[str, ...]
    # a record of its own per message (an AI card, a reaction), not the broker's pieces
    keeps_records: bool

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        """The form a request of ``kind`` takes with this carrier (``answer``: the run's
        answer, which goes in the reply form), or None when it does not carry it."""
        ...

    async def deliver(self, d: Delivery) -> Receipt:
        """An approved intent sent, its receipt (saved with ``d.ending`` when given)."""
        ...

    async def finished(self, event_id: str) -> None:
        """The event's run has ended: what this carrier owes then (a reaction recalled)."""
        ...

    async def sweep(self, everything: bool) -> int:
        """The recovery pass's part for this carrier (``everything``: at start-up); how
        many things it settled."""
        ...


class CarrierBase:
    """What most carriers do besides sending: carry no request of their own, owe nothing
    when a run ends, leave nothing for the recovery pass."""

    msgtypes: tuple[str, ...] = ()
    keeps_records = False

    def form(self, kind: ActionKind, answer: bool) -> str | None:
        return None

    async def finished(self, event_id: str) -> None:
        return None

    async def sweep(self, everything: bool) -> int:
        return 0


class Carriers:
    """The table: the carriers in the order their forms are decided (the first that
    takes a request decides its form); ``fallback`` carries whatever no other one does
    (a text message)."""

    def __init__(self, carriers: Sequence[Carrier], fallback: Carrier) -> None:
        self.rows = [*carriers, fallback]
        self.fallback = fallback
        self._by_msgtype = {t: c for c in reversed(self.rows) for t in c.msgtypes}

    def form(self, kind: ActionKind, answer: bool) -> str:
        for carrier in self.rows:
            form = carrier.form(kind, answer)
            if form is not None:
                return form
        return "text"

    def of(self, intent: ActionIntent) -> Carrier:
        content = intent.content
        if content is None:  # silence: the broker's silent receipt
            return self.fallback
        return self._by_msgtype.get(content.msgtype, self.fallback)

    def keeps_records(self, intent: ActionIntent) -> bool:
        return intent.content is not None and self.of(intent).keeps_records

    def carries(self, msgtype: str) -> bool:
        """Is there a carrier of its own for ``msgtype`` (a card in card mode)?"""
        return msgtype in self._by_msgtype

    async def deliver(self, d: Delivery) -> Receipt:
        return await self.of(d.intent).deliver(d)

    async def finished(self, event_id: str) -> None:
        """Each carrier's due once the event's run has ended; a failure is logged (the
        answer has gone already) and left to the recovery pass."""
        for carrier in self.rows:
            try:
                await carrier.finished(event_id)
            except Exception:
                log.exception("carrier's end of run failed", extra={"event_id": event_id})

    async def sweep(self, everything: bool = False, msgtypes: Sequence[str] = ()) -> int:
        """The recovery pass over every carrier (or those of ``msgtypes``): how many
        things were settled. A store outage is the next pass's to retry; anything else is
        logged with its traceback."""
        done = 0
        for carrier in self.rows:
            if msgtypes and not set(msgtypes) & set(carrier.msgtypes):
                continue
            try:
                done += await carrier.sweep(everything)
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("carrier's recovery failed", extra={"carrier": carrier.msgtypes})
        return done
