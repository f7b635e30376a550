"""What a provider is handed to call tools: the enabled tools' specs, and ``call``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agent.contracts import ToolCall, ToolResult, ToolSpec


@runtime_checkable
class ToolRunner(Protocol):
    """The host's side of a tool call. ``call`` never raises for a tool's own failure: a
    refused, invalid or failing call is a ``ToolResult`` with ``ok`` false and a code."""

    def specs(self) -> list[ToolSpec]: ...

    async def call(self, call: ToolCall) -> ToolResult: ...
