"""``dingtalk.directory.search``: colleagues by name (the people this run may then name)."""

from __future__ import annotations

from typing import Any

from agent.contracts import ToolSpec
from agent.tools.base import ReadTool, WorkspaceReads, object_schema

NAME = "dingtalk.directory.search"


async def read(ws: WorkspaceReads, asker: str, args: dict[str, Any]) -> Any:
    return await ws.search_users(args["name"])


TOOL = ReadTool(
    ToolSpec(
        name=NAME,
        description="Find colleagues by name: their staff ids, names and titles.",
        parameters=object_schema({"name": {"type": "string", "minLength": 1}}, ["name"]),
        effect="read",
        people_args=[],
    ),
    read,
    finds_people=True,
)
