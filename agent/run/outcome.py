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
from gates.backing import Backing


@dataclass
class Grounds:
    """What the run's answer may say, and from what: the figures in an answer must come from
    these, and what it quotes of them is theirs, not the robot's claims."""

    # the knowledge and memory the run was given: what its answer may quote as theirs
    sources: tuple[str, ...] = ()
    knowledge_used: bool = False  # knowledge or memory items were given: figures are checked
    # what the run's tools returned (each result as JSON text) and what the person asked:
    # with the sources, what the answer's figures must come from
    results: list[str] = field(default_factory=list)
    # every tool result as the model was shown it (reads and writes, their envelope too):
    # what a reply must not paste
    shown: list[str] = field(default_factory=list)
    question: str = ""


@dataclass
class ActLedger:
    """What the run's acts and look-ups did: what backs a claim, what waits for approval and
    how the asker was asked, what became of each act asked for, whom the run may name."""

    # What this run did that backs a claim (a verified act, a tool's result, an approval
    # prompt delivered), and the approvals it left pending: the run then ends ``waiting``.
    backing: list[Backing] = field(default_factory=list)
    awaiting: list[str] = field(default_factory=list)
    # how each awaited approval was asked: "card", "text" (a code in words: no card, or
    # the card was refused) or "uncertain" (the card may not have reached the asker)
    asked: dict[str, dict[str, str]] = field(default_factory=dict)
    # for each act requested, in order, the receipt that says what became of it (its own,
    # a refusal, or — the same act asked again — the earlier act's latest)
    told: list[Receipt] = field(default_factory=list)
    # the asker's words for each act of this run that may have happened: said even when
    # the run's own answer never comes (the model went down after acting)
    acted: list[str] = field(default_factory=list)
    # whom this run may name in an act: the asker, those @-ed, those a look-up returned
    people: set[str] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)  # staff id → name, as looked up


@dataclass
class RunOutcome:
    """What one execution of a run did, to settle the run's final state: its receipts and
    counts, its last word (``terminal``), a refused answer; what its answer may say from
    (``grounds``) and what its acts did (``acts``)."""

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
    grounds: Grounds = field(default_factory=Grounds)
    acts: ActLedger = field(default_factory=ActLedger)
    english: bool = False  # the person wrote in English: the host's own words are English

    def final_state(self) -> RunState:
        if self.terminal_kind is ActionKind.SILENCE:
            return RunState.SILENT
        if self.terminal is not None and self.terminal.delivered:
            waits = self.terminal_kind is ActionKind.ASK or bool(self.acts.awaiting)
            return RunState.WAITING if waits else RunState.DONE
        if self.stale:
            return RunState.INTERRUPTED
        return RunState.FAILED


def touches_task(raw: Any) -> bool:
    """Whether a raw provider request opens or moves a task (an ask, or a task patch)."""
    if isinstance(raw, ActionRequest):
        return raw.kind is ActionKind.ASK or raw.task is not None
    return isinstance(raw, dict) and (raw.get("kind") == "ask" or bool(raw.get("task")))
