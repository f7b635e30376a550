"""The registry of a robot's tools: what is enabled (``ToolBox``), and the view one run
offers its model (``RunTools``, the host's side of a model's tool calls): the reads run at
once, the writes made acts.

A run's ``RunTools`` offers the model only the tools the configuration enables (``tools``
in dta.toml). A call to any other tool, or with arguments its schema refuses, is answered
with an error code (``tool_not_allowed``, ``schema_invalid``) and nothing runs. Reads act
for the asker and nobody else: ``dingtalk.todo.list`` lists the asker's to-dos whatever
the arguments say, because who is asking comes from the event, never from the model.
A write becomes an ``ActionRequest`` of kind ``act`` through the acting step (the action
gate, then execution and read-back, or an approval); the model is told what became of it —
verified, waiting for the asker's approval, or refused with its reason code — as data.

Every call is logged on the run's evidence by the provider (name, ok or its code, result
size, time), which ``dta trace`` shows. A run's view holds no call of its own: each
built-in tool's read is its module's (``agent/tools/workspace/``), found by name.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from agent.acts.told import for_model, outcome_of
from agent.contracts import ActOutcome, Event, RefusalReason, ToolCall, ToolResult, ToolSpec
from agent.tools.base import NotATime, WorkspaceReads, moment
from agent.tools.builtin import READS
from agent.tools.catalog import ToolCatalog
from agent.tools.schema import argument_problem
from gates.backing import Backing

log = logging.getLogger("dta.tools")


Workspace = WorkspaceReads  # the robot app's reads (agent.dingtalk.workspace)


class ActsSoFar(Protocol):
    """What a run's acts and look-ups did so far (``agent.run.outcome.ActLedger``)."""

    backing: list[Any]
    awaiting: list[str]
    asked: dict[str, dict[str, str]]
    told: list[Any]
    people: set[str]
    names: dict[str, str]


class ResultsSoFar(Protocol):
    """What the run's tools returned so far (``agent.run.outcome.Grounds``)."""

    results: list[str]
    shown: list[str]


class RunLedger(Protocol):
    """What a run did so far (``agent.run.outcome.RunOutcome``): tools add to it."""

    receipts: list[Any]
    acts: ActsSoFar
    grounds: ResultsSoFar


# A write, as the acting step takes it: the request in, the run's ledger updated.
ActStep = Callable[[dict[str, Any]], Awaitable[Any]]


class _ToolFailed(Exception):
    """A source's own failure, with its code (an MCP server that is down, say)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


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
        self,
        event: Event,
        ledger: RunLedger | None = None,
        act: ActStep | None = None,
        only: list[str] | None = None,
    ) -> RunTools:
        """``only``: the tools the run's skills allow (None: all the enabled ones)."""
        enabled = self.enabled if only is None else [n for n in self.enabled if n in only]
        return RunTools(enabled, self.workspace, event, ledger, act, self.catalog)


class RunTools:
    """The tools one run may call (a ``skills.providers.base.ToolRunner``). Writes need
    ``act`` (the acting step for this run) and are refused without it."""

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
        self.event_id = event.event_id
        self.ledger = ledger
        self.act = act

    def specs(self) -> list[ToolSpec]:
        return [spec for name in self.enabled if (spec := self.catalog.spec(name)) is not None]

    async def call(self, call: ToolCall) -> ToolResult:
        started = time.perf_counter()
        result = await self._call(call)
        result.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        if self.ledger is not None:  # what the model saw: its reply says it, never pastes it
            shown = plain(result.for_model())
            self.ledger.grounds.shown.append(json.dumps(shown, ensure_ascii=False, default=str))
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
        builtin = READS.get(call.name)  # a built-in read: its module's, for the asker
        read = partial(builtin.read, self.workspace, self.asker) if builtin else None
        if read is None and spec.effect == "read":
            if _names_people_undeclared(spec):
                return failed(
                    "tool_not_allowed",
                    f"{call.name!r} may read someone else's data: its [[mcp_servers]] entry"
                    " must declare which arguments name people (people = {…}) so it runs"
                    " for the asker only",
                )
            read = self._mcp_read(spec)
        if read is None:  # a write: only ever an act through the action gate
            if self.act is None or self.ledger is None:
                return failed("tool_not_allowed", f"{call.name!r} writes; no acts here")
            try:
                for key in ("start", "end", "due"):
                    if key in call.arguments:
                        moment(call.arguments[key])
            except NotATime as exc:
                return failed("schema_invalid", str(exc))
            return await self._write(call)
        try:
            data = await read(call.arguments)
        except NotATime as exc:
            return failed("schema_invalid", str(exc))
        except Exception as exc:  # a failed read is the model's to know, not a crash
            kind = getattr(exc, "kind", None) or "failed"
            log.warning("tool read failed", extra={"tool": call.name, "error": kind})
            return failed(str(kind), str(exc)[:300] or type(exc).__name__)
        if self.ledger is not None:
            self.ledger.acts.backing.append(Backing("read", label=call.name))
            self.ledger.grounds.results.append(
                json.dumps(plain(data), ensure_ascii=False, default=str)
            )
            if builtin is not None and builtin.finds_people:  # people this run may now name
                self._learn(data or [])
        return ToolResult(call_id=call.call_id, name=call.name, ok=True, data=plain(data))

    def _mcp_read(self, spec: ToolSpec) -> Callable[[dict[str, Any]], Awaitable[Any]] | None:
        """An MCP server's read, for the asker only: the arguments its configuration says
        name people are the asker's id, whatever the model put there."""
        mcp = self.catalog.mcp
        if mcp is None:
            return None
        properties = spec.parameters.get("properties") or {}

        async def read(arguments: dict[str, Any]) -> Any:
            bound = dict(arguments)
            for key in spec.people_args or ():
                shape = properties.get(key) or {}
                bound[key] = [self.asker] if shape.get("type") == "array" else self.asker
            answer = await mcp.call(spec.name, bound)
            if not answer.ok:
                raise _ToolFailed(answer.error or "mcp_error", answer.detail or "")
            return answer.data

        return read

    async def _write(self, call: ToolCall) -> ToolResult:
        """The call as an act through the acting step, and what became of it."""
        assert self.act is not None and self.ledger is not None
        ledger = self.ledger
        told, waiting, asked = (
            len(ledger.acts.told),
            len(ledger.acts.awaiting),
            dict(ledger.acts.asked),
        )
        await self.act({"kind": "act", "tool": call.name, "arguments": call.arguments})
        # what this call set (a second call of an approved act in the same run sets it anew)
        new = {a: how for a, how in ledger.acts.asked.items() if asked.get(a) is not how}
        approved = [a for a, how in new.items() if how["how"] == "approved"]
        if approved:
            data = {
                "status": "approved",
                "approval": approved[-1],
                "note": "the asker already approved this act and it is being carried out: say"
                " so, never that it is done or that it needs approval again",
            }
            return ToolResult(call_id=call.call_id, name=call.name, ok=True, data=data)
        if len(ledger.acts.awaiting) > waiting:
            approval = ledger.acts.awaiting[-1]
            data = {"status": "awaiting_approval", "approval": approval, **_asked(ledger, approval)}
            return ToolResult(call_id=call.call_id, name=call.name, ok=True, data=data)
        last = ledger.acts.told[-1] if len(ledger.acts.told) > told else None
        if last is None:
            return ToolResult(
                call_id=call.call_id, name=call.name, ok=False, error="not_run", detail="no act"
            )
        outcome = outcome_of(last)
        if outcome.may_have_happened or outcome is ActOutcome.FAILED:
            data = for_model(outcome, last, checkable=not call.name.startswith("mcp."))
            if last.event_id != self.event_id:
                data["earlier"] = "the same act was already asked for in an earlier message"
            ok = outcome is not ActOutcome.FAILED
            return ToolResult(call_id=call.call_id, name=call.name, ok=ok, data=data)
        error = last.reason or last.status.value
        detail = last.evidence.detail or last.evidence.error
        result = ToolResult(
            call_id=call.call_id, name=call.name, ok=False, error=error, detail=detail
        )
        if error == RefusalReason.PERSON_UNRESOLVED.value:
            result.data = await self._candidates(call)
        return result

    def _learn(self, people: list[Any]) -> None:
        """People a directory look-up returned: this run may name them, by id and name."""
        assert self.ledger is not None
        for person in people:
            user_id = str(getattr(person, "user_id", ""))
            if not user_id:
                continue
            self.ledger.acts.people.add(user_id)
            name = getattr(person, "name", None)
            if name:
                self.ledger.acts.names[user_id] = str(name)

    async def _candidates(self, call: ToolCall) -> dict[str, Any]:
        """Who the names an act gave might be: the directory asked for each (the asker's
        own look-up), so the model can ask one question that lists them by name and
        department, or use the one person found."""
        assert self.ledger is not None
        note = (
            "ask the person one question: which colleague they mean (list the candidates by"
            " name and department); with exactly one candidate who is clearly meant, you may"
            " call the tool again with that user_id"
        )
        finders = [READS[n] for n in self.enabled if n in READS and READS[n].finds_people]
        finder = finders[0] if finders else None
        if finder is None:
            return {"note": "ask the person which colleague they mean (one question)"}
        spec = self.catalog.spec(call.name)
        named: list[str] = []
        for key in (spec.people_args if spec is not None else None) or ():
            value = call.arguments.get(key)
            named += [str(v) for v in value] if isinstance(value, list) else [str(value or "")]
        found: dict[str, Any] = {}
        for name in [n for n in named if n and n not in self.ledger.acts.people][:5]:
            try:
                people = await finder.read(self.workspace, self.asker, {"name": name})
            except Exception as exc:  # the question is asked anyway, without candidates
                log.info("directory search for a name failed", extra={"error": str(exc)[:200]})
                continue
            self._learn(people)
            found[name] = plain(people)
        return {"candidates": found, "note": note}


# Argument names that look like they name a person (an MCP read that takes one and has no
# ``people`` declared could be pointed at anyone).
_PERSONISH = re.compile(
    r"user|staff|union|employee|member|person|people|owner|assignee|executor|attendee|uid",
    re.IGNORECASE,
)


def _names_people_undeclared(spec: ToolSpec) -> bool:
    if not spec.name.startswith("mcp.") or spec.people_args is not None:
        return False
    return any(_PERSONISH.search(str(key)) for key in spec.parameters.get("properties") or {})


def _asked(ledger: RunLedger, approval: str) -> dict[str, str]:
    """How the asker was asked for their approval, and what the model may tell them."""
    asked = ledger.acts.asked.get(approval, {})
    how, code = asked.get("how", "card"), asked.get("code", "")
    if how == "card":
        note = "nothing is done yet: the asker got an approval card; say that it waits for"
        note += " their approval on the card, never that it is done"
    elif how == "text":
        note = f"nothing is done yet: the asker was asked to reply 「确认 {code}」 or"
        note += f" 「拒绝 {code}」; say so, never that it is done"
    else:
        note = "nothing is done yet, and the approval card may not have reached the asker:"
        note += f" tell them that if they did not get it they can reply 「确认 {code}」"
    return {"asked_with": how, "note": note}
