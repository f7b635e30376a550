"""The action gate's checks for an AI card's frames and for the answer it ends with.

A card is approved like any reply (``ActionGate.decide(..., form="card")``), on the first text
of the answer, before the card exists. What streams after that can still go wrong, so every
frame passes the checks on what a text reply says (its content, and no @ of everyone)
before it is pushed, and the finished answer passes every check that depends on what it
says (schema, allowed action, content, its reminder, @ everyone) before the card is
finalized with it: a card is a way to deliver a reply, held to what the reply is held to.
The rest — run state, generation, budgets, idempotency, identity, target — was decided
once, when the card was approved, and does not change with the text.

Pure functions over the gate's own table (``gates.action.CHECKS``): nothing here reads the
store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent.contracts import Run
from gates.action import CHECKS, ActionFacts, ActionGate, Refusal, RunTally, _Case

# A frame may not claim what was not done; a promise is judged on the finished answer, which
# may still open the follow-up that keeps it.
FRAME_CHECKS = frozenset({"content", "at_all", "claims"})
FINAL_CHECKS = frozenset(
    {"schema", "allowed_action", "content", "reminder", "at_all", "claims", "promises"}
)


@dataclass(frozen=True)
class FinalCheck:
    """The finished answer's verdict: refused, or passed with its reminder's time (epoch
    seconds; None without a reminder), which the acting step schedules as for text."""

    refusal: Refusal | None = None
    reminder_due: float | None = None


def _recheck(
    gate: ActionGate,
    raw: Any,
    run: Run,
    names: frozenset[str],
    now: float = 0.0,
    sources: tuple[str, ...] = (),
) -> tuple[Refusal | None, _Case]:
    # Only ``now`` (a reminder's time) and ``sources`` (what a claim may quote) are read by
    # these checks; the run's other facts were weighed at approval.
    facts = ActionFacts(
        now=now, thread_generation=0, writes_last_minute=0, writes_last_day=0, sources=sources
    )
    case = _Case(raw, run, RunTally(), facts, gate.policy, "card")
    checked: list[str] = []
    for check in CHECKS:
        if check.name not in names:
            continue
        checked.append(check.name)
        refused = check.test(case)
        if refused is not None:
            refusal = Refusal(refused.reason, refused.detail, checked, case.kind, say=refused.say)
            return refusal, case
    return None, case


def frame_refusal(
    gate: ActionGate, text: str, run: Run, sources: tuple[str, ...] = ()
) -> Refusal | None:
    """Why this frame (the full text so far) must not be pushed, or None when it may be.

    A frame is held to the card's whole-answer bounds: the length of one message, no
    configured secret, no session webhook URL.
    """
    if not text.strip():
        return None  # nothing to show yet, so nothing to refuse
    return _recheck(gate, {"kind": "reply", "text": text}, run, FRAME_CHECKS, 0.0, sources)[0]


def final_check(
    gate: ActionGate, raw: Any, run: Run, now: float, sources: tuple[str, ...] = ()
) -> FinalCheck:
    """Whether the finished answer may be the card's final text (as of ``now``)."""
    refusal, case = _recheck(gate, raw, run, FINAL_CHECKS, now, sources)
    if refusal is not None:
        return FinalCheck(refusal)
    return FinalCheck(None, case.reminder_due if case.request.reminder is not None else None)


def unsafe_tail(text: str, secrets: Iterable[str]) -> int:
    """How many characters at the end of ``text`` could be the start of a secret.

    They are held back from the frame until the next text shows whether the secret follows:
    otherwise a secret streamed a few characters at a time would reach the card in pieces
    before the whole of it is ever seen.
    """
    longest = 0
    for secret in secrets:
        for size in range(min(len(secret) - 1, len(text)), longest, -1):
            if text.endswith(secret[:size]):
                longest = size
                break
    return longest
