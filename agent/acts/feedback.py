"""A 👍 / 👎 press on an answer's card: kept with the run it rates, the presser answered.

DingTalk's own like/dislike component fires no callback
(``../shared/dingtalk-knowledge-and-forms-apis.md`` §3.5), so an answer card carries
buttons of its own (action ids ``feedback_up`` / ``feedback_down``; shown while the card's
``feedback`` variable is ``on``). A press is decided on the connector's thread before the
ack, in a few store statements: the card by its outTrackId, its run, the rating written.

Once per person and answer: a second press by the same person replaces their rating; a
redelivered callback (same frame id) changes nothing. In a group anyone who sees the card
may rate it, each counted once; in a one-to-one chat only the person the answer was for
(a forwarded card pressed by someone else is not their conversation). Only the presser is
answered, on the card (``userPrivateData``): no chat message, nothing the others see.
"""

from __future__ import annotations

import logging
from typing import Any

from agent.contracts import CardClick, ConversationType
from storage import Store
from storage.feedback import Press

log = logging.getLogger("dta.feedback")

THANKS = "已收到你的反馈"
NOT_YOURS = "这条回答不是给你的，无法评价"
# The card variables a press sets for the presser alone: which thumb they pressed, and the
# words; the shared ``feedback`` variable (``on``) is what shows the buttons at all.
RATED_KEY, SAID_KEY = "rated", "rated_said"


def _private(said: str, rating: str | None = None) -> dict[str, Any]:
    params = {SAID_KEY: said, **({RATED_KEY: rating} if rating else {})}
    return {
        "userPrivateData": {"cardParamMap": params},
        "cardUpdateOptions": {"updatePrivateDataByKey": True},
    }


def take_feedback(store: Store, click: CardClick) -> Any:
    """Keep one press (``click.action`` is ``up`` or ``down``); the callback's response."""
    card = store.cards.card_by_track(click.out_track_id)
    run = store.events.get_run(card.event_id) if card is not None else None
    if card is None or run is None:  # not an answer's card: noted, nothing rated
        store.approvals.add_click(
            click.frame_id, None, click.user_id, click.action, "unknown", click.received_at
        )
        return "OK"
    origin = run.origin
    if origin.conversation_type is not ConversationType.GROUP and click.user_id != origin.user_id:
        store.approvals.add_click(
            click.frame_id,
            None,
            click.user_id,
            click.action,
            "not_in_conversation",
            click.received_at,
        )
        return _private(NOT_YOURS)
    press = Press(
        event_id=card.event_id,
        user_id=click.user_id,
        rating=click.action,
        frame_id=click.frame_id,
        at=click.received_at,
        run_id=run.run_id,
        reason=click.reason if click.action == "down" else None,
        out_track_id=click.out_track_id,
        conversation_id=card.conversation_id,
    )
    new = store.feedback.rate(press)
    log.info(
        "feedback",
        extra={"event": card.event_id, "rating": click.action, "new": new, "frame": click.frame_id},
    )
    return _private(THANKS, click.action)
