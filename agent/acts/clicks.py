"""A click on an approval card, from its Stream callback to its decision and its answer.

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
from agent.contracts import CardClick, Event
from agent.dingtalk.card_callback import STOP
from storage import Store

log = logging.getLogger("dta.approvals")


@dataclass(frozen=True)
class ClickAnswer:
    """The callback's response (the card's immediate change) and the event to run, if the
    click decided an approval."""

    response: Any  # a card change (dict), or "OK" for none
    event: Event | None = None


def _shown(status: str, private_to: str | None = None) -> dict[str, Any]:
    params = {"cardParamMap": {"status": status}}
    if private_to is not None:
        return {"userPrivateData": params, "cardUpdateOptions": {"updatePrivateDataByKey": True}}
    return {"cardData": params, "cardUpdateOptions": {"updateCardDataByKey": True}}


class ClickDesk:
    """Every card click: approvals (with an approval desk), and the stop button of a
    streaming reply card."""

    def __init__(self, store: Store, desk: ApprovalDesk | None) -> None:
        self.store = store
        self.desk = desk

    def on(self, store: Store) -> ClickDesk:
        """The same desk over another connection to the store (the connector's thread)."""
        return ClickDesk(store, self.desk.on(store) if self.desk is not None else None)

    def receive(self, click: CardClick) -> ClickAnswer:
        if click.action == STOP:
            return self._stop(click)
        if self.desk is None:
            return ClickAnswer("OK")
        return self._decide(click, self.desk)

    def _stop(self, click: CardClick) -> ClickAnswer:
        """The stop button of a streaming reply card: only the person who asked stops it
        (the streaming run reads the request between frames); anyone else's does nothing."""
        card = self.store.card_by_track(click.out_track_id)
        run = self.store.get_run(card.event_id) if card is not None else None
        if run is None:
            outcome = "unknown"
        elif click.user_id != run.origin.user_id:
            outcome = "not_the_asker"
        elif self.store.request_card_stop(click.out_track_id, click.user_id, click.received_at):
            outcome = "stop_requested"
        else:
            outcome = "already_stopped"
        self.store.add_click(
            click.frame_id, None, click.user_id, click.action, outcome, click.received_at
        )
        log.info("card stop click", extra={"card": click.out_track_id, "outcome": outcome})
        return ClickAnswer("OK")

    def _decide(self, click: CardClick, desk: ApprovalDesk) -> ClickAnswer:
        seen = self.store.click(click.frame_id)
        if seen is not None:  # a redelivered callback: the same answer, nothing new decided
            if seen.get("outcome") == "not_authorizer":
                return ClickAnswer(_shown(ONLY_THE_ASKER, click.user_id))
            current = self.store.approval_by_track(click.out_track_id)
            return ClickAnswer(_shown(status_words(current)))
        record = self.store.approval_by_track(click.out_track_id)
        if click.action not in (APPROVE, DENY):
            decision_said, outcome = "未知的操作", "unknown_action"
            event = None
        else:
            decision = desk.decide(record, click.user_id, click.action)
            decision_said, outcome = decision.said, decision.outcome
            event = None
            if decision.decided and decision.record is not None:
                run = self.store.get_run(decision.record.event_id)
                if run is not None:
                    event = settle_event(decision.record, run, click.received_at)
                    self.store.add_event(event, event.to_json(), supersedes=False)
        approval_id = record.approval_id if record is not None else None
        self.store.add_click(
            click.frame_id, approval_id, click.user_id, click.action, outcome, click.received_at
        )
        log.info(
            "approval click",
            extra={"approval": approval_id, "outcome": outcome, "frame": click.frame_id},
        )
        private = click.user_id if outcome == "not_authorizer" else None
        said = ONLY_THE_ASKER if private else decision_said
        return ClickAnswer(_shown(said, private), event)
