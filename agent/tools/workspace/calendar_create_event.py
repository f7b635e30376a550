"""``dingtalk.calendar.create_event``: an event with attendees, made with the act's token as
its ``x-client-token``; read back by its id, or found in the organizer's calendar in its
window when the create's answer was lost (never created again)."""

from __future__ import annotations

from typing import Any

from agent.contracts import ToolSpec
from agent.tools.base import (
    STAFF_IDS,
    TIME,
    Done,
    NotThere,
    WorkspaceWrites,
    WriteTool,
    absent,
    object_schema,
    when,
    with_people,
)
from gates.claims_text import normalised


async def write(ws: WorkspaceWrites, asker: str, args: dict[str, Any], token: str) -> Done:
    start, end = when(args.get("start")), when(args.get("end"))
    assert start is not None and end is not None  # the schema and the host checked
    made = await ws.create_event(
        asker,
        str(args["summary"]),
        start,
        end,
        list(args.get("attendees") or []),
        client_token=token,
        location=args.get("location"),
    )
    return Done(str(made.event_id), False, f"event {made.event_id} created")


async def read_back(
    ws: WorkspaceWrites, asker: str, args: dict[str, Any], token: str, made: str | None
) -> Done:
    """By its id when the create answered one; else among the organizer's events in its
    window, the one they organise with its summary, times and attendees (DingTalk gives no
    client token back, so these are what tells it from an event the person already had)."""
    if made is not None:
        try:
            seen = await ws.get_event(asker, made)
        except Exception as exc:
            if absent(exc):
                raise NotThere(f"event {made} not found") from None
            raise
        return Done(str(seen.event_id), True, f"event {seen.event_id} read")
    start, end = when(args.get("start")), when(args.get("end"))
    assert start is not None and end is not None
    summary = normalised(str(args.get("summary") or ""))
    people = set(args.get("attendees") or [])
    for event in await ws.list_events(asker, start, end):
        same_time = event.start == start and event.end == end
        organized = event.organizer in (None, asker)  # one they only attend is not it
        invited = people <= {*event.attendees, asker}
        if same_time and organized and invited and normalised(event.summary or "") == summary:
            return Done(str(event.event_id), True, f"event {event.event_id} found in its window")
    raise NotThere("no event with its summary, times and attendees on the organizer's calendar")


TOOL = WriteTool(
    ToolSpec(
        name="dingtalk.calendar.create_event",
        description="Create a calendar event with attendees (needs their approval rules).",
        parameters=object_schema(
            {
                "summary": {"type": "string", "minLength": 1},
                "start": TIME,
                "end": TIME,
                "attendees": STAFF_IDS,
                "location": {"type": "string"},
            },
            ["summary", "start", "end", "attendees"],
        ),
        effect="write",
        affects_others=True,
        label="创建日程",
        people_args=["attendees"],
        effects=["event"],  # and its invitations: a message to each attendee
        idempotency="client_token",
        readback="GET the event by its id on the organizer's primary calendar",
    ),
    write,
    read_back,
    with_people("attendees"),
    object_arg="summary",
    object_is_wording=True,
)
