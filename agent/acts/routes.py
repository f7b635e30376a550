"""The approvals' rows of the own-event table (``agent/run/own_events.py``; their order
among the others: ``agent/components/own_events.py``).

- ``approval``: the runtime's own event ``approval:<id>`` (a click, an expiry, a void): the
  decision carried out (``ApprovalSettlement.handle``).
- ``act_checked``: ``act-checked:<intent>``, an act in doubt the recovery pass read back:
  its asker told (``ApprovalSettlement.tell_checked``).
- ``code_reply``: 「确认 4F2A」 where no card is set, the asker's decision in words; a code
  we never gave in this conversation to this person is an ordinary message after all.

The first two wait while the robot is paused (``held``): the asker decided, or is owed word.
"""

from __future__ import annotations

from agent.acts.approvals import ApprovalDesk, code_reply
from agent.acts.settle import ApprovalSettlement
from agent.clock import Clock
from agent.contracts import Event, Run
from agent.run.own_events import Hands
from storage import Store

_DECIDED = ("approved", "denied")


def approval_decision(event: Event) -> bool:
    """``approval:<id>``: a decision on an approval, to be carried out."""
    return event.scheduled is not None and event.scheduled.kind == "approval"


def act_checked(event: Event) -> bool:
    """``act-checked:<intent>``: an act in doubt, read back."""
    return event.scheduled is not None and event.scheduled.kind == "act_checked"


def code_reply_words(event: Event) -> bool:
    """A person's words shaped like a code reply (whether it is a code we gave is for the
    row's handle: that needs the store)."""
    return event.scheduled is None and code_reply(event.text) is not None


class ApprovalRoutes:
    """The handles of the approvals' rows, over the desk and (where set) the cards."""

    def __init__(
        self, *, store: Store, clock: Clock, desk: ApprovalDesk, settlement: ApprovalSettlement
    ) -> None:
        self.store = store
        self.clock = clock
        self.desk = desk
        # carries a decided approval out, with the pipeline's acting step and endings
        self.settlement = settlement

    async def decision(self, event: Event, run: Run, hands: Hands) -> Run:
        """The run of ``approval:<id>``."""
        scheduled = event.scheduled
        approval_id = (scheduled.approval_id if scheduled else None) or ""
        return await self.settlement.handle(run, approval_id)

    async def checked(self, event: Event, run: Run, hands: Hands) -> Run:
        """The run of ``act-checked:<intent>``."""
        scheduled = event.scheduled
        intent_id = (scheduled.intent_id if scheduled else None) or ""
        return await self.settlement.tell_checked(run, intent_id)

    async def code_reply(self, event: Event, run: Run, hands: Hands) -> Run | None:
        """「确认 4F2A」: the asker's decision on a pending approval, in words; None when it
        is not a code we gave (an ordinary message)."""
        reply = code_reply(event.text)
        if reply is None:
            return None
        choice, code = reply
        record = self.store.approvals.approval_by_code(
            event.conversation.id, code, event.actor.user_id
        )
        if record is None:
            return None  # not a code we gave: an ordinary message
        settlement = self.settlement
        earlier = self.store.approvals.click(event.event_id)  # this very reply, before a crash
        decision = self.desk.decide(record, event.actor.user_id, choice)
        # kept like a click (by the message's id: a redelivery records nothing new)
        self.store.approvals.add_click(
            event.event_id,
            record.approval_id,
            event.actor.user_id,
            choice,
            decision.outcome,
            self.clock.now(),
        )
        if decision.decided and decision.record is not None:
            return await settlement.carry_out(decision.record, run)
        again = decision.record
        decided_here = earlier is not None and earlier.get("outcome") in _DECIDED
        if again is not None and decided_here:
            # this very reply decided it before a crash: carry it out (once: the claim)
            return await settlement.carry_out(again, run)
        return await hands.say(run, decision.said)  # a second reply: how it stands
