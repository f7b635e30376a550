"""What a refusal of the action gate means for the run: which refusals are of the answer
itself (the person gets the short honest reply instead), which a provider can mend in its
one repair round, and what a refusal leaves noted on the run's outcome."""

from __future__ import annotations

from agent.contracts import RefusalReason
from agent.run.outcome import RunOutcome
from gates.action import Refusal

# Refusals of the answer itself: the provider produced something the gate will not send, so
# the person gets the same short honest reply as for an unreadable answer. (A repeat, a
# superseded run, another robot's event, an exhausted budget or an unreachable target
# get nothing more.)
# Refusals a provider can mend by answering again (its one repair round): what it said
# was untrue, or too long to send (it is asked to shorten it).
REPAIRABLE = frozenset(
    {
        RefusalReason.UNBACKED_CLAIM,
        RefusalReason.DEFERRED_PROMISE,
        RefusalReason.CONTENT_TOO_LARGE,
        RefusalReason.ATTACHMENT_UNSUPPORTED,
        RefusalReason.FOREIGN_IMAGE,
        RefusalReason.UNGROUNDED_FIGURE,
        RefusalReason.RAW_TOOL_OUTPUT,
    }
)
ANSWER_REFUSALS = frozenset(
    {
        RefusalReason.SCHEMA_INVALID,
        RefusalReason.ACTION_NOT_ALLOWED,
        RefusalReason.CONTENT_TOO_LARGE,
        RefusalReason.SECRET_IN_CONTENT,
        RefusalReason.REMINDER_NOT_ALLOWED,
        RefusalReason.AT_ALL,
        RefusalReason.UNBACKED_CLAIM,
        RefusalReason.DEFERRED_PROMISE,
        RefusalReason.ATTACHMENT_UNSUPPORTED,
        RefusalReason.FOREIGN_IMAGE,
        RefusalReason.UNGROUNDED_FIGURE,
        RefusalReason.RAW_TOOL_OUTPUT,
    }
)


def note_refusal(outcome: RunOutcome, verdict: Refusal) -> None:
    """What a refusal means for the run: superseded, an answer still owed, or (a repeat
    of a terminal action the crashed execution already did) already answered."""
    if verdict.reason is RefusalReason.STALE_GENERATION:
        outcome.stale = True
    if verdict.reason in ANSWER_REFUSALS and (verdict.kind is None or verdict.terminal):
        outcome.refused_answer = f"{verdict.reason.value}: {verdict.detail}"[:500]
        outcome.refused_reason = verdict.reason
        outcome.refused_say = verdict.say
    if (
        verdict.reason is RefusalReason.DUPLICATE_INTENT
        and verdict.first_receipt is not None
        and verdict.kind is not None
        and verdict.kind.is_terminal
    ):
        # The crashed execution already did this: its receipt is the answer.
        outcome.terminal = verdict.first_receipt.status
        outcome.terminal_kind = verdict.kind
