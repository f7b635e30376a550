"""The forms' row of the own-event table (``agent/run/own_events.py``; their order among
the others: ``agent/components/own_events.py``).

- ``form``: the runtime's own event ``form:<id>`` (a submit on the card, a cancel, an
  expiry): the card shows the form's end; a submitted form's run then goes on as any
  message would — the thread's waiting task resumes, and the provider is shown the values
  (``EnrichedInvocation.form``). A cancelled form ends the task it waited for, silently
  (the card says so); an expired one ends it ``expired`` and tells the asker in one line —
  nobody is left believing the robot still waits for their answer.

The asker's reply to a numbered question (no form card) is no own event: it is a person's
message, read into the fields by the pipeline (``agent/run/form_replies.py``).

``form`` waits while the robot is paused (``held``): the asker submitted, and is owed the
answer.
"""

from __future__ import annotations

import logging

from agent.acts.form_card import FormCards
from agent.contracts import Event, FormRecord, Run, SilentReason, TaskStatus
from agent.run.own_events import Hands
from storage import Store

log = logging.getLogger("dta.forms")

_ENDED = {"expired": SilentReason.FORM_EXPIRED, "cancelled": SilentReason.FORM_CANCELLED}
# The host's words when a form nobody submitted expires (its task ends with it).
EXPIRED_ZH = "刚才那张表单已经过期，没有提交的内容我不会再等了。需要的话请重新说一下，我再发一张。"
EXPIRED_EN = (
    "That form has expired, so I'm no longer waiting for it. Ask again if you still need it."
)


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
        ended = self._end_task(record, run)
        if record.status == "expired" and ended:
            return await hands.say(run, EXPIRED_EN if record.english else EXPIRED_ZH)
        reason = _ENDED.get(record.status, SilentReason.NOT_DUE)
        return hands.endings.end_silent(run, reason, f"form {record.form_id} {record.status}")

    def _end_task(self, record: FormRecord, run: Run) -> bool:
        """The thread's task that waited for this form, ended as the form did (expired or
        cancelled); False when none waits for it any more (the asker moved on, or it was
        ended already)."""
        task = self.store.context.active_task(record.thread_key)
        if task is None or task.status is not TaskStatus.WAITING:
            return False
        if task.updated_by_run != record.run_id:
            return False  # it waits for something newer than this form
        status = TaskStatus.EXPIRED if record.status == "expired" else TaskStatus.CANCELLED
        moved = task.model_copy(
            update={
                "status": status,
                "revision": task.revision + 1,
                "updated_by_run": run.run_id,
                "updated_at": run.updated_at,
            }
        )
        return self.store.context.save_task(moved)
