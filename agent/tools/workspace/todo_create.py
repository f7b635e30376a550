"""``dingtalk.todo.create``: a to-do (the asker's own without executors), made with the act's
token as its ``sourceId`` and read back by it."""

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


async def write(ws: WorkspaceWrites, asker: str, args: dict[str, Any], token: str) -> Done:
    todo = await ws.create_todo(
        asker,
        str(args["subject"]),
        list(args.get("executors") or [asker]),
        source_id=token,
        due=when(args.get("due")),
        description=args.get("description"),
    )
    return Done(str(todo.task_id), False, f"to-do {todo.task_id} created")


async def read_back(
    ws: WorkspaceWrites, asker: str, args: dict[str, Any], token: str, made: str | None
) -> Done:
    try:
        seen = await ws.todo_by_source(asker, token)
    except Exception as exc:
        if absent(exc):
            raise NotThere(f"no to-do with sourceId {token}") from None
        raise
    if seen is None or (made is not None and seen.task_id != made):
        raise NotThere(f"no to-do {made or ''} with sourceId {token}".replace("  ", " "))
    return Done(str(seen.task_id), True, f"to-do {seen.task_id} found by sourceId")


TOOL = WriteTool(
    ToolSpec(
        name="dingtalk.todo.create",
        description="Create a to-do; without executors it is the asker's own.",
        parameters=object_schema(
            {
                "subject": {"type": "string", "minLength": 1},
                "executors": STAFF_IDS,
                "due": TIME,
                "description": {"type": "string"},
            },
            ["subject"],
        ),
        effect="write",
        label="创建待办",
        people_args=["executors"],
        effects=["todo"],  # and DingTalk's notice to each executor
        idempotency="source_id",
        readback="GET the to-do by its sourceId",
    ),
    write,
    read_back,
    with_people("executors"),
    object_arg="subject",
    object_is_wording=True,
    asker_when_absent="executors",
)
