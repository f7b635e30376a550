"""Ask-user forms waiting for their asker: submitted once, by the asker only; expired;
cancelled.

A provider's ``ask`` with a ``form`` leaves a ``FormRecord`` in the store, pending, before
the card (or the numbered question) goes (``Acting.accept``). Its end is decided here, in a
few store statements, like an approval's:

- ``click``: a press on the form card, on the connector's thread before the ack. Only the
  asker's submit counts; anyone else's does nothing and is answered on the card, privately.
  A submit whose values do not fit the fields (``gates/form_values.py``) is answered on
  the card with the first problem, and the form stays pending. A valid one is a
  compare-and-set on the row, then the runtime's own event ``form:<id>`` is stored: its run
  resumes the waiting task with the values (``agent/acts/form_routes.py``). A second press
  answers the presser only (「已提交」) and changes nothing.
- (the asker's reply to a numbered question, where no card template is set, is read by
  the pipeline itself: ``agent/run/form_replies.py``.)
- ``expire_due``: a pending form past ``form_timeout_s`` is ``expired``, found at every
  recovery pass (``Runtime.tick``), as approvals are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agent.clock import Clock
from agent.contracts import (
    Actor,
    CardClick,
    Conversation,
    Event,
    FormRecord,
    Robot,
    Run,
    Scheduled,
    form_event_id,
)
from agent.dingtalk.card_callback import CANCEL_FORM, SUBMIT
from gates.form_values import FormCheck, check_values
from storage import Store

log = logging.getLogger("dta.forms")

CARD_STATUS = "card_status"  # the template's state variable: pending | submitted | …
NOTICE = "form_notice"  # what the presser alone is told (userPrivateData)
ERROR = "form_error"  # the first problem with a submit (userPrivateData)
ONLY_THE_ASKER = "只有提问的人可以提交"
ENDED_WORDS = {"submitted": "已提交", "expired": "已过期", "cancelled": "已取消"}
INVALID_WORDS = "请修改后重新提交"


@dataclass(frozen=True)
class FormClick:
    """The callback's answer (the card's immediate change) and the event to run, if the
    press ended the form."""

    response: dict[str, Any]
    event: Event | None = None
    generation: int = 0  # the event's thread generation, as stored (its run is not stale)


def shared(params: dict[str, str]) -> dict[str, Any]:
    """A change everyone sees on the card (by key: the rest of the card stays)."""
    return {
        "cardData": {"cardParamMap": params},
        "cardUpdateOptions": {"updateCardDataByKey": True},
    }


def private(params: dict[str, str]) -> dict[str, Any]:
    """A change only the presser sees."""
    return {
        "userPrivateData": {"cardParamMap": params},
        "cardUpdateOptions": {"updatePrivateDataByKey": True},
    }


def form_event(record: FormRecord, run: Run, now: float) -> Event:
    """The runtime's own event that carries out ``record``'s end, in the conversation it was
    asked in, for its asker (their thread: the task waiting there resumes)."""
    origin = run.origin
    return Event(
        event_id=form_event_id(record.form_id),
        conversation=Conversation(id=origin.conversation_id, type=origin.conversation_type),
        actor=Actor(user_id=origin.user_id, nick=origin.nick, has_staff_id=origin.has_staff_id),
        robot=Robot(code=origin.robot_code),
        session_webhook=origin.session_webhook,
        msgtype="scheduled",
        text="（表单已提交）" if record.status == "submitted" else f"form {record.status}",
        created_at=now,
        received_at=now,
        scheduled=Scheduled(kind="form", form_id=record.form_id),
    )


class FormDesk:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def on(self, store: Store) -> FormDesk:
        """The same desk over another connection to the store (the connector's thread)."""
        return FormDesk(store, self.clock)

    def click(self, click: CardClick) -> FormClick | None:
        """A press on a form card; None when the card is not a form's."""
        record = self.store.forms.form_by_track(click.out_track_id)
        if record is None:
            return None
        seen = self.store.approvals.click(click.frame_id)
        if seen is not None:  # a redelivered callback: answered as before, nothing new
            return FormClick(self._as_it_stands(record, click.user_id))
        outcome, answer = self._decide(record, click)
        self.store.approvals.add_click(
            click.frame_id, None, click.user_id, click.action, f"form_{outcome}", click.received_at
        )
        log.info("form click", extra={"form": record.form_id, "outcome": outcome})
        return answer

    def _decide(self, record: FormRecord, click: CardClick) -> tuple[str, FormClick]:
        if click.user_id != record.asker_id:
            return "not_asker", FormClick(private({NOTICE: ONLY_THE_ASKER}))
        if record.status == "pending" and self.clock.now() >= record.expires_at:
            self.expire(record)
            record = self.store.forms.get_form(record.form_id) or record
        if record.status != "pending":
            return f"already_{record.status}", FormClick(self._as_it_stands(record, click.user_id))
        if click.action == CANCEL_FORM:
            return self._end(record, "cancelled", click.user_id)
        if click.action != SUBMIT:
            return "unknown_action", FormClick(private({NOTICE: "未知的操作"}))
        check = check_values(record.spec, click.values, record.english)
        if not check.ok:
            said = check.said(record.english)
            return "invalid", FormClick(private({ERROR: said, NOTICE: INVALID_WORDS}))
        return self._end(record, "submitted", click.user_id, check)

    def _end(
        self, record: FormRecord, status: str, by: str, check: FormCheck | None = None
    ) -> tuple[str, FormClick]:
        """The form ended on its card: the row first (compare-and-set), then its event."""
        ended = self._ended(record, status, by, check)
        if not self.store.forms.decide_form(ended):
            now = self.store.forms.get_form(record.form_id) or record
            return f"already_{now.status}", FormClick(self._as_it_stands(now, by))
        event, generation = self._store_event(ended)
        return status, FormClick(shared({CARD_STATUS: status}), event, generation)

    def _ended(
        self, record: FormRecord, status: str, by: str | None, check: FormCheck | None = None
    ) -> FormRecord:
        return record.model_copy(
            update={
                "status": status,
                "values": check.values if check is not None else None,
                "submitted_by": by if status == "submitted" else None,
                "answer_event_id": form_event_id(record.form_id),
                "decided_at": self.clock.now(),
            }
        )

    def _as_it_stands(self, record: FormRecord, presser: str) -> dict[str, Any]:
        """What a press on a form that is no longer open is answered (the presser only)."""
        if presser != record.asker_id:
            return private({NOTICE: ONLY_THE_ASKER})
        return private({NOTICE: ENDED_WORDS.get(record.status, "待填写")})

    def _store_event(self, record: FormRecord) -> tuple[Event | None, int]:
        """The form's event stored (once), with its thread generation."""
        run = self.store.events.get_run(record.event_id)
        if run is None:
            return None, 0
        event = form_event(record, run, self.clock.now())
        stored = self.store.events.add_event(event, event.to_json(), supersedes=False)
        return event, stored.generation

    def expire(self, record: FormRecord) -> Event | None:
        """A pending form past its time: expired, and its event stored (its run updates the
        card); None when another end came first."""
        ended = self._ended(record, "expired", None)
        if not self.store.forms.decide_form(ended):
            return None
        return self._store_event(ended)[0]

    def expire_due(self) -> int:
        """Every pending form past its time, expired now; and the event of every form ended
        whose event a crash kept from being stored."""
        done = 0
        for record in self.store.forms.due_forms(self.clock.now()):
            done += self.expire(record) is not None
        for record in self.store.forms.unsettled_forms():
            self._store_event(record)
        return done
