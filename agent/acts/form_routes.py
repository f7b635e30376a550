"""The forms' rows of the own-event table (``agent/run/own_events.py``; their order among
the others: ``agent/components/own_events.py``).

- ``form``: the runtime's own event ``form:<id>`` (a submit on the card, a cancel, an
  expiry): the card shows the form's end; a submitted form's run then goes on as any
  message would — the thread's waiting task resumes, and the provider is shown the values
  (``EnrichedInvocation.form``); an expired or cancelled one ends silent.
- ``form_reply``: the asker's message while a numbered question (no form card) waits in
  their thread: read into the fields; one that does not fit is answered with one line
  saying which field, and the form keeps waiting; one that fits submits the form and its
  run goes on (the task resumes with the values). A stop ends the form with the task.

``form`` waits while the robot is paused (``held``): the asker submitted, and is owed the
answer.
"""

from __future__ import annotations

import logging

from agent.acts.form_card import FormCards
from agent.acts.forms import FormDesk
from agent.contracts import Event, Run, SilentReason
from agent.run.own_events import Hands
from agent.run.tasks import is_stop
from storage import Store

log = logging.getLogger("dta.forms")

_ENDED = {"expired": SilentReason.FORM_EXPIRED, "cancelled": SilentReason.FORM_CANCELLED}
_AGAIN = "请按编号重新回复。"
_AGAIN_EN = "Please reply again, one numbered line per item."


def form_ended(event: Event) -> bool:
    """``form:<id>``: a form ended (submitted on its card, cancelled, expired)."""
    return event.scheduled is not None and event.scheduled.kind == "form"


def person_words(event: Event) -> bool:
    """A person's message (whether a numbered question waits for it is for the row's
    handle: that needs the store)."""
    return event.scheduled is None


class FormRoutes:
    """The handles of the forms' rows, over the desk and (where set) the cards."""

    def __init__(self, *, store: Store, desk: FormDesk, cards: FormCards | None) -> None:
        self.store = store
        self.desk = desk
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

    async def reply(self, event: Event, run: Run, hands: Hands) -> Run | None:
        """The asker's reply to a numbered question; None when no such question waits for
        this person here, or when the reply answered it (its run goes on)."""
        record = self.store.forms.pending_text_form(event.thread_key)
        if record is None or record.asker_id != event.actor.user_id:
            return None
        if is_stop(event.text):
            self.desk.cancel(record)  # the task ends too, as any stop ends it
            return None
        check = self.desk.answer_in_words(record, event)
        if check.ok:
            return None
        log.info("form reply does not fit", extra={"form": record.form_id})
        again = f"{check.said()}。{_AGAIN}"
        if record.english:
            again = f"{check.said(english=True)}. {_AGAIN_EN}"
        return await hands.say(run, again)
