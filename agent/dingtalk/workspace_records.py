"""What the workspace calls return (``agent/dingtalk/workspace.py``): people, free/busy,
calendar events and to-dos, typed; and how DingTalk's JSON values are read into them (a
value of the wrong shape reads as nothing, never as an error).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent.dingtalk.workspace_ids import WorkspaceError


@dataclass(frozen=True)
class Person:
    user_id: str
    name: str | None
    title: str | None
    department: str | None = None  # its departments' names, as the directory gives them


@dataclass(frozen=True)
class BusyInterval:
    start: datetime
    end: datetime
    status: str | None  # DingTalk's word, e.g. "BUSY", "TENTATIVE"


@dataclass(frozen=True)
class FreeBusy:
    user_id: str
    busy: tuple[BusyInterval, ...]
    error: str | None = None  # DingTalk could not say for this person (then busy is empty)


@dataclass(frozen=True)
class CalendarEvent:
    event_id: str
    summary: str | None
    start: datetime | None
    end: datetime | None
    organizer: str | None  # staff id
    attendees: tuple[str, ...]  # staff ids; unionIds that are nobody here are left out
    location: str | None = None
    meeting_url: str | None = None


@dataclass(frozen=True)
class Todo:
    task_id: str
    subject: str | None
    done: bool
    due: datetime | None
    creator: str | None  # staff id
    executors: tuple[str, ...]  # staff ids (the list call does not give them: empty)
    source_id: str | None = None


def iso_ms(moment: datetime) -> str:
    """UTC ISO-8601 with milliseconds: DingTalk's calendar refuses it without them
    (400 ``InvalidParameter.ParsedISO8601TimestampError``)."""
    if moment.tzinfo is None:
        raise WorkspaceError("invalid", None, None, "a time without a time zone")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def calendar_time(value: object) -> datetime | None:
    """A calendar time ``{dateTime, timeZone}`` (or an all-day ``{date}``, as UTC midnight)."""
    if not isinstance(value, dict):
        return None
    text = value.get("dateTime") or value.get("date")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def from_ms(value: object) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(value / 1000, UTC)
    return None


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def busy_intervals(items: object) -> tuple[BusyInterval, ...]:
    busy = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or str(item.get("status", "")).lower() == "free":
            continue
        start, end = calendar_time(item.get("start")), calendar_time(item.get("end"))
        if start is not None and end is not None:
            busy.append(BusyInterval(start, end, text_or_none(item.get("status"))))
    return tuple(busy)


def error_text(info: dict[str, Any]) -> str | None:
    error = info.get("error")
    return str(error)[:200] if error else None
