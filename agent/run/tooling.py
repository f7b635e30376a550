"""The host's side of a model's tool calls: what is enabled, the reads run at once, and
the writes made acts.

A run's ``RunTools`` offers the model only the tools the configuration enables (``tools``
in dta.toml). A call to any other tool, or with arguments its schema refuses, is answered
with an error code (``tool_not_allowed``, ``schema_invalid``) and nothing runs. Reads act
for the asker and nobody else: ``dingtalk.todo.list`` lists the asker's to-dos whatever
the arguments say, because who is asking comes from the event, never from the model.
A write becomes an ``ActionRequest`` of kind ``act`` through the acting step (the action
gate, then execution and read-back, or an approval); the model is told what became of it —
verified, waiting for the asker's approval, or refused with its reason code — as data.

Every call is logged on the run's evidence by the provider (name, ok or its code, result
size, time), which ``dta trace`` shows.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from agent.contracts import ActionKind, Event, ReceiptStatus, ToolCall, ToolResult, ToolSpec
from agent.mcp.catalog import ToolCatalog
from skills.tools.builtin import argument_problem

log = logging.getLogger("dta.tools")


class Workspace(Protocol):
    """The robot app's reads of the DingTalk workspace (``agent.dingtalk.workspace``)."""

    async def search_users(self, name: str, size: int = 10) -> list[Any]: ...

    async def free_busy(self, user_ids: list[str], start: datetime, end: datetime) -> Any: ...

    async def list_todos(self, user_id: str) -> list[Any]: ...


class RunLedger(Protocol):
    """What a run did so far (``agent.run.outcome.RunOutcome``): tools add to it."""

    receipts: list[Any]
    backing: list[str]
    awaiting: list[str]


# A write, as the acting step takes it: the request in, the run's ledger updated.
ActStep = Callable[[dict[str, Any]], Awaitable[Any]]


class _NotATime(ValueError):
    pass


class _ToolFailed(Exception):
    """A source's own failure, with its code (an MCP server that is down, say)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def _when(text: str) -> datetime:
    """An ISO 8601 time with its UTC offset (a time without one means nothing certain)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _NotATime(f"{text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise _NotATime(f"{text!r} has no UTC offset (e.g. +08:00)")
    return moment


def plain(value: Any) -> Any:
    """A typed result as JSON-able data (dataclasses and pydantic models alike)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class ToolBox:
    """The enabled tools, where they are found and the workspace they read, from which
    each run gets its own."""

    enabled: list[str]
    workspace: Workspace
    catalog: ToolCatalog = field(default_factory=ToolCatalog)

    def for_run(
        self, event: Event, ledger: RunLedger | None = None, act: ActStep | None = None
    ) -> RunTools:
        return RunTools(self.enabled, self.workspace, event, ledger, act, self.catalog)


class RunTools:
    """The tools one run may call (a ``skills.tools.ToolRunner``). Writes need ``act``
    (the acting step for this run) and are refused without it."""

    def __init__(
        self,
        enabled: list[str],
        workspace: Workspace,
        event: Event,
        ledger: RunLedger | None = None,
        act: ActStep | None = None,
        catalog: ToolCatalog | None = None,
    ) -> None:
        self.catalog = catalog or ToolCatalog()
        # what is enabled and can be had now (a dead MCP server's tools are left out)
        self.enabled = [name for name in enabled if self.catalog.spec(name) is not None]
        self.workspace = workspace
        self.asker = event.actor.user_id
        self.ledger = ledger
        self.act = act
        self._reads: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "dingtalk.directory.search": lambda a: workspace.search_users(a["name"]),
            "dingtalk.calendar.free_busy": lambda a: workspace.free_busy(
                a["user_ids"], _when(a["start"]), _when(a["end"])
            ),
            "dingtalk.todo.list": lambda a: workspace.list_todos(self.asker),
        }

    def specs(self) -> list[ToolSpec]:
        return [spec for name in self.enabled if (spec := self.catalog.spec(name)) is not None]

    async def call(self, call: ToolCall) -> ToolResult:
        started = time.perf_counter()
        result = await self._call(call)
        result.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        return result

    async def _call(self, call: ToolCall) -> ToolResult:
        def failed(code: str, detail: str) -> ToolResult:
            return ToolResult(
                call_id=call.call_id, name=call.name, ok=False, error=code, detail=detail
            )

        spec = self.catalog.spec(call.name)
        if call.name not in self.enabled or spec is None:
            if spec is not None and spec.effect == "write" and self.act is not None:
                return await self._write(call)  # the gate refuses it, with a receipt
            return failed("tool_not_allowed", f"{call.name!r} is not enabled for this robot")
        problem = argument_problem(spec, call.arguments)
        if problem is not None:
            return failed("schema_invalid", problem)
        read = self._reads.get(call.name)
        if read is None and spec.effect == "read":
            read = self._mcp_read(call.name)
        if read is None:  # a write: only ever an act through the action gate
            if self.act is None or self.ledger is None:
                return failed("tool_not_allowed", f"{call.name!r} writes; no acts here")
            try:
                for key in ("start", "end", "due"):
                    if key in call.arguments:
                        _when(call.arguments[key])
            except _NotATime as exc:
                return failed("schema_invalid", str(exc))
            return await self._write(call)
        try:
            data = await read(call.arguments)
        except _NotATime as exc:
            return failed("schema_invalid", str(exc))
        except Exception as exc:  # a failed read is the model's to know, not a crash
            kind = getattr(exc, "kind", None) or "failed"
            log.warning("tool read failed", extra={"tool": call.name, "error": kind})
            return failed(str(kind), str(exc)[:300] or type(exc).__name__)
        if self.ledger is not None:
            self.ledger.backing.append(f"read {call.name}")
        return ToolResult(call_id=call.call_id, name=call.name, ok=True, data=plain(data))

    def _mcp_read(self, name: str) -> Callable[[dict[str, Any]], Awaitable[Any]] | None:
        mcp = self.catalog.mcp
        if mcp is None:
            return None

        async def read(arguments: dict[str, Any]) -> Any:
            answer = await mcp.call(name, arguments)
            if not answer.ok:
                raise _ToolFailed(answer.error or "mcp_error", answer.detail or "")
            return answer.data

        return read

    async def _write(self, call: ToolCall) -> ToolResult:
        """The call as an act through the acting step, and what became of it."""
        assert self.act is not None and self.ledger is not None
        ledger = self.ledger
        seen, waiting = len(ledger.receipts), len(ledger.awaiting)
        await self.act({"kind": "act", "tool": call.name, "arguments": call.arguments})
        if len(ledger.awaiting) > waiting:
            return ToolResult(
                call_id=call.call_id,
                name=call.name,
                ok=True,
                data={
                    "status": "awaiting_approval",
                    "approval": ledger.awaiting[-1],
                    "note": "nothing is done yet: the asker was asked to approve it;"
                    " say that it waits for their approval, never that it is done",
                },
            )
        acts = [r for r in ledger.receipts[seen:] if r.kind is ActionKind.ACT]
        if not acts:
            return ToolResult(
                call_id=call.call_id, name=call.name, ok=False, error="not_run", detail="no act"
            )
        last = acts[-1]
        if last.status is ReceiptStatus.VERIFIED:
            data = {"status": "verified", "id": last.evidence.object_id}
            return ToolResult(call_id=call.call_id, name=call.name, ok=True, data=data)
        if last.status is ReceiptStatus.ACCEPTED:  # done, by the tool's word only
            data = {"status": "done, not read back", "result": last.evidence.readback}
            return ToolResult(call_id=call.call_id, name=call.name, ok=True, data=data)
        error = last.reason or last.status.value
        detail = last.evidence.detail or last.evidence.error
        return ToolResult(
            call_id=call.call_id, name=call.name, ok=False, error=error, detail=detail
        )
