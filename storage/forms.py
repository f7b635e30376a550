"""Ask-user forms waiting for their asker (``forms``).

forms = store.forms
forms.open_form(record)                   # pending, before the card or the question goes
forms.decide_form(record)                 # True for the first end only (compare-and-set)
forms.form_by_track("form_ab12…")          # the form a card click names
forms.pending_text_form(thread_key)       # the numbered question a reply answers
forms.answered_by("form:form_ab12…")       # the form an event carries the answer of
forms.due_forms(now)                      # pending ones past their expiry

One live form per thread (conversation and asker): opening a form cancels the thread's
other pending ones in the same transaction. ``form_json`` holds the whole record; the other
columns are what the look-ups need.
"""

from __future__ import annotations

import json
from typing import Any

from agent.contracts import FormRecord, form_event_id
from storage.base import Family

_COLUMNS = "form_json"
_PENDING = "pending"


class FormRecords(Family):
    def open_form(self, record: FormRecord) -> list[FormRecord]:
        """Store a new pending form and cancel the thread's older pending ones (returned,
        so their cards can say so). A form already stored (a re-executed run asking again)
        is left as it is, and nothing is cancelled."""
        with self._tx(run=record.run_id) as conn:
            cursor = conn.execute(
                "INSERT INTO forms (form_id, event_id, run_id, thread_key, asker_id,"
                " conversation_id, form_json, status, out_track_id, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (form_id) DO NOTHING",
                (
                    record.form_id,
                    record.event_id,
                    record.run_id,
                    record.thread_key,
                    record.asker_id,
                    record.conversation_id,
                    record.to_json(),
                    record.status,
                    record.out_track_id,
                    record.created_at,
                    record.expires_at,
                ),
            )
            if not cursor.rowcount:
                return []
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM forms WHERE thread_key = ? AND status = ?"
                " AND form_id <> ?",
                (record.thread_key, _PENDING, record.form_id),
            ).fetchall()
            older = [FormRecord.model_validate_json(row[0]) for row in rows]
            cancelled = []
            for form in older:
                # a card form's end gets its event (``form:<id>``, stored by the recovery
                # pass: ``unsettled_forms``), whose run shows "cancelled" on its card
                event_id = form_event_id(form.form_id) if form.asked_with == "card" else None
                ended = form.model_copy(
                    update={
                        "status": "cancelled",
                        "decided_at": record.created_at,
                        "answer_event_id": event_id,
                    }
                )
                self._write_end(conn, ended)
                cancelled.append(ended)
            return cancelled

    def decide_form(self, record: FormRecord) -> bool:
        """Move a pending form to ``record``'s end (submitted, expired, cancelled, with its
        values and who); False when it was no longer pending: another end came first."""
        with self._tx() as conn:
            return self._write_end(conn, record)

    @staticmethod
    def _write_end(conn: Any, record: FormRecord) -> bool:
        values = None if record.values is None else json.dumps(record.values, ensure_ascii=False)
        cursor = conn.execute(
            "UPDATE forms SET status = ?, form_json = ?, values_json = ?, submitted_by = ?,"
            " answer_event_id = ?, decided_at = ? WHERE form_id = ? AND status = ?",
            (
                record.status,
                record.to_json(),
                values,
                record.submitted_by,
                record.answer_event_id,
                record.decided_at,
                record.form_id,
                _PENDING,
            ),
        )
        return bool(cursor.rowcount)

    def set_form_asked(self, form_id: str, out_track_id: str | None, asked_with: str) -> None:
        """How the asker was asked (its card's handle, stored before the card is created;
        or in words after all), while the form is pending."""
        record = self.get_form(form_id)
        if record is None:
            return
        record = record.model_copy(update={"out_track_id": out_track_id, "asked_with": asked_with})
        with self._tx() as conn:
            conn.execute(
                "UPDATE forms SET out_track_id = ?, form_json = ? WHERE form_id = ? AND status = ?",
                (out_track_id, record.to_json(), form_id, _PENDING),
            )

    def get_form(self, form_id: str) -> FormRecord | None:
        return self._form("form_id = ?", (form_id,))

    def form_by_track(self, out_track_id: str) -> FormRecord | None:
        return self._form("out_track_id = ?", (out_track_id,))

    def answered_by(self, event_id: str) -> FormRecord | None:
        """The submitted form whose answer ``event_id`` carries (its run resumes the task)."""
        return self._form("answer_event_id = ? AND status = 'submitted'", (event_id,))

    def pending_text_form(self, thread_key: str) -> FormRecord | None:
        """The thread's pending form asked in words (its answer is the asker's reply)."""
        record = self.pending_form(thread_key)
        return record if record is not None and record.asked_with == "text" else None

    def pending_form(self, thread_key: str) -> FormRecord | None:
        """The thread's pending form, however it was asked (the newest)."""
        return self._form(
            "thread_key = ? AND status = ? ORDER BY created_at DESC", (thread_key, _PENDING)
        )

    def due_forms(self, now: float, limit: int = 100) -> list[FormRecord]:
        """Pending forms whose time ran out by ``now`` (the recovery pass expires them)."""
        return self._forms(
            "status = ? AND expires_at <= ? ORDER BY expires_at LIMIT ?", (_PENDING, now, limit)
        )

    def unsettled_forms(self, limit: int = 100) -> list[FormRecord]:
        """Forms ended on a card or by the clock whose event (``form:<id>``) was never stored
        (a crash fell between the two): the recovery pass stores it."""
        rows = self._dicts(
            f"SELECT f.{_COLUMNS} FROM forms f WHERE f.status <> ?"
            " AND f.answer_event_id = 'form:' || f.form_id AND NOT EXISTS (SELECT 1 FROM"
            " events e WHERE e.event_id = f.answer_event_id) ORDER BY f.created_at LIMIT ?",
            (_PENDING, limit),
        )
        return [FormRecord.model_validate_json(r[_COLUMNS]) for r in rows]

    def all(self, event_id: str | None = None) -> list[FormRecord]:
        """In creation order: one message's, or every form."""
        if event_id is not None:
            return self._forms("event_id = ? ORDER BY created_at", (event_id,))
        return self._forms("1 = 1 ORDER BY created_at", ())

    def _form(self, where: str, params: tuple[object, ...]) -> FormRecord | None:
        rows = self._dicts(f"SELECT {_COLUMNS} FROM forms WHERE {where} LIMIT 1", params)
        return FormRecord.model_validate_json(rows[0][_COLUMNS]) if rows else None

    def _forms(self, where: str, params: tuple[object, ...]) -> list[FormRecord]:
        rows = self._dicts(f"SELECT {_COLUMNS} FROM forms WHERE {where}", params)
        return [FormRecord.model_validate_json(r[_COLUMNS]) for r in rows]
