"""A click on an approval card, from its Stream callback to its decision and its answer
(a form card's submit and cancel are the form desk's: ``agent/acts/forms.py``).

DingTalk wants the callback acknowledged within about 2 s, and what the acknowledgement
carries (``cardData`` / ``userPrivateData``) is what the card shows at once. So the click is
decided right here, on the connector's thread, in a few store statements, and the act
itself is left to a run: the decision stores the runtime's own event
(``settle_event``), which the pipeline carries out like any message — after a crash too.

A callback has no msgId and may be delivered twice: clicks are kept by their frame id
(``approval_clicks``), so a redelivery is answered as the first delivery was and decides
nothing new, on any replica; the decision itself is a compare-and-set on the approval's row.
Anyone but the authorizer is refused and recorded, and told so on the card (privately),
not by a chat message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agent.acts.approvals import (
    APPROVE,
    DENY,
    ONLY_THE_ASKER,
    ApprovalDesk,
    settle_event,
    status_words,
)
from agent.acts.feedback import take_feedback
from agent.acts.forms import FormDesk
from agent.contracts import ApprovalStatus, CardClick, Event
from agent.dingtalk.card_callback import CANCEL_FORM, DOWN, STOP, SUBMIT, UP
from storage import Store

log = logging.getLogger("dta.approvals")

WAITS_FOR_RESUME = "已同意；机器人暂停中，恢复后执行"


@dataclass(frozen=True)
class ClickAnswer:
    """The callback's response (the card's immediate change) and the event to run, if the
    click decided an approval."""

    response: Any  # a card change (dict), or "OK" for none
    event: Event | None = None
    generation: int = 0  # the event's thread generation (a form's resumes a task: not stale)


def _shown(status: str, private_to: str | None = None) -> dict[str, Any]:
    params = {"cardParamMap": {"status": status}}
    if private_to is not None:
        return {"userPrivateData": params, "cardUpdateOptions": {"updatePrivateDataByKey": True}}
    return {"cardData": params, "cardUpdateOptions": {"updateCardDataByKey": True}}


class ClickDesk:
    """Every card click: approvals (with an approval desk), a form card's submit and
    cancel (with a form desk), the stop button of a streaming reply card, and an
    answer's feedback buttons."""

    def __init__(
        self,
        store: Store,
        desk: ApprovalDesk | None,
        paused: bool = False,
        forms: FormDesk | None = None,
    ) -> None:
        self.store = store
        self.desk = desk
        self.forms = forms
        # The operator paused the robot: a decision is recorded, and carried out on resume
        # (its event waits in the store), which the card says.
        self.paused = paused

    def on(self, store: Store) -> ClickDesk:
        """The same desk over another connection to the store (the connector's thread)."""
        desk = self.desk.on(store) if self.desk is not None else None
        forms = self.forms.on(store) if self.forms is not None else None
        return ClickDesk(store, desk, self.paused, forms)

    def receive(self, click: CardClick) -> ClickAnswer:
        if click.action == STOP:
            return self._stop(click)
        if click.action in (SUBMIT, CANCEL_FORM) and self.forms is not None:
            form = self.forms.click(click)
            if form is not None:
                return ClickAnswer(form.response, form.event, form.generation)
        if click.action in (UP, DOWN):  # an answer's 👍 / 👎 (agent/acts/feedback.py)
            return ClickAnswer(take_feedback(self.store, click))
        if self.desk is None:
            return ClickAnswer("OK")
        return self._decide(click, self.desk)

    def _stop(self, click: CardClick) -> ClickAnswer:
        """The stop button of a streaming reply card: only the person who asked stops it
        (the streaming run reads the request between frames); anyone else's does nothing."""
        card = self.store.cards.card_by_track(click.out_track_id)
        run = self.store.events.get_run(card.event_id) if card is not None else None
        if run is None:
            outcome = "unknown"
        elif click.user_id != run.origin.user_id:
            outcome = "not_the_asker"
        elif self.store.cards.request_card_stop(
            click.out_track_id, click.user_id, click.received_at
        ):
            outcome = "stop_requested"
        else:
            outcome = "already_stopped"
        self.store.approvals.add_click(
            click.frame_id, None, click.user_id, click.action, outcome, click.received_at
        )
        log.info("card stop click", extra={"card": click.out_track_id, "outcome": outcome})
        return ClickAnswer("OK")

    def _decide(self, click: CardClick, desk: ApprovalDesk) -> ClickAnswer:
        seen = self.store.approvals.click(click.frame_id)
        if seen is not None:  # a redelivered callback: the same answer, nothing new decided
            if seen.get("outcome") == "not_authorizer":
                return ClickAnswer(_shown(ONLY_THE_ASKER, click.user_id))
            # the card everyone sees already shows the decision (and later its outcome):
            # the presser alone is answered, so a late redelivery never rewrites it
            current = self.store.approvals.approval_by_track(click.out_track_id)
            return ClickAnswer(_shown(status_words(current), click.user_id))
        record = self.store.approvals.approval_by_track(click.out_track_id)
        event, decided = None, False
        if click.action not in (APPROVE, DENY):
            decision_said, outcome = "未知的操作", "unknown_action"
        else:
            decision = desk.decide(record, click.user_id, click.action)
            decision_said, outcome, decided = decision.said, decision.outcome, decision.decided
            if decision.decided and decision.record is not None:
                run = self.store.events.get_run(decision.record.event_id)
                if run is not None:
                    event = settle_event(decision.record, run, click.received_at)
                    self.store.events.add_event(event, event.to_json(), supersedes=False)
                if self.paused and decision.record.status is ApprovalStatus.APPROVED:
                    decision_said = WAITS_FOR_RESUME
        approval_id = record.approval_id if record is not None else None
        self.store.approvals.add_click(
            click.frame_id, approval_id, click.user_id, click.action, outcome, click.received_at
        )
        log.info(
            "approval click",
            extra={"approval": approval_id, "outcome": outcome, "frame": click.frame_id},
        )
        if outcome == "not_authorizer":
            return ClickAnswer(_shown(ONLY_THE_ASKER, click.user_id))
        if not decided:
            # A press on a card already decided (or unknown): only the presser is answered;
            # the card everyone sees keeps what it says.
            return ClickAnswer(_shown(decision_said, click.user_id))
        return ClickAnswer(_shown(decision_said), event)
