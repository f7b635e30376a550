"""The robot app's typed calls to the DingTalk workspace: directory, calendar, to-do.

Every id in and out is a staff id (userId); the calendar and to-do APIs take unionIds, so
each is converted inside (``StaffIds``, remembered per client). The requests go on the
transport's client and app token (agent/dingtalk/workspace_ids.py), so its timeouts,
retries of what never arrived, and base URLs apply; every failure is one ``WorkspaceError``
whose ``kind`` says what the caller may do next.

Creates are not idempotent on DingTalk's side, and a ``timeout_after_send`` may have been
applied: a calendar event carries ``x-client-token`` (the caller's key, the same on a retry),
a to-do carries ``sourceId`` and is read back with ``todo_by_source``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace_ids import (
    DEPARTURE,
    Departure,
    StaffIds,
    WorkspaceCalls,
    WorkspaceError,
    segment,
)
from agent.dingtalk.workspace_records import (
    BusyInterval,
    CalendarEvent,
    FreeBusy,
    Person,
    Todo,
    busy_intervals,
    calendar_time,
    error_text,
    from_ms,
    iso_ms,
    strings,
    text_or_none,
)

__all__ = [
    "BusyInterval",
    "CalendarEvent",
    "FreeBusy",
    "Person",
    "Todo",
    "WorkspaceClient",
    "WorkspaceError",
    "iso_ms",
]

SEARCH_MAX = 20  # contact search's own limit on ``size``
TODO_PAGES_MAX = 5  # pages of open to-dos read before stopping (each up to DingTalk's size)


class WorkspaceClient:
    """Typed workspace calls for the robot app, on the transport's client and token."""

    def __init__(self, transport: DingTalkTransport, *, oapi_base_url: str | None = None) -> None:
        self._calls = WorkspaceCalls(transport, oapi_base_url)
        self._ids = StaffIds(self._calls)

    # ------------------------------------------------------------------ directory

    async def prepare(self, user_ids: list[str]) -> None:
        """Have what a write for these people needs before it is on record as sent: their
        unionIds (remembered) and the app token. Raises ``WorkspaceError`` when either
        cannot be had (``not_found``: no such person; ``unavailable``: no token)."""
        await self._ids.union_ids(sorted(set(user_ids)))
        try:
            await self._calls.transport._token_for_send()
        except Exception as exc:
            raise WorkspaceError("unavailable", None, None, f"no access token ({exc})") from None

    @contextlib.asynccontextmanager
    async def departure(self) -> AsyncIterator[Departure]:
        """A place in the pool for one write and its read-back, waited for as long as it
        takes before the write's attempt is recorded; within it the write's requests go
        on that place, and the departure says whether any may have reached DingTalk."""
        async with await self._calls.transport.reserve_place() as place:
            departure = Departure(place)
            token = DEPARTURE.set(departure)
            try:
                yield departure
            finally:
                DEPARTURE.reset(token)

    async def names(self, user_ids: list[str]) -> dict[str, str]:
        """The directory's names of these staff ids (those it could give)."""
        found = await asyncio.gather(*(self._ids.name(u) for u in user_ids))
        return {u: n for u, n in zip(user_ids, found, strict=True) if n}

    async def union_id(self, user_id: str) -> str:
        return await self._ids.union_id(user_id)

    async def user_id(self, union_id: str) -> str:
        return await self._ids.user_id(union_id)

    async def search_users(self, name: str, size: int = 10) -> list[Person]:
        """People whose name matches, with name and title (the search gives ids only).
        Duplicate names are all returned: the caller asks which one, never picks."""
        if not name.strip():
            raise WorkspaceError("invalid", None, None, "an empty name")
        body = {"queryWord": name, "offset": 0, "size": max(1, min(size, SEARCH_MAX))}
        data = await self._calls.openapi("POST", "/v1.0/contact/users/search", body)
        people = []
        for user_id in strings(data.get("list")):
            try:
                detail = await self._ids.detail(user_id)
            except WorkspaceError as exc:
                if exc.kind != "not_found":
                    raise
                continue  # left since the search index saw them
            departments = "、".join(str(d) for d in detail.get("dept_names") or []) or None
            people.append(
                Person(
                    user_id,
                    text_or_none(detail.get("name")),
                    text_or_none(detail.get("title")),
                    departments,
                )
            )
        return people

    # ------------------------------------------------------------------ calendar

    async def free_busy(
        self,
        user_ids: list[str],
        start: datetime,
        end: datetime,
        *,
        organizer: str | None = None,
    ) -> dict[str, FreeBusy]:
        """Busy intervals per staff id, asked on ``organizer``'s calendar (the first
        person's when not named); everyone asked for has an entry."""
        if not user_ids:
            return {}
        unions = await self._ids.union_ids(user_ids)
        staff_of = dict(zip(unions, user_ids, strict=True))
        path_id = unions[0] if organizer is None else await self._ids.union_id(organizer)
        body = {"startTime": iso_ms(start), "endTime": iso_ms(end), "userIds": unions}
        path = f"/v1.0/calendar/users/{segment(path_id)}/querySchedule"
        data = await self._calls.openapi("POST", path, body)
        answers: dict[str, FreeBusy] = {}
        for info in data.get("scheduleInformation") or []:
            user_id = staff_of.get(info.get("userId")) if isinstance(info, dict) else None
            if user_id is None:
                continue
            answers[user_id] = FreeBusy(
                user_id, busy_intervals(info.get("scheduleItems")), error_text(info)
            )
        missing = "DingTalk did not answer for this person"
        return {u: answers.get(u) or FreeBusy(u, (), missing) for u in user_ids}

    async def create_event(
        self,
        organizer: str,
        summary: str,
        start: datetime,
        end: datetime,
        attendees: list[str],
        *,
        client_token: str,
        location: str | None = None,
        description: str | None = None,
    ) -> CalendarEvent:
        """An event on the organizer's primary calendar. ``client_token``: the caller's key
        for this one event, the same on any retry after ``timeout_after_send``."""
        if not client_token:
            raise WorkspaceError("invalid", None, None, "an event needs a client token")
        union = await self._ids.union_id(organizer)
        body: dict[str, Any] = {
            "summary": summary,
            "start": {"dateTime": iso_ms(start), "timeZone": "UTC"},
            "end": {"dateTime": iso_ms(end), "timeZone": "UTC"},
            "attendees": [
                {"id": u, "isOptional": False} for u in await self._ids.union_ids(attendees)
            ],
        }
        if location:
            body["location"] = {"displayName": location}
        if description:
            body["description"] = description
        path = f"/v1.0/calendar/users/{segment(union)}/calendars/primary/events"
        data = await self._calls.openapi(
            "POST", path, body, headers={"x-client-token": client_token}
        )
        return await self._event(data)

    async def get_event(self, organizer: str, event_id: str) -> CalendarEvent:
        union = await self._ids.union_id(organizer)
        path = f"/v1.0/calendar/users/{segment(union)}/calendars/primary/events/{segment(event_id)}"
        return await self._event(await self._calls.openapi("GET", path))

    async def list_events(
        self, organizer: str, start: datetime, end: datetime, *, pages: int = 5
    ) -> list[CalendarEvent]:
        """The organizer's primary-calendar events overlapping ``[start, end)``, a few pages
        at most (how an event whose create's answer was lost is found again)."""
        union = await self._ids.union_id(organizer)
        path = f"/v1.0/calendar/users/{segment(union)}/calendars/primary/events"
        params = {"timeMin": iso_ms(start), "timeMax": iso_ms(end), "maxResults": "100"}
        events: list[CalendarEvent] = []
        for _ in range(pages):
            data = await self._calls.openapi("GET", path, params=params)
            for item in data.get("events") or []:
                if isinstance(item, dict) and text_or_none(item.get("id")):
                    events.append(await self._event(item))
            token = text_or_none(data.get("nextToken"))
            if token is None:
                break
            params = {**params, "nextToken": token}
        return events

    async def _event(self, data: dict[str, Any]) -> CalendarEvent:
        event_id = text_or_none(data.get("id"))
        if event_id is None:
            raise WorkspaceError("invalid", 200, None, "the event answer has no id")
        organizer = data.get("organizer") if isinstance(data.get("organizer"), dict) else {}
        people = [a.get("id") for a in data.get("attendees") or [] if isinstance(a, dict)]
        organizer_ids = await self._ids.staff_ids(strings([organizer.get("id")]))
        location = data.get("location") if isinstance(data.get("location"), dict) else {}
        meeting = data.get("onlineMeetingInfo")
        return CalendarEvent(
            event_id=event_id,
            summary=text_or_none(data.get("summary")),
            start=calendar_time(data.get("start")),
            end=calendar_time(data.get("end")),
            organizer=organizer_ids[0] if organizer_ids else None,
            attendees=tuple(await self._ids.staff_ids(strings(people))),
            location=text_or_none(location.get("displayName")),
            meeting_url=text_or_none(meeting.get("url")) if isinstance(meeting, dict) else None,
        )

    # ------------------------------------------------------------------ to-do

    async def list_todos(self, user_id: str) -> list[Todo]:
        """The person's open to-dos (``isDone: false``), a few pages at most."""
        union = await self._ids.union_id(user_id)
        path = f"/v1.0/todo/users/{segment(union)}/tasks/list"
        todos: list[Todo] = []
        body: dict[str, Any] = {"isDone": False}
        for _ in range(TODO_PAGES_MAX):
            data = await self._calls.openapi("POST", path, body)
            for card in data.get("todoCards") or []:
                if isinstance(card, dict) and text_or_none(card.get("taskId")):
                    todos.append(await self._todo(card, id_key="taskId", done_key="isDone"))
            token = text_or_none(data.get("nextToken"))
            if token is None:
                break
            body = {"isDone": False, "nextToken": token}
        return todos

    async def create_todo(
        self,
        creator: str,
        subject: str,
        executors: list[str],
        *,
        source_id: str,
        due: datetime | None = None,
        description: str | None = None,
    ) -> Todo:
        """A to-do created by ``creator``. ``source_id``: the caller's key for this one
        to-do; after ``timeout_after_send`` read it back with ``todo_by_source``."""
        if not source_id:
            raise WorkspaceError("invalid", None, None, "a to-do needs a source id")
        union = await self._ids.union_id(creator)
        body: dict[str, Any] = {
            "subject": subject,
            "executorIds": await self._ids.union_ids(executors),
            "creatorId": union,
            "sourceId": source_id,
        }
        if due is not None:
            if due.tzinfo is None:
                raise WorkspaceError("invalid", None, None, "a due time without a time zone")
            body["dueTime"] = int(due.timestamp() * 1000)
        if description:
            body["description"] = description
        path = f"/v1.0/todo/users/{segment(union)}/tasks"
        data = await self._calls.openapi("POST", path, body, params={"operatorId": union})
        return await self._todo(data)

    async def get_todo(self, user_id: str, task_id: str) -> Todo:
        union = await self._ids.union_id(user_id)
        path = f"/v1.0/todo/users/{segment(union)}/tasks/{segment(task_id)}"
        return await self._todo(await self._calls.openapi("GET", path))

    async def todo_by_source(self, user_id: str, source_id: str) -> Todo:
        """The to-do created under ``source_id`` (not_found when there is none): the read-
        back that settles a create that timed out."""
        union = await self._ids.union_id(user_id)
        path = f"/v1.0/todo/users/{segment(union)}/tasks/sources/{segment(source_id)}"
        data = await self._calls.openapi("GET", path)
        if not text_or_none(data.get("id")):
            raise WorkspaceError("not_found", 200, None, f"no to-do with source {source_id}")
        return await self._todo(data)

    async def complete_todo(self, user_id: str, task_id: str) -> None:
        """Mark it done. Setting ``done`` is idempotent, so after ``timeout_after_send``
        the caller may simply ask again."""
        union = await self._ids.union_id(user_id)
        path = f"/v1.0/todo/users/{segment(union)}/tasks/{segment(task_id)}"
        data = await self._calls.openapi("PUT", path, {"done": True}, params={"operatorId": union})
        if data.get("result") is not True:
            raise WorkspaceError("invalid", 200, None, "DingTalk did not confirm the update")

    async def _todo(
        self, data: dict[str, Any], *, id_key: str = "id", done_key: str = "done"
    ) -> Todo:
        task_id = text_or_none(data.get(id_key))
        if task_id is None:
            raise WorkspaceError("invalid", 200, None, "the to-do answer has no id")
        creator = await self._ids.staff_ids(strings([data.get("creatorId")]))
        return Todo(
            task_id=task_id,
            subject=text_or_none(data.get("subject")),
            done=data.get(done_key) is True,
            due=from_ms(data.get("dueTime")),
            creator=creator[0] if creator else None,
            executors=tuple(await self._ids.staff_ids(strings(data.get("executorIds")))),
            source_id=text_or_none(data.get("sourceId")),
        )
