"""What the fake DingTalk's workspace holds: to-dos and calendar events, and the id rules.

Pure data, like ``lab.fake.faults``: the routes in ``lab.fake.workspace`` translate the
real OpenAPI shapes (../shared/dingtalk-workspace-apis.md, sections 3 and 4) onto it, and a
case is judged on ``Workspace.view`` — which speaks staff ids, as case files do, while the
to-do and calendar APIs themselves speak unionIds only.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# A unionId the directory does not give is derived from the staff id, stably, so a case
# need not invent one per person (../shared/lab-cases.md, fixtures.users).
UNION_PREFIX = "union-"
# DingTalk's calendar takes ISO-8601 *with milliseconds* only (b57, see section 4).
_ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|[+-]\d{2}:?\d{2})$")


def union_of(users: dict[str, dict[str, Any]], user_id: str) -> str:
    """The unionId of a staff id: the directory's, else the derived one."""
    given = (users.get(user_id) or {}).get("union_id")
    return given if isinstance(given, str) and given else UNION_PREFIX + user_id


def staff_of(users: dict[str, dict[str, Any]], union_id: str) -> str | None:
    """The staff id behind a unionId, for a person in the directory only (else None)."""
    for user_id in users:
        if union_of(users, user_id) == union_id:
            return user_id
    return None


def shown_staff(users: dict[str, dict[str, Any]], union_id: str) -> str:
    """A unionId as a case names it: the staff id when there is one, else the unionId."""
    staff = staff_of(users, union_id)
    if staff is not None:
        return staff
    return union_id.removeprefix(UNION_PREFIX) if union_id.startswith(UNION_PREFIX) else union_id


def parse_iso_ms(text: Any) -> datetime | None:
    """A calendar time as DingTalk accepts it (milliseconds and a zone), else None."""
    if not isinstance(text, str) or not _ISO_MS.match(text):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class FakeTodo:
    """One to-do; every id in it is a unionId, as DingTalk keeps it."""

    id: str
    creator: str
    subject: str
    created_ms: int
    executors: list[str] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)
    description: str | None = None
    due_ms: int | None = None
    source_id: str | None = None
    done: bool = False
    deleted: bool = False

    def answer(self) -> dict[str, Any]:
        """The create / get shape (todo_1_0 CreateTodoTask, GetTodoTask)."""
        body: dict[str, Any] = {
            "id": self.id,
            "subject": self.subject,
            "creatorId": self.creator,
            "createdTime": self.created_ms,
            "done": self.done,
            "executorIds": list(self.executors),
            "participantIds": list(self.participants),
            "requestId": secrets.token_hex(8),
        }
        optional = {"description": self.description, "dueTime": self.due_ms}
        body.update({k: v for k, v in optional.items() if v is not None})
        if self.source_id is not None:
            body["sourceId"] = self.source_id
        return body

    def card(self) -> dict[str, Any]:
        """One entry of the list call's ``todoCards``."""
        body: dict[str, Any] = {
            "taskId": self.id,
            "subject": self.subject,
            "isDone": self.done,
            "creatorId": self.creator,
        }
        if self.due_ms is not None:
            body["dueTime"] = self.due_ms
        return body


@dataclass
class FakeEvent:
    """One calendar event on an organizer's primary calendar (unionIds throughout)."""

    id: str
    organizer: str
    summary: str
    start: dict[str, Any]
    end: dict[str, Any]
    attendees: list[str] = field(default_factory=list)
    location: str | None = None
    description: str | None = None
    client_token: str | None = None

    def answer(self) -> dict[str, Any]:
        """The create / get shape (calendar_1_0 CreateEvent, GetEvent)."""
        body: dict[str, Any] = {
            "id": self.id,
            "summary": self.summary,
            "start": dict(self.start),
            "end": dict(self.end),
            "organizer": {"id": self.organizer, "isOrganizer": True},
            "attendees": [{"id": a, "responseStatus": "needsAction"} for a in self.attendees],
        }
        if self.location is not None:
            body["location"] = {"displayName": self.location}
        if self.description is not None:
            body["description"] = self.description
        return body

    def span(self) -> tuple[datetime, datetime] | None:
        start = parse_iso_ms(self.start.get("dateTime"))
        end = parse_iso_ms(self.end.get("dateTime"))
        return (start, end) if start is not None and end is not None else None


@dataclass
class Workspace:
    """The to-dos and events the fake holds, each list in creation order."""

    todos: list[FakeTodo] = field(default_factory=list)
    events: list[FakeEvent] = field(default_factory=list)

    def add_todo(self, creator: str, subject: str, now_ms: int, **fields: Any) -> FakeTodo:
        todo = FakeTodo(f"task{secrets.token_hex(8)}", creator, subject, now_ms, **fields)
        self.todos.append(todo)
        return todo

    def todo(self, task_id: str) -> FakeTodo | None:
        """A to-do that still exists (a deleted one is "task not exist", as DingTalk says)."""
        return next((t for t in self.todos if t.id == task_id and not t.deleted), None)

    def todo_by_source(self, creator: str, source_id: str) -> FakeTodo | None:
        return next(
            (
                t
                for t in self.todos
                if t.creator == creator and t.source_id == source_id and not t.deleted
            ),
            None,
        )

    def todos_of(self, executor: str, done: bool | None) -> list[FakeTodo]:
        return [
            t
            for t in self.todos
            if not t.deleted and executor in t.executors and (done is None or t.done == done)
        ]

    def add_event(self, organizer: str, summary: str, **fields: Any) -> FakeEvent:
        event = FakeEvent(f"evt{secrets.token_hex(8)}", organizer, summary, **fields)
        self.events.append(event)
        return event

    def event(self, organizer: str, event_id: str) -> FakeEvent | None:
        return next((e for e in self.events if e.id == event_id and e.organizer == organizer), None)

    def event_by_token(self, organizer: str, token: str) -> FakeEvent | None:
        return next(
            (e for e in self.events if e.organizer == organizer and e.client_token == token),
            None,
        )

    def busy(self, person: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
        """The querySchedule items of one person: the events they organise or attend that
        overlap the window."""
        items = []
        for event in self.events:
            span = event.span()
            if span is None or person not in (event.organizer, *event.attendees):
                continue
            if span[0] < end and start < span[1]:
                items.append({"start": dict(event.start), "end": dict(event.end), "status": "BUSY"})
        return items

    def view(self, users: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """What the workspace holds, in staff ids, as a case is judged on it."""

        def staff(ids: list[str]) -> list[str]:
            return [shown_staff(users, u) for u in ids]

        todos = [
            {
                "id": t.id,
                "subject": t.subject,
                "executors": staff(t.executors),
                "creator": shown_staff(users, t.creator),
                "done": t.done,
                "due_ms": t.due_ms,
                "source_id": t.source_id,
            }
            for t in self.todos
            if not t.deleted
        ]
        events = [
            {
                "id": e.id,
                "summary": e.summary,
                "organizer": shown_staff(users, e.organizer),
                "attendees": staff(e.attendees),
                "start": e.start.get("dateTime") or e.start.get("date"),
                "end": e.end.get("dateTime") or e.end.get("date"),
                "location": e.location,
            }
            for e in self.events
        ]
        return {"todos": todos, "events": events}
