"""``dingtalk.todo.list``: the asker's open to-dos, whatever the arguments say."""

from __future__ import annotations

from typing import Any

from agent.contracts import ToolSpec
from agent.tools.base import ReadTool, WorkspaceReads, object_schema


async def read(ws: WorkspaceReads, asker: str, args: dict[str, Any]) -> Any:
    return await ws.list_todos(asker)


TOOL = ReadTool(
    ToolSpec(
        name="dingtalk.todo.list",
        description="The asker's open to-dos: id, subject, due time.",
        parameters=object_schema({}, []),
        effect="read",
        people_args=[],
    ),
    read,
)
