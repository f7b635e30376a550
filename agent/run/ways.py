"""The ways a list of requests is acted on (``ActAs``): each call of ``Acting.act`` names
one — the answer, the ack, a follow-up, an approval's prompt or its act, … — and the way
says what the acting step does differently for it:

- ``settles``: the last request's receipt carries the run's end (saved with it); not for
  what comes before the end (an ack, a tool call, a streamed card's frames), nor for an
  answer whose task moves first and settles the run (``before_its_task``);
- ``provider``: the provider's words, delivered in ``reply_form`` and judged as the
  provider's; the host's own short words go as text;
- ``supersedable``: a newer message in the thread makes the request stale; not a due
  reminder (it answers nothing), a follow-up line or an approval's outcome;
- ``approval``: the decided approval an act is carried out under.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from agent.contracts import ApprovalRecord


@dataclass(frozen=True)
class ActAs:
    what: str
    settles: bool = True
    provider: bool = True
    supersedable: bool = True
    approval: ApprovalRecord | None = None

    # the provider's words
    ANSWER: ClassVar[ActAs]  # the answer to the message (its repair round's too)
    STREAMED: ClassVar[ActAs]  # a streamed answer's request while the card is written
    TOOL_CALL: ClassVar[ActAs]  # a model's write tool call (the model answers after it)
    ACK: ClassVar[ActAs]  # "seen, working on it"
    # the host's own words
    HOST_ANSWER: ClassVar[ActAs]  # the host answers the message (a refused file, 「忘掉…」)
    HONEST_FAILURE: ClassVar[ActAs]  # the run could not answer, and says so
    HOST_WORDS: ClassVar[ActAs]  # a short reply that ends the run (an own event's)
    FOLLOW_UP: ClassVar[ActAs]  # the one line after an answer (what did not go)
    DUE_REMINDER: ClassVar[ActAs]  # a reminder come due (no newer message supersedes it)
    DUE_FOLLOW_UP: ClassVar[ActAs]  # a task's follow-up come due (the person's word does)
    APPROVAL_PROMPT: ClassVar[ActAs]  # asking for an act's approval
    APPROVAL_OUTCOME: ClassVar[ActAs]  # what became of an approved (or refused) act

    def before_its_task(self) -> ActAs:
        """The same, its run's end left to its task (which moves first, then settles)."""
        return replace(self, what=f"{self.what}, before its task", settles=False)

    @staticmethod
    def approved_act(record: ApprovalRecord) -> ActAs:
        """An act carried out under its decided approval."""
        return ActAs(
            "an approval's act", settles=False, provider=False, supersedable=False, approval=record
        )


ActAs.ANSWER = ActAs("the answer")
ActAs.STREAMED = ActAs("a streamed answer's request", settles=False)
ActAs.TOOL_CALL = ActAs("a tool call", settles=False)
ActAs.ACK = ActAs("the ack", settles=False)
ActAs.HOST_ANSWER = ActAs("the host's answer", provider=False)
ActAs.HONEST_FAILURE = ActAs("the honest failure", provider=False)
ActAs.HOST_WORDS = ActAs("the host's words", provider=False)
ActAs.FOLLOW_UP = ActAs("a follow-up", settles=False, provider=False, supersedable=False)
ActAs.DUE_REMINDER = ActAs("a due reminder", provider=False, supersedable=False)
ActAs.DUE_FOLLOW_UP = ActAs("a due follow-up", provider=False)
ActAs.APPROVAL_PROMPT = ActAs("an approval's prompt", settles=False, provider=False)
ActAs.APPROVAL_OUTCOME = ActAs("an approval's outcome", provider=False, supersedable=False)
