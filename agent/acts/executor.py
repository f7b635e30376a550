"""Carrying out an approved act: store, execute, read back, receipt.

The order is the broker's (agent/run/broker.py): the intent is stored (claiming its
idempotency key, so the same act never runs twice), then the attempt, before any I/O; then
DingTalk is called with the act's own idempotency token (a to-do's ``sourceId``, an event's
``x-client-token``, both derived from the intent's key, so a repeat is recognised by
DingTalk too); then the object is read back. Only a read-back that finds it makes the
receipt ``verified``. A call that may have been applied (a timeout after sending, a crash)
is ``uncertain`` and is never executed again blindly: ``read_back`` settles it later, from
the recovery pass or when the run asks for the same act again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from agent.contracts import (
    ActionIntent,
    ActionKind,
    Attempt,
    AttemptOutcome,
    Channel,
    Evidence,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    new_id,
    sha256_text,
)
from agent.crashpoints import CrashPoints
from agent.mcp.sources import McpSources
from agent.run.broker import Broker
from storage import Store

log = logging.getLogger("dta.acts")


class WorkspaceWrites(Protocol):
    """The robot app's writes and the reads that verify them (agent/dingtalk/workspace.py)."""

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


@dataclass(frozen=True)
class Done:
    """What an act's call and its read-back found: the object's id, and whether the read
    saw it as the act meant it."""

    object_id: str
    seen: bool
    readback: str


def token_of(intent: ActionIntent) -> str:
    """The act's idempotency token for DingTalk: the same for every try of this intent's
    key, so a repeat after a timeout is the same to-do or event, not a second one."""
    return "dta-" + sha256_text(intent.idempotency_key)[:32]


def _when(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


class ActExecutor:
    def __init__(
        self,
        store: Store,
        workspace: WorkspaceWrites,
        broker: Broker,
        crash: CrashPoints,
        mcp: McpSources | None = None,
    ) -> None:
        self.mcp = mcp  # MCP servers' write tools: their result is the only evidence
        self.store = store
        self.workspace = workspace
        self.broker = broker  # for its receipts (the broker's own stamp and clock)
        self.clock = broker.clock
        self.crash = crash
        self._writes: dict[str, Callable[[str, dict[str, Any], str], Awaitable[Done]]] = {
            "dingtalk.todo.create": self._create_todo,
            "dingtalk.todo.complete": self._complete_todo,
            "dingtalk.calendar.create_event": self._create_event,
        }
        self._reads: dict[str, Callable[[str, dict[str, Any], str], Awaitable[Done]]] = {
            "dingtalk.todo.create": self._find_todo,
            "dingtalk.todo.complete": self._todo_done,
            # DingTalk answers a repeat with the same token with the event it made
            "dingtalk.calendar.create_event": self._create_event,
        }

    def executes(self, tool: str) -> bool:
        return tool in self._writes or (self.mcp is not None and tool.startswith("mcp."))

    async def execute(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        """The act once: stored, called, read back; its receipt (``refused`` naming the
        first one when another execution holds its key)."""
        attempt = Attempt(
            attempt_id=new_id("att"),
            intent_id=intent.intent_id,
            channel=Channel.ACT,
            started_at=self.clock.now(),
            request_digest=intent.idempotency_key,
        )
        if not self.store.add_intent(intent, attempt):
            first = self.store.receipt_for_idempotency_key(intent.idempotency_key)
            return self._receipt(
                run,
                intent,
                ReceiptStatus.REFUSED,
                Evidence(first_receipt_id=first.receipt_id if first else None),
                reason="duplicate_intent",
            )
        self.crash.hit("after_attempt_started")
        status, evidence = await self._run(self._writes, intent)
        attempt.outcome = _OUTCOME[status]
        attempt.finished_at = self.clock.now()
        attempt.evidence = evidence
        receipt = self._receipt(run, intent, status, evidence)
        self.store.finish_delivery(
            attempt, receipt, None, ending.apply(run, receipt) if ending else None
        )
        return receipt

    async def read_back(self, run: Run, intent: ActionIntent) -> Receipt | None:
        """Settle an act whose receipt is ``uncertain``: read the object (never a blind
        second call); a second receipt says what the read found, None if it could not."""
        status, evidence = await self._run(self._reads, intent)
        if status is ReceiptStatus.UNCERTAIN:
            return None
        if status is ReceiptStatus.FAILED:
            evidence = evidence.model_copy(
                update={"detail": f"read back: not there ({evidence.detail}); not run again"}
            )
        receipt = self._receipt(run, intent, status, evidence)
        self.store.add_readback(receipt)
        return receipt

    async def settle_uncertain(self) -> int:
        """Read back every act left ``uncertain`` (the recovery pass); how many settled."""
        settled = 0
        for intent in self.store.uncertain_acts():
            run = self.store.get_run(intent.event_id)
            if run is None:
                continue
            bound = run.model_copy(update={"run_id": intent.run_id})
            if await self.read_back(bound, intent) is not None:
                settled += 1
        return settled

    async def _run(
        self,
        table: dict[str, Callable[[str, dict[str, Any], str], Awaitable[Done]]],
        intent: ActionIntent,
    ) -> tuple[ReceiptStatus, Evidence]:
        call = table.get(intent.tool or "")
        if call is None and table is self._writes and self.executes(intent.tool or ""):
            call = self._mcp_write(intent.tool or "")
        if call is None and table is self._reads and self.executes(intent.tool or ""):
            # An MCP tool has no read-back: the act stays uncertain, never called again.
            return ReceiptStatus.UNCERTAIN, Evidence(detail="an MCP act cannot be read back")
        if call is None:
            return ReceiptStatus.FAILED, Evidence(detail=f"no executor for {intent.tool!r}")
        try:
            done = await call(intent.target.user_id, intent.arguments or {}, token_of(intent))
        except Exception as exc:  # a WorkspaceError says what kind; anything else: unknown
            kind = getattr(exc, "kind", None)
            maybe = kind in (None, "timeout_after_send") or getattr(exc, "maybe_applied", False)
            status = ReceiptStatus.UNCERTAIN if maybe else ReceiptStatus.FAILED
            log.warning("act failed", extra={"tool": intent.tool, "error": kind or "unknown"})
            return status, Evidence(
                channels_tried=[Channel.ACT],
                error=str(kind or type(exc).__name__),
                detail=str(exc)[:300],
            )
        status = ReceiptStatus.VERIFIED if done.seen else ReceiptStatus.ACCEPTED
        return status, Evidence(
            channels_tried=[Channel.ACT], object_id=done.object_id, readback=done.readback
        )

    def _receipt(
        self,
        run: Run,
        intent: ActionIntent,
        status: ReceiptStatus,
        evidence: Evidence,
        reason: str | None = None,
    ) -> Receipt:
        return self.broker.receipt(
            run,
            ActionKind.ACT,
            status,
            intent_id=intent.intent_id,
            reason=reason,
            evidence=evidence,
        )

    # ------------------------------------------------------------------ the tools

    def _mcp_write(self, name: str) -> Callable[[str, dict[str, Any], str], Awaitable[Done]]:
        """An MCP server's write: its result is what there is (``accepted``, not verified:
        nothing independent reads it back)."""
        assert self.mcp is not None
        mcp = self.mcp

        async def write(asker: str, args: dict[str, Any], token: str) -> Done:
            answer = await mcp.call(name, args)
            self.crash.hit("after_send")
            if not answer.ok:
                raise _McpFailed(answer.error or "mcp_error", answer.detail or "")
            shown = str(answer.data)[:200]
            return Done(token, False, f"tool result (no read-back): {shown}")

        return write

    async def _create_todo(self, asker: str, args: dict[str, Any], token: str) -> Done:
        todo = await self.workspace.create_todo(
            asker,
            str(args["subject"]),
            list(args.get("executors") or [asker]),
            source_id=token,
            due=_when(args.get("due")),
            description=args.get("description"),
        )
        self.crash.hit("after_send")
        return await self._find_todo(asker, args, token, made=todo.task_id)

    async def _find_todo(
        self, asker: str, args: dict[str, Any], token: str, made: str | None = None
    ) -> Done:
        seen = await self.workspace.todo_by_source(asker, token)
        found = seen.task_id if seen is not None else made
        ok = seen is not None and (made is None or seen.task_id == made)
        return Done(str(found), ok, f"to-do {found} found by sourceId")

    async def _complete_todo(self, asker: str, args: dict[str, Any], token: str) -> Done:
        await self.workspace.complete_todo(asker, str(args["todo_id"]))
        self.crash.hit("after_send")
        return await self._todo_done(asker, args, token)

    async def _todo_done(self, asker: str, args: dict[str, Any], token: str) -> Done:
        todo = await self.workspace.get_todo(asker, str(args["todo_id"]))
        return Done(todo.task_id, bool(todo.done), f"to-do {todo.task_id} done={todo.done}")

    async def _create_event(self, asker: str, args: dict[str, Any], token: str) -> Done:
        start, end = _when(args.get("start")), _when(args.get("end"))
        assert start is not None and end is not None  # the schema and the host checked
        made = await self.workspace.create_event(
            asker,
            str(args["summary"]),
            start,
            end,
            list(args.get("attendees") or []),
            client_token=token,
            location=args.get("location"),
        )
        self.crash.hit("after_send")
        seen = await self.workspace.get_event(asker, made.event_id)
        return Done(made.event_id, seen.event_id == made.event_id, f"event {made.event_id} read")


class _McpFailed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        # a timeout may have been applied; a server down, or its own error, was not
        maybe_applied = kind in ("mcp_timeout", "mcp_broken")
        self.kind = "timeout_after_send" if maybe_applied else "failed"


_OUTCOME = {
    ReceiptStatus.VERIFIED: AttemptOutcome.ACCEPTED,
    ReceiptStatus.ACCEPTED: AttemptOutcome.ACCEPTED,
    ReceiptStatus.FAILED: AttemptOutcome.FAILED,
    ReceiptStatus.UNCERTAIN: AttemptOutcome.UNCERTAIN,
}
