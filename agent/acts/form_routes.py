"""The forms' row of the own-event table (``agent/run/own_events.py``; their order among
the others: ``agent/components/own_events.py``).

- ``form``: the runtime's own event ``form:<id>`` (a submit on the card, a cancel, an
  expiry): the card shows the form's end; a submitted form's run then goes on as any
  message would — the thread's waiting task resumes, and the provider is shown the values
  (``EnrichedInvocation.form``); an expired or cancelled one ends silent.

The asker's reply to a numbered question (no form card) is no own event: it is a person's
message, read into the fields by the pipeline (``agent/run/form_replies.py``).

``form`` waits while the robot is paused (``held``): the asker submitted, and is owed the
answer.
"""

from __future__ import annotations

import logging

from agent.acts.form_card import FormCards
from agent.contracts import Event, Run, SilentReason
from agent.run.own_events import Hands
from storage import Store

log = logging.getLogger("dta.forms")

_ENDED = {"expired": SilentReason.FORM_EXPIRED, "cancelled": SilentReason.FORM_CANCELLED}


def form_ended(event: Event) -> bool:
    """``form:<id>``: a form ended (submitted on its card, cancelled, expired)."""
    return event.scheduled is not None and event.scheduled.kind == "form"


class FormRoutes:
    """The handle of the forms' row, over the store and (where set) the cards."""

    def __init__(self, *, store: Store, cards: FormCards | None) -> None:
        self.store = store
        self.cards = cards

    async def ended(self, event: Event, run: Run, hands: Hands) -> Run | None:
        """The run of ``form:<id>``: None for a submitted form (the answering path resumes
        the task with its values), else the run's silent end."""
        scheduled = event.scheduled
        record = self.store.forms.get_form((scheduled.form_id if scheduled else None) or "")
        if record is None:
            return hands.endings.end_silent(run, SilentReason.NOT_DUE, "no such form")
        if self.cards is not None and record.out_track_id is not None:
            await self.cards.show(record)
        if record.status == "submitted":
            return None
        reason = _ENDED.get(record.status, SilentReason.NOT_DUE)
        return hands.endings.end_silent(run, reason, f"form {record.form_id} {record.status}")
