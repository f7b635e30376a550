"""``dingtalk.todo.complete``: one of the asker's to-dos marked done; who it touches is the
to-do's own executors, read before it is judged."""

from __future__ import annotations

from typing import Any

from agent.contracts import ToolSpec
from agent.tools.base import (
    Done,
    NotThere,
    Touched,
    WorkspaceReads,
    WorkspaceWrites,
    WriteTool,
    absent,
    object_schema,
    with_people,
)


async def write(ws: WorkspaceWrites, asker: str, args: dict[str, Any], token: str) -> Done:
    todo_id = str(args["todo_id"])
    await ws.complete_todo(asker, todo_id)
    return Done(todo_id, False, f"to-do {todo_id} marked done")


async def read_back(
    ws: WorkspaceWrites, asker: str, args: dict[str, Any], token: str, made: str | None
) -> Done:
    try:
        todo = await ws.get_todo(asker, str(args["todo_id"]))
    except Exception as exc:
        if absent(exc):
            raise NotThere(f"to-do {args['todo_id']} not found") from None
        raise
    if not todo.done:
        raise NotThere(f"to-do {todo.task_id} is not done")
    return Done(str(todo.task_id), True, f"to-do {todo.task_id} done=True")


async def touches(ws: WorkspaceReads, asker: str, args: dict[str, Any]) -> Touched:
    """The to-do read: its executors are who it touches, its subject its name."""
    todo_id = str(args.get("todo_id") or "")
    try:
        todo = await ws.get_todo(asker, todo_id)
    except Exception as exc:  # cannot tell: not run, and said so (not "not yours")
        kind = getattr(exc, "kind", "failed")
        return Touched(problem=f"to-do {todo_id} could not be read ({kind})", checked=False)
    executors = sorted(set(getattr(todo, "executors", ()) or ()))
    creator = getattr(todo, "creator", None)
    if asker not in executors and creator != asker:
        return Touched(problem=f"to-do {todo_id} is neither the asker's nor made by them")
    subject = getattr(todo, "subject", None) or todo_id
    return Touched(audience=executors or [asker], name=subject)


TOOL = WriteTool(
    ToolSpec(
        name="dingtalk.todo.complete",
        description="Mark one of the asker's to-dos done.",
        parameters=object_schema({"todo_id": {"type": "string", "minLength": 1}}, ["todo_id"]),
        effect="write",
        label="完成待办",
        effects=["done", "update"],
        # who it touches is the to-do's own executors, read before it is judged
        people_args=[],
        idempotency="repeat_is_harmless",
        readback="GET the to-do and see done",
    ),
    write,
    read_back,
    with_people(""),
    object_arg="todo_id",
    object_is_wording=False,
    touches=touches,
)
