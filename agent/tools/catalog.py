"""Every tool a run may be offered, by name: the built-in DingTalk ones and the live MCP
servers' (``mcp.<server>.<tool>``). A dead server's tools are not in it."""

from __future__ import annotations

from dataclasses import dataclass

from agent.contracts import ToolSpec
from agent.tools.builtin import BUILTIN
from agent.tools.mcp.sources import McpSources


@dataclass(frozen=True)
class ToolCatalog:
    mcp: McpSources | None = None

    def spec(self, name: str) -> ToolSpec | None:
        builtin = BUILTIN.get(name)
        if builtin is not None:
            return builtin
        return self.mcp.spec(name) if self.mcp is not None else None
