"""What one execution of a run did, and what that makes of the run's final state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.contracts import (
    ActionKind,
    ActionRequest,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Run,
    RunState,
)
from gates.action import RunTally


@dataclass
class RunOutcome:
    """What one execution of a run did, to settle the run's final state."""

    terminal: ReceiptStatus | None = None
    terminal_kind: ActionKind | None = None
    stale: bool = False
    receipts: list[Receipt] = field(default_factory=list)
    settled: Run | None = None  # the run's final form, if already saved with a receipt
    terminal_request: ActionRequest | None = None
    terminal_receipt: Receipt | None = None
    tally: RunTally = field(default_factory=RunTally)
    acked: bool = False  # an ack reached the person: something must follow it
    ends_as: RunState | None = None  # the state the run ends in, whatever is delivered
    # The gate refused the answer itself (not a repeat or a superseded run): the person is
    # still owed a word, and the refusal is kept on the run.
    refused_answer: str | None = None
    refused_reason: RefusalReason | None = None
    refused_say: str | None = None  # the refusal's own plain words for the person, if any
    # the knowledge and memory the run was given: what its answer may quote as theirs
    sources: tuple[str, ...] = ()
    # What this run did that backs a claim (a verified act, a tool's result, an approval
    # prompt delivered), and the approvals it left pending: the run then ends ``waiting``.
    backing: list[str] = field(default_factory=list)
    awaiting: list[str] = field(default_factory=list)

    def final_state(self) -> RunState:
        if self.terminal_kind is ActionKind.SILENCE:
            return RunState.SILENT
        if self.terminal is not None and self.terminal.delivered:
            waits = self.terminal_kind is ActionKind.ASK or bool(self.awaiting)
            return RunState.WAITING if waits else RunState.DONE
        if self.stale:
            return RunState.INTERRUPTED
        return RunState.FAILED


def touches_task(raw: Any) -> bool:
    """Whether a raw provider request opens or moves a task (an ask, or a task patch)."""
    if isinstance(raw, ActionRequest):
        return raw.kind is ActionKind.ASK or raw.task is not None
    return isinstance(raw, dict) and (raw.get("kind") == "ask" or bool(raw.get("task")))
