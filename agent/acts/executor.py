"""Carrying out an approved act: store, prepare, execute, read back, receipt.

The order is the broker's (agent/run/broker.py): the intent is stored (claiming its
idempotency key, so the same act never runs twice); everything the request needs is had
(the people's unionIds, the app token, a place in the connection pool) before the attempt
is stored, so an attempt on record always may have reached DingTalk — and one a stop cuts
before its bytes left (in a throttle's back-off) is forgotten, the act still owed; then
DingTalk is called with the act's own idempotency token (a to-do's ``sourceId``, an
event's ``x-client-token``, both derived from the intent's key); then the object is read
back — each built-in tool's write, people and read-back are its own module's, looked up by
name in the registry (``agent/tools/builtin.py``). The receipt says what is known, in the
one vocabulary (agent/acts/told.py):

- ``verified``: a read-back saw the object as the act meant it;
- ``accepted``: the platform (or an MCP tool) answered that it was done, and nothing read it
  back yet (the read failed, or cannot be done): queued for a read-back where one exists;
- ``uncertain``: it may have been applied (a timeout after sending, a crash): read back
  later, never executed again blindly;
- ``failed``: the platform said it did not happen, or nothing was ever sent.

A read-back that cannot be done (throttled, down) settles nothing: the act stays in the
recovery pass's queue with back-off. A "not found" right after a timeout is not final either:
DingTalk may apply a create a moment later, so it is read again once ``settle_s`` has passed
since the doubt began, and only then is the act called not done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

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
from agent.run.broker import Broker
from agent.tools.base import Done, NotThere, WorkspaceWrites
from agent.tools.builtin import WRITES
from agent.tools.mcp.sources import McpSources
from storage import Store

log = logging.getLogger("dta.acts")

__all__ = ["ActExecutor", "Done", "WorkspaceWrites", "token_of"]

# Back-off between read-backs that settled nothing: 5 s, doubling, at most 10 minutes.
READBACK_FIRST_S = 5.0
READBACK_MAX_S = 600.0
NEVER = 1e300  # a row parked for good (a create answered done that reads as absent)

# A write's failures that say it did not happen (nothing taken, or a definite no)
_DEFINITE = frozenset({"unavailable", "throttled", "forbidden", "invalid", "not_found", "failed"})


class _Left:
    """The departure of a call nothing can take back once it is made (an MCP tool's)."""

    may_have_arrived = True


def token_of(intent: ActionIntent) -> str:
    """The act's idempotency token for DingTalk: the same for every try of this intent's
    key, so a repeat after a timeout is the same to-do or event, not a second one."""
    return "dta-" + sha256_text(intent.idempotency_key)[:32]


@dataclass(frozen=True)
class Resolved:
    """A read-back that settled an act: its new receipt and the status it had before."""

    receipt: Receipt
    was: ReceiptStatus


class ActExecutor:
    def __init__(
        self,
        store: Store,
        workspace: WorkspaceWrites,
        broker: Broker,
        crash: CrashPoints,
        mcp: McpSources | None = None,
        *,
        settle_s: float = 60.0,
    ) -> None:
        self.mcp = mcp  # MCP servers' write tools: their result is the only evidence
        self.store = store
        self.workspace = workspace
        self.broker = broker  # for its receipts (the broker's own stamp and clock)
        self.clock = broker.clock
        self.crash = crash
        self.settle_s = settle_s

    def executes(self, tool: str) -> bool:
        return tool in WRITES or (self.mcp is not None and tool.startswith("mcp."))

    async def execute(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        """The act once: stored, prepared, called, read back; its receipt (``refused``
        naming the first one when another execution holds its key)."""
        if not self.store.actions.add_intent(intent):
            first = self.store.actions.receipt_for_idempotency_key(intent.idempotency_key)
            return self._receipt(
                run,
                intent,
                ReceiptStatus.REFUSED,
                Evidence(first_receipt_id=first.receipt_id if first else None),
                reason="duplicate_intent",
            )
        problem = await self._prepare(intent)
        if problem is not None:  # nothing was sent: a definite no, said why
            receipt = self._receipt(run, intent, ReceiptStatus.FAILED, problem)
            self.store.actions.add_receipt(receipt, ending.apply(run, receipt) if ending else None)
            return receipt
        async with self._departure(intent) as departure:
            attempt = Attempt(
                attempt_id=new_id("att"),
                intent_id=intent.intent_id,
                channel=Channel.ACT,
                started_at=self.clock.now(),
                request_digest=intent.idempotency_key,
            )
            self.store.actions.start_attempt(attempt)
            self.crash.hit("after_attempt_started")
            try:
                status, evidence = await self._write(intent)
            except asyncio.CancelledError:
                if not departure.may_have_arrived:  # a stop before its bytes went
                    self.store.actions.forget_unsent(intent.intent_id)
                raise
        attempt.outcome = _OUTCOME[status]
        attempt.finished_at = self.clock.now()
        attempt.evidence = evidence
        receipt = self._receipt(run, intent, status, evidence)
        self.store.actions.finish_delivery(
            attempt, receipt, None, ending.apply(run, receipt) if ending else None
        )
        return receipt

    def _departure(self, intent: ActionIntent) -> AbstractAsyncContextManager[Any]:
        """The write's place in the pool, held from before its attempt is recorded: a
        stop while it waits for one has sent nothing. An MCP tool's call has no place to
        hold, and is taken to have left once it is made."""
        if intent.tool in WRITES:
            return self.workspace.departure()
        return contextlib.nullcontext(_Left())

    async def _prepare(self, intent: ActionIntent) -> Evidence | None:
        """Have everything the call needs (unionIds, the token) before an attempt is on
        record; what is missing, as the evidence of a write that was never sent."""
        call = WRITES.get(intent.tool or "")
        if call is None:
            if self.executes(intent.tool or ""):
                return None  # an MCP tool: its server has what it needs
            return _never(f"no executor for {intent.tool!r}")
        people = call.people(intent.target.user_id, intent.arguments or {})
        try:
            await self.workspace.prepare(people)
        except Exception as exc:
            kind = str(getattr(exc, "kind", None) or type(exc).__name__)
            return _never(f"not sent: {exc}"[:300], error=kind)
        return None

    async def _write(self, intent: ActionIntent) -> tuple[ReceiptStatus, Evidence]:
        """Call the tool, then read the object back; what that makes the receipt."""
        asker, args, token = intent.target.user_id, intent.arguments or {}, token_of(intent)
        call = WRITES.get(intent.tool or "")
        try:
            if call is None:
                done = await self._mcp_write(intent.tool or "", args, token)
            else:
                done = await call.write(self.workspace, asker, args, token)
        except Exception as exc:  # a WorkspaceError says what kind; anything else: unknown
            kind = getattr(exc, "kind", None)
            maybe = kind not in _DEFINITE or getattr(exc, "maybe_applied", False)
            log.warning("act failed", extra={"tool": intent.tool, "error": kind or "unknown"})
            return (ReceiptStatus.UNCERTAIN if maybe else ReceiptStatus.FAILED), Evidence(
                channels_tried=[Channel.ACT],
                error=str(kind or type(exc).__name__),
                detail=str(exc)[:300],
            )
        self.crash.hit("after_send")
        if call is None:  # an MCP tool's own result: nothing independent reads it
            return ReceiptStatus.ACCEPTED, _evidence(done)
        try:
            seen = await call.read_back(self.workspace, asker, args, token, done.object_id)
        except Exception as exc:  # done by DingTalk's answer; the read comes later
            kind = str(getattr(exc, "kind", None) or type(exc).__name__)
            log.info("read-back after a write failed", extra={"tool": intent.tool, "error": kind})
            late = f"{done.readback}; read back failed ({kind}): read again later"
            return ReceiptStatus.ACCEPTED, _evidence(Done(done.object_id, False, late))
        return ReceiptStatus.VERIFIED, _evidence(seen)

    async def _mcp_write(self, name: str, args: dict[str, Any], token: str) -> Done:
        assert self.mcp is not None
        answer = await self.mcp.call(name, args)
        if not answer.ok:
            raise _McpFailed(answer.error or "mcp_error", answer.detail or "")
        shown = str(answer.data)[:200]
        return Done(token, False, f"tool result (no read-back): {shown}")

    # ------------------------------------------------------------------ read-backs

    async def read_back(self, run: Run, intent: ActionIntent) -> Receipt | None:
        """Settle an act whose receipt is ``uncertain`` or ``accepted`` by reading the
        object (never a blind second call); a new receipt says what the read found, None
        while it cannot tell (the act stays queued, with back-off)."""
        resolved = await self._read_back(run, intent)
        return resolved.receipt if resolved is not None else None

    async def _read_back(self, run: Run, intent: ActionIntent) -> Resolved | None:
        receipts = [r for r in self.store.actions.intent_receipts(intent.intent_id)]
        doubt = [r for r in receipts if r.status in _DOUBT]
        last = receipts[-1] if receipts else None
        if last is None or last.status not in _DOUBT:
            return None
        since = doubt[0].created_at if doubt else self.clock.now()
        call = WRITES.get(intent.tool or "")
        if call is None:
            return None  # an MCP tool has no read-back: it stays what it is
        asker, args = intent.target.user_id, intent.arguments or {}
        now = self.clock.now()
        try:
            seen = await call.read_back(
                self.workspace, asker, args, token_of(intent), last.evidence.object_id
            )
        except NotThere as gone:
            if now < since + self.settle_s:  # DingTalk may show it a moment later
                self._later(intent, since, since + self.settle_s, f"not there yet: {gone}")
                return None
            if last.status is ReceiptStatus.ACCEPTED:
                # DingTalk said it was done; a read that cannot find it does not undo that
                self._later(intent, since, NEVER, f"not found after settling: {gone}")
                return None
            evidence = Evidence(
                channels_tried=[Channel.ACT],
                detail=f"read back after {now - since:.0f} s: not there ({gone}); not run again",
            )
            return self._settled(run, intent, ReceiptStatus.FAILED, evidence, last)
        except Exception as exc:  # cannot tell now: try again later
            kind = str(getattr(exc, "kind", None) or type(exc).__name__)
            tries = self.store.approvals.readback_tries(intent.intent_id)
            wait = min(READBACK_MAX_S, READBACK_FIRST_S * 2**tries)
            self._later(intent, since, now + wait, f"{kind}: {exc}")
            return None
        return self._settled(run, intent, ReceiptStatus.VERIFIED, _evidence(seen), last)

    def _later(self, intent: ActionIntent, since: float, next_at: float, why: str) -> None:
        self.store.approvals.readback_later(intent.intent_id, since, next_at, why)

    def _settled(
        self,
        run: Run,
        intent: ActionIntent,
        status: ReceiptStatus,
        evidence: Evidence,
        was: Receipt,
    ) -> Resolved | None:
        """The read-back's receipt, written only if no other read-back (another replica's
        recovery pass, a run asking for the same act) settled it first."""
        bound = run.model_copy(update={"run_id": intent.run_id, "event_id": intent.event_id})
        receipt = self._receipt(bound, intent, status, evidence)
        if not self.store.approvals.add_readback(receipt, after=was.receipt_id):
            return None
        return Resolved(receipt, was.status)

    async def settle_uncertain(
        self, on_resolved: Callable[[ActionIntent, Resolved], Awaitable[None]] | None = None
    ) -> int:
        """Read back every act owed a read-back now (the recovery pass); how many settled.
        ``on_resolved``: told of each one that settled (the asker is owed a word)."""
        settled = 0
        for intent, _since in self.store.approvals.due_readbacks(self.clock.now()):
            run = self.store.events.get_run(intent.event_id)
            if run is None:
                continue
            resolved = await self._read_back(run, intent)
            if resolved is None:
                continue
            settled += 1
            if on_resolved is not None:
                await on_resolved(intent, resolved)
        return settled

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


def _never(detail: str, error: str = "not_sent") -> Evidence:
    return Evidence(channels_tried=[Channel.ACT], error=error, detail=detail)


def _evidence(done: Done) -> Evidence:
    return Evidence(channels_tried=[Channel.ACT], object_id=done.object_id, readback=done.readback)


class _McpFailed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        # a timeout may have been applied; a server down, or its own error, was not
        maybe_applied = kind in ("mcp_timeout", "mcp_broken")
        self.kind = "timeout_after_send" if maybe_applied else "failed"


_DOUBT = (ReceiptStatus.UNCERTAIN, ReceiptStatus.ACCEPTED)
_OUTCOME = {
    ReceiptStatus.VERIFIED: AttemptOutcome.ACCEPTED,
    ReceiptStatus.ACCEPTED: AttemptOutcome.ACCEPTED,
    ReceiptStatus.FAILED: AttemptOutcome.FAILED,
    ReceiptStatus.UNCERTAIN: AttemptOutcome.UNCERTAIN,
}
