"""The asker's reply to a form asked as a numbered question (no ``form_card_template_id``).

While such a form waits in a thread (``store.forms.pending_text_form``), the asker's next
message there is read into its fields (``gates/form_values.py``: numbered lines, or one
line per field in order) before the task resumes (``Pipeline._work``):

- every field fits: the form is submitted by this message (compare-and-set on its row,
  ``answer_event_id`` = the message), and the run goes on: the waiting task resumes and
  the provider is shown the typed values (``EnrichedInvocation.form``);
- a field is missing or wrong: the asker gets one line saying which, and the form and the
  task keep waiting;
- a stop (「算了」): the form ends cancelled, and the task with it (``TaskKeeper.begin``).

A form asked as a card is answered on the card; the asker's next plain message in the
thread instead means they moved on: the card form ends ``cancelled`` (its event, stored by
the recovery pass, shows it on the card) and the message resumes the task as any answer
does — one live form per person and thread, never a late submit to a question the
conversation has left.

Only the asker's messages count: the thread is the asker's own (conversation and sender).
"""

from __future__ import annotations

import logging

from agent.clock import Clock
from agent.contracts import Event, form_event_id
from agent.run.tasks import is_stop
from gates.form_values import parse_reply
from storage import Store

log = logging.getLogger("dta.forms")

AGAIN = "请按编号重新回复。"
AGAIN_EN = "Please reply again, one numbered line per item."


class FormReplies:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def take(self, event: Event) -> str | None:
        """Read ``event`` as the answer of its thread's numbered form, if one waits: the
        line to answer when it does not fit, else None (no form waits, or it was
        submitted by this message, or a stop cancelled it)."""
        if event.scheduled is not None:
            return None
        record = self.store.forms.pending_form(event.thread_key)
        if record is None or record.asker_id != event.actor.user_id:
            return None
        now = self.clock.now()
        if record.asked_with == "card":  # moved on: the card's form is left behind
            ended = record.model_copy(
                update={
                    "status": "cancelled",
                    "answer_event_id": form_event_id(record.form_id),
                    "decided_at": now,
                }
            )
            self.store.forms.decide_form(ended)
            return None
        if is_stop(event.text):
            ended = record.model_copy(update={"status": "cancelled", "decided_at": now})
            self.store.forms.decide_form(ended)
            return None
        check = parse_reply(record.spec, event.text, record.english)
        if not check.ok:
            log.info("form reply does not fit", extra={"form": record.form_id})
            if record.english:
                return f"{check.said(english=True)}. {AGAIN_EN}"
            return f"{check.said()}。{AGAIN}"
        submitted = record.model_copy(
            update={
                "status": "submitted",
                "values": check.values,
                "submitted_by": event.actor.user_id,
                "answer_event_id": event.event_id,
                "decided_at": now,
            }
        )
        if not self.store.forms.decide_form(submitted):
            log.info("form ended meanwhile", extra={"form": record.form_id})
        return None
