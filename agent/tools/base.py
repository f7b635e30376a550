"""What a built-in workspace tool is: its spec and its call, in one object.

A read tool (``ReadTool``) is its spec and ``read``: run at once, for the asker only (who is
asking comes from the event, never from the model). A write tool (``WriteTool``) is its
spec and an act's three parts: ``write`` makes the change (with the act's idempotency
token), ``read_back`` reads the object back — by the id the write's answer gave, or, after a
write whose answer was lost, by what identifies it without one (a to-do by its
``sourceId``; an event by its summary and times in the organizer's calendar, listed in its
window: DingTalk answers with no client token, so a second *create* is never the read) —
and ``people`` names whose unionIds the request needs before it may be sent. A read-back
that finds nothing raises ``NotThere``; any other failure means it could not tell.

Each tool is one module of ``agent/tools/workspace/`` (its ``TOOL``); the calls go over the
robot app's client (``agent/dingtalk/workspace.py``), through the protocols below.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from agent.contracts import ToolSpec


class WorkspaceReads(Protocol):
    """The robot app's reads of the DingTalk workspace (``agent.dingtalk.workspace``)."""

    async def search_users(self, name: str, size: int = 10) -> list[Any]: ...

    async def free_busy(self, user_ids: list[str], start: datetime, end: datetime) -> Any: ...

    async def list_todos(self, user_id: str) -> list[Any]: ...

    async def get_todo(self, user_id: str, task_id: str) -> Any: ...


class WorkspaceWrites(Protocol):
    """The robot app's writes and the reads that verify them (agent/dingtalk/workspace.py)."""

    async def prepare(self, user_ids: list[str]) -> None: ...

    def departure(self) -> AbstractAsyncContextManager[Any]: ...

    async def create_todo(
        self,
        creator: str,
        subject: str,
        executors: list[str],
        *,
        source_id: str,
        due: datetime | None = None,
        description: str | None = None,
    ) -> Any: ...

    async def todo_by_source(self, user_id: str, source_id: str) -> Any: ...

    async def get_todo(self, user_id: str, task_id: str) -> Any: ...

    async def complete_todo(self, user_id: str, task_id: str) -> None: ...

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
    ) -> Any: ...

    async def get_event(self, organizer: str, event_id: str) -> Any: ...

    async def list_events(self, organizer: str, start: datetime, end: datetime) -> list[Any]: ...


@dataclass(frozen=True)
class Done:
    """What a write or a read found: the object's id, whether a read saw it as the act
    meant it, and what was read (in words, for the receipt)."""

    object_id: str
    seen: bool
    readback: str


class NotThere(Exception):
    """The read found no such object (or not in the state the act meant)."""


class NotATime(ValueError):
    """An argument meant as a time that is not one (the call is ``schema_invalid``)."""


@dataclass(frozen=True)
class Touched:
    """What reading a write's object said before it is judged: who it touches, its name,
    why the asker may not (``checked`` false: it could not be read, so nobody can tell)."""

    audience: list[str] | None = None
    name: str | None = None
    problem: str | None = None
    checked: bool = True


# (workspace, asker, arguments) → what was read
Read = Callable[[WorkspaceReads, str, dict[str, Any]], Awaitable[Any]]
# (workspace, asker, arguments, the act's token) → what the write did
Write = Callable[[WorkspaceWrites, str, dict[str, Any], str], Awaitable[Done]]
# (workspace, asker, arguments, the act's token, the object's id if the write gave one)
ReadBack = Callable[[WorkspaceWrites, str, dict[str, Any], str, str | None], Awaitable[Done]]
# (workspace, asker, arguments) → who the act touches, read from its object
Touches = Callable[[WorkspaceReads, str, dict[str, Any]], Awaitable[Touched]]


@dataclass(frozen=True)
class ReadTool:
    spec: ToolSpec
    read: Read
    finds_people: bool = False  # what it returns are people this run may now name


@dataclass(frozen=True)
class WriteTool:
    spec: ToolSpec
    write: Write
    read_back: ReadBack
    people: Callable[[str, dict[str, Any]], list[str]]  # whose unionIds the request needs
    # The argument that is the act's object, and whether it is wording (compared loosely)
    # or an id (compared exactly): how the same act is told however worded
    # (agent/acts/identity.py). None: the tool has no object argument.
    object_arg: str | None = None
    object_is_wording: bool = False
    # Who it touches read from the object before it is judged (None: from its arguments).
    touches: Touches | None = None
    # The argument that, left out, means the asker (a to-do without executors is the
    # asker's own): what an approval shows in its place (agent/acts/shown.py).
    asker_when_absent: str | None = None


WorkspaceTool = ReadTool | WriteTool


def moment(text: str) -> datetime:
    """An ISO 8601 time with its UTC offset (a time without one means nothing certain)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise NotATime(f"{text!r} is not an ISO 8601 time") from None
    if value.tzinfo is None:
        raise NotATime(f"{text!r} has no UTC offset (e.g. +08:00)")
    return value


def when(text: Any) -> datetime | None:
    """An optional time argument the schema and the host already checked."""
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


def absent(exc: Exception) -> bool:
    """The client's failure says there is no such object."""
    return getattr(exc, "kind", None) == "not_found"


def with_people(key: str) -> Callable[[str, dict[str, Any]], list[str]]:
    """The asker and the staff ids the argument ``key`` names (a write's ``people``)."""

    def people(asker: str, args: dict[str, Any]) -> list[str]:
        return sorted({asker, *(str(v) for v in args.get(key) or [])})

    return people


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# Argument shapes are fixed in ``../shared/lab-cases.md`` ("Workspace tools and approvals"):
# ids are staff ids, times ISO 8601.
STAFF_IDS = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20}
TIME = {
    "type": "string",
    "description": "ISO 8601 with a UTC offset, e.g. 2026-12-03T10:00:00+08:00",
}
