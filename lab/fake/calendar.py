"""The fake DingTalk's calendar endpoints (calendar_1_0; dingtalk-workspace-apis.md §4).

- ``POST /v1.0/calendar/users/{unionId}/calendars/primary/events`` — ``summary*``,
  ``start*`` / ``end*`` (``{dateTime, timeZone}``, or ``{date}`` for an all-day event),
  ``attendees[{id: unionId}]``, ``location{displayName}``, ``description``, ``extra`` (a
  map of strings: kept, never answered back — GetEvent's and ListEvents' answers have no
  such field). A time without milliseconds is HTTP 400
  ``InvalidParameter.ParsedISO8601TimestampError``, as b57 saw. Header ``x-client-token``:
  a repeat with a token this organizer already used answers the first event and makes none
  (the fake's reading; the real semantics are undocumented) — unless the platform keeps
  every create (the ``{"calendar_create": {"dedupe": false}}`` mode), when each create
  makes a new event. The token is never answered back either.
- ``GET …/events/{eventId}`` — one event; an unknown one is 404 (the fake's choice).
- ``GET …/events?timeMin&timeMax&maxResults&nextToken`` (ListEvents) →
  ``{events: [event…], nextToken}``: the events on the person's primary calendar (organised
  or attended) overlapping ``[timeMin, timeMax)``, by start; each in GetEvent's shape.
  ``timeMin`` / ``timeMax`` are ISO-8601 with milliseconds (as create's; either may be
  left out, leaving that side open; timeMax before timeMin is 400); ``maxResults`` 1–100,
  default 100 (the SDK's "最大100个，默认100个"; outside that, 400); ``nextToken`` is
  opaque, given while more events remain (``null`` on the last page, as b57 shows), and
  good only for the query it came from (else 400). ``syncToken``, ``showDeleted``,
  ``seriesMasterId``, ``maxAttendees`` are accepted and ignored.
- ``POST /v1.0/calendar/users/{unionId}/querySchedule`` ``{startTime, endTime, userIds}`` →
  ``scheduleInformation[{userId, scheduleItems[{start, end, status: "BUSY"}], error}]``,
  from the events the fake holds (organised or attended, overlapping the window).

Faults: ``calendar_create`` (``delivered``, ``applied_then_timeout`` and ``applied_late``
allowed, and the ``dedupe`` mode), ``calendar_get``, ``calendar_list``,
``calendar_schedule``; the keys of ``lab.fake.workspace``. Every call here counts as
``calendar`` in ``platform.calls``.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import Any

from aiohttp import web

from lab.fake.http import _nonempty_str, _reject_api
from lab.fake.workspace import (
    answer_fault,
    authentic,
    body_object,
    dedupes,
    id_list,
    require,
    take_fault,
)
from lab.fake.workspace_state import FakeEvent, parse_iso_ms

SCOPES = {"write": "Calendar.Event.Write", "read": "Calendar.Event.Read"}
MAX_SCHEDULE_USERS = 20  # the fake's cap; DingTalk's own is not documented here
LIST_MAX = 100  # ListEvents' maxResults: "最大100个，默认100个" (SDK calendar_1_0)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_BAD_TIME = "InvalidParameter.ParsedISO8601TimestampError"


def _moment(body: dict[str, Any], name: str) -> tuple[dict[str, Any], datetime]:
    """``start`` / ``end`` as given, and the instant it stands for."""
    value = body.get(name)
    if not isinstance(value, dict):
        _reject_api(400, f"Missing{name}", f"{name} is mandatory for this action.")
    if "dateTime" in value:
        moment = parse_iso_ms(value["dateTime"])
        if moment is None:
            _reject_api(400, _BAD_TIME, f"{name}.dateTime is not ISO-8601 with milliseconds")
        return dict(value), moment
    date = value.get("date")
    if isinstance(date, str) and _DATE.match(date):
        return dict(value), datetime.fromisoformat(f"{date}T00:00:00+00:00")
    _reject_api(400, _BAD_TIME, f"{name} needs dateTime (or date for an all-day event)")


def _attendees(body: dict[str, Any]) -> list[str]:
    value = body.get("attendees", [])
    if not isinstance(value, list) or not all(
        isinstance(a, dict) and _nonempty_str(a.get("id")) for a in value
    ):
        _reject_api(400, "InvalidParameter.attendees", "attendees must be [{id: unionId}]")
    return [a["id"] for a in value]


def _event_fields(body: dict[str, Any]) -> dict[str, Any]:
    require(body, ("summary",))
    if not _nonempty_str(body["summary"]):
        _reject_api(400, "InvalidParameter.summary", "summary must be a non-empty string")
    start, start_at = _moment(body, "start")
    end, end_at = _moment(body, "end")
    if end_at < start_at:
        _reject_api(400, "InvalidParameter.end", "end must not be before start")
    location = body.get("location")
    place = location.get("displayName") if isinstance(location, dict) else None
    if location is not None and not _nonempty_str(place):
        _reject_api(400, "InvalidParameter.location", "location must be {displayName}")
    description = body.get("description")
    if description is not None and not isinstance(description, str):
        _reject_api(400, "InvalidParameter.description", "description must be a string")
    extra = body.get("extra")
    if extra is not None and not (
        isinstance(extra, dict) and all(isinstance(v, str) for v in extra.values())
    ):
        _reject_api(400, "InvalidParameter.extra", "extra must be a map of strings")
    return {
        "summary": body["summary"],
        "start": start,
        "end": end,
        "attendees": _attendees(body),
        "location": place,
        "description": description,
        "extra": None if extra is None else dict(extra),
    }


async def event_create(request: web.Request) -> web.Response:
    platform = authentic(request)
    organizer = request.match_info["unionId"]
    fields = _event_fields(await body_object(request))
    token = request.headers.get("x-client-token") or None
    dedupe = dedupes(platform, "calendar_create")

    def keep() -> FakeEvent:
        if token is not None and dedupe:
            held = platform.workspace.event_by_token(organizer, token)
            if held is not None:
                return held
        rest = {k: v for k, v in fields.items() if k != "summary"}
        return platform.workspace.add_event(
            organizer, fields["summary"], client_token=token, **rest
        )

    fault = take_fault(platform, "calendar_create")
    if fault is not None:
        return await answer_fault(platform, fault, keep, SCOPES["write"])
    return web.json_response(keep().answer())


async def event_get(request: web.Request) -> web.Response:
    platform = authentic(request)
    event = platform.workspace.event(request.match_info["unionId"], request.match_info["eventId"])
    if event is None:
        body = {"code": "eventNotFound", "message": "event not found"}
        return web.json_response({**body, "requestid": secrets.token_hex(8)}, status=404)
    fault = take_fault(platform, "calendar_get")
    if fault is not None:
        return await answer_fault(platform, fault, None, SCOPES["read"])
    return web.json_response(event.answer())


def _window_end(request: web.Request, name: str) -> datetime | None:
    text = request.query.get(name)
    if text is None:
        return None
    moment = parse_iso_ms(text)
    if moment is None:
        _reject_api(400, _BAD_TIME, f"{name} must be ISO-8601 with milliseconds")
    return moment


def _page_size(request: web.Request) -> int:
    text = request.query.get("maxResults")
    if text is None:
        return LIST_MAX
    if not text.isdigit() or not 1 <= int(text) <= LIST_MAX:
        _reject_api(400, "InvalidParameter.maxResults", f"maxResults must be 1 to {LIST_MAX}")
    return int(text)


async def event_list(request: web.Request) -> web.Response:
    """ListEvents: one page of the events on a person's primary calendar in the window."""
    platform = authentic(request)
    person = request.match_info["unionId"]
    start, end = _window_end(request, "timeMin"), _window_end(request, "timeMax")
    if start is not None and end is not None and end < start:
        _reject_api(400, "InvalidParameter.timeMax", "timeMax must not be before timeMin")
    size = _page_size(request)
    query = (person, request.query.get("timeMin"), request.query.get("timeMax"), size)
    token = request.query.get("nextToken")
    offset = 0
    if token:
        held = platform.workspace.page_offset(token, query)
        if held is None:
            _reject_api(400, "InvalidParameter.nextToken", "nextToken is not valid for this query")
        offset = held
    fault = take_fault(platform, "calendar_list")
    if fault is not None:
        return await answer_fault(platform, fault, None, SCOPES["read"])
    found = platform.workspace.calendar_of(person, start, end)
    page = found[offset : offset + size]
    more = offset + size < len(found)
    # the last page says ``nextToken: null``, as b57 shows a live answer
    token = platform.workspace.page_token(query, offset + size) if more else None
    return web.json_response({"events": [e.answer() for e in page], "nextToken": token})


async def query_schedule(request: web.Request) -> web.Response:
    platform = authentic(request)
    body = await body_object(request)
    require(body, ("startTime", "endTime", "userIds"))
    start, end = parse_iso_ms(body["startTime"]), parse_iso_ms(body["endTime"])
    if start is None or end is None:
        _reject_api(400, _BAD_TIME, "startTime and endTime must be ISO-8601 with milliseconds")
    if end < start:
        _reject_api(400, "InvalidParameter.endTime", "endTime must not be before startTime")
    people = id_list(body, "userIds")
    if len(people) > MAX_SCHEDULE_USERS:
        _reject_api(400, "InvalidParameter.userIds", f"at most {MAX_SCHEDULE_USERS} userIds")
    fault = take_fault(platform, "calendar_schedule")
    if fault is not None:
        return await answer_fault(platform, fault, None, SCOPES["read"])
    info = [
        {"userId": person, "scheduleItems": platform.workspace.busy(person, start, end)}
        for person in people
    ]
    return web.json_response({"scheduleInformation": info})


def calendar_routes() -> list[web.RouteDef]:
    users = "/v1.0/calendar/users/{unionId}"
    return [
        web.post(users + "/calendars/primary/events", event_create),
        web.get(users + "/calendars/primary/events", event_list),
        web.get(users + "/calendars/primary/events/{eventId}", event_get),
        web.post(users + "/querySchedule", query_schedule),
    ]
