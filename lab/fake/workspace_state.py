"""What the fake DingTalk's workspace holds: to-dos and calendar events, and the id rules.

Pure data, like ``lab.fake.faults``: the routes in ``lab.fake.workspace`` translate the
real OpenAPI shapes (../shared/dingtalk-workspace-apis.md, sections 3 and 4) onto it, and a
case is judged on ``Workspace.view`` — which speaks staff ids, as case files do, while the
to-do and calendar APIs themselves speak unionIds only.

A write the ``applied_late`` fault defers waits in ``Workspace.late`` until the platform's
clock reaches its due time: ``settle`` applies it, and every workspace request and
``view`` settle first, so a read-back before the due time finds nothing and one after finds
it (the lab's clock is virtual: "later" is the fake's clock, never real time).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lab.fake.docs_state import Knowledge

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


def _date_start(value: dict[str, Any]) -> datetime | None:
    """An all-day event's ``{date}`` as the instant its day begins (UTC)."""
    date = value.get("date")
    if not isinstance(date, str):
        return None
    try:
        return datetime.fromisoformat(f"{date}T00:00:00+00:00")
    except ValueError:
        return None


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
    client_token: str | None = None  # the create's x-client-token: never answered back
    # the create's ``extra`` (a string map): kept, but never answered back either — neither
    # GetEvent's nor ListEvents' answer has the field (SDK calendar_1_0 models)
    extra: dict[str, str] | None = None

    def answer(self) -> dict[str, Any]:
        """The create / get shape, and one entry of the list's ``events`` (calendar_1_0
        CreateEvent, GetEvent, ListEvents): a token the caller wants to find again must be
        in ``summary`` or ``description``, the only free text the answers carry."""
        body: dict[str, Any] = {
            "id": self.id,
            "summary": self.summary,
            "start": dict(self.start),
            "end": dict(self.end),
            "isAllDay": "date" in self.start,
            "organizer": {"id": self.organizer},
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

    def bounds(self) -> tuple[datetime, datetime] | None:
        """When the event is, an all-day one included (its end date is exclusive)."""
        span = self.span()
        if span is not None:
            return span
        start, end = _date_start(self.start), _date_start(self.end)
        return (start, end) if start is not None and end is not None else None

    def overlaps(self, start: datetime | None, end: datetime | None) -> bool:
        """In the window [start, end) (either side open when None); an instant event
        counts at its instant."""
        bounds = self.bounds()
        if bounds is None:
            return False
        first, last = bounds
        if end is not None and first >= end:
            return False
        return start is None or last > start or first == last >= start


@dataclass
class LateWrite:
    """A write the platform took and applies only once the clock reaches ``due``."""

    due: float
    apply: Callable[[], object]


@dataclass
class Workspace:
    """The to-dos and events the fake holds, each list in creation order."""

    todos: list[FakeTodo] = field(default_factory=list)
    events: list[FakeEvent] = field(default_factory=list)
    late: list[LateWrite] = field(default_factory=list)  # applied_late writes not yet due
    knowledge: Knowledge = field(default_factory=Knowledge)  # docs, wiki, AI tables
    clock: Callable[[], float] | None = None  # the platform's clock, once a write waits
    # list page tokens: token -> (the query it continues, the offset it starts at)
    pages: dict[str, tuple[tuple[Any, ...], int]] = field(default_factory=dict)

    def apply_later(
        self, due: float, apply: Callable[[], object], clock: Callable[[], float]
    ) -> None:
        """Keep ``apply`` until the platform's clock (``clock``) reaches ``due``."""
        self.clock = clock
        self.late.append(LateWrite(due, apply))

    def settle(self, now: float | None = None) -> None:
        """Apply the deferred writes due by ``now`` (the platform clock's time when not
        given), the earliest due first."""
        if not self.late:
            return
        if now is None:
            if self.clock is None:
                return
            now = self.clock()
        ready = sorted((w for w in self.late if w.due <= now), key=lambda w: w.due)
        self.late = [w for w in self.late if w.due > now]
        for write in ready:
            write.apply()

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

    def calendar_of(
        self, person: str, start: datetime | None, end: datetime | None
    ) -> list[FakeEvent]:
        """The events on a person's primary calendar (organised or attended) overlapping the
        window, by start, then creation order."""
        found = [
            (bounds[0], e)
            for e in self.events
            if person in (e.organizer, *e.attendees)
            and e.overlaps(start, end)
            and (bounds := e.bounds()) is not None
        ]
        return [e for _, e in sorted(found, key=lambda pair: pair[0])]

    def page_token(self, query: tuple[Any, ...], offset: int) -> str:
        """An opaque token for the page of ``query`` that starts at ``offset``."""
        token = secrets.token_urlsafe(12)
        self.pages[token] = (query, offset)
        return token

    def page_offset(self, token: str, query: tuple[Any, ...]) -> int | None:
        """Where a token this platform gave for ``query`` goes on; None for any other."""
        held = self.pages.get(token)
        return held[1] if held is not None and held[0] == query else None

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
        """What the workspace holds, in staff ids, as a case is judged on it (late writes
        due by now applied first)."""
        self.settle()

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
