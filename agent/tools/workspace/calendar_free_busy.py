"""``dingtalk.calendar.free_busy``: when the given colleagues are busy."""

from __future__ import annotations

from typing import Any

from agent.contracts import ToolSpec
from agent.tools.base import STAFF_IDS, TIME, ReadTool, WorkspaceReads, moment, object_schema


async def read(ws: WorkspaceReads, asker: str, args: dict[str, Any]) -> Any:
    return await ws.free_busy(args["user_ids"], moment(args["start"]), moment(args["end"]))


TOOL = ReadTool(
    ToolSpec(
        name="dingtalk.calendar.free_busy",
        description="When the given colleagues are busy between start and end.",
        parameters=object_schema(
            {"user_ids": STAFF_IDS, "start": TIME, "end": TIME},
            ["user_ids", "start", "end"],
        ),
        effect="read",
        people_args=["user_ids"],
    ),
    read,
)
