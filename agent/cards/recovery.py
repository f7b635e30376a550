"""AI cards left open: finalized with what the person saw, never created again.

A card is open while its state is ``created`` or ``streaming``. Two things leave one open:
an execution that stopped mid-answer (a crash, a store that failed under it) and an end
DingTalk never took (the final frame throttled past ``card_stall_s``). The first is found
when the event is driven again, before anything else happens to it (``recover``); the second
by the recovery loop once the card has been quiet for ``card_stall_s`` (``sweep``). A card
cut off mid-answer ends with the text it showed and a note that the answer was cut off,
and the receipt (written unless one already exists) says ``failed``, reason
``card_cut_off``. A whole answer whose final frame came late (receipt ``failed``, reason
``card_final_late``) is finished with that answer, and once DingTalk takes it a second
receipt says so: ``accepted``, reason ``card_final_late`` — what the person finally saw —
and the run, which ended ``failed``, is ``done``.
"""

from __future__ import annotations

from agent.cards.broker import CardBroker, OpenCard, cut_off_text
from agent.contracts import (
    ActionKind,
    AttemptOutcome,
    CardReason,
    CardState,
    Channel,
    Evidence,
    Receipt,
    ReceiptStatus,
    Run,
    RunState,
)

STOPPED = "the runtime stopped mid-answer"


async def recover(cards: CardBroker, event_id: str) -> int:
    """Finalize the cards an earlier execution of this event left open; how many."""
    store, clock = cards.store, cards.clock
    run = store.get_run(event_id)
    if run is None:
        return 0
    intents = {intent.intent_id: intent for intent in store.intents(event_id)}
    closed = 0
    for card in store.open_cards(event_id):
        intent = intents.get(card.intent_id)
        if intent is None:
            continue
        for attempt in store.open_attempts(card.intent_id):
            attempt.outcome, attempt.finished_at = AttemptOutcome.UNCERTAIN, clock.now()
            attempt.evidence = Evidence(
                channels_tried=[Channel.CARD],
                detail="the runtime stopped during this card call; outcome unknown",
            )
            store.save_card(card, done=attempt)
        exists = None if card.state is CardState.CREATED else True
        handle = OpenCard(card, intent, exists=exists)
        if store.has_receipt(card.intent_id):  # its word is on record: only the platform
            final = card.final or cut_off_text(card.streamed)
            frame, _ = await cards.close_on_platform(handle, final)
            late = _late_receipt(store.receipts(event_id), card.intent_id)
            if late is not None and frame.ok:
                _finished_late(cards, run, late, card.frames)
            store.save_card(card)
        else:
            await cards.finish(run, handle, cut_off_text(card.streamed), None, cut_off=STOPPED)
        closed += 1
    return closed


async def sweep(cards: CardBroker, everything: bool = False) -> int:
    """Close open cards whose run has ended and that were quiet for ``card_stall_s`` (all of
    them with ``everything``, at start-up): no card is left spinning for good."""
    before = float("inf") if everything else cards.clock.now() - cards.stall_s
    events = dict.fromkeys(card.event_id for card in cards.store.cards_to_close(before))
    closed = 0
    for event_id in events:
        closed += await recover(cards, event_id)
    return closed


def _late_receipt(receipts: list[Receipt], intent_id: str) -> Receipt | None:
    """The intent's ``card_final_late`` receipt, unless its late finish is on record too."""
    mine = [r for r in receipts if r.intent_id == intent_id]
    late = [r for r in mine if r.reason == CardReason.FINAL_LATE.value]
    if not late or any(r.status is ReceiptStatus.ACCEPTED for r in late):
        return None
    return late[0]


def _finished_late(cards: CardBroker, run: Run, late: Receipt, frames: int) -> None:
    """The whole answer is on the card now: a receipt that says so, and the run done."""
    evidence = late.evidence.model_copy(
        update={
            "detail": "the final frame went later, from the recovery loop: the card shows the"
            " whole answer",
            "frames": frames,
        }
    )
    receipt = cards.broker.receipt(
        run,
        ActionKind.REPLY,
        ReceiptStatus.ACCEPTED,
        intent_id=late.intent_id,
        reason=CardReason.FINAL_LATE.value,
        evidence=evidence,
    )
    ended = None
    if run.state is RunState.FAILED:
        ended = run.model_copy(
            update={"state": RunState.DONE, "failure": None, "updated_at": cards.clock.now()}
        )
    cards.store.add_receipt(receipt, ended)
