"""AI cards left open: each ends as what it had become, never created again.

A card is open while its state is ``created`` or ``streaming``. Two things leave one open:
an execution that stopped mid-answer (a crash, a stop past its grace, a store that failed
under it) and an end DingTalk never took (the final frame throttled past ``card_stall_s``).
The first is found when the event is driven again, before anything else happens to it
(``recover``); the second by the recovery loop once the card has been quiet for
``card_stall_s`` (``sweep``). What a stopped execution left decides its end:

- a create that never reached DingTalk (it waited for its slot, or every try was throttled)
  is forgotten with its intent when the event is driven again, and that execution answers
  afresh (``forget_unsent_cards``; so is a fallback that never left for the same reason);
- a card whose end was decided (``final``) gets that end — the same full text on the same
  card, whether or not its final frame had gone — with the receipt it was to have;
- a card created but showing nothing yet is left for the run's next execution, which puts
  its answer on it (``CardBroker.open`` takes it up; the action gate lets the run's own
  slot carry it); only the first card of an answer, and only when the event is driven
  again (the sweep, after the run ended, finalizes it cut off);
- a card that showed part of an answer ends with the text it showed and a note that the
  answer was cut off, and the receipt (written unless one already exists) says ``failed``,
  reason ``card_cut_off``.

A whole answer whose final frame came late (receipt ``failed``, reason ``card_final_late``)
is finished with that answer, and once DingTalk takes it a second receipt says so:
``accepted``, reason ``card_final_late`` — what the person finally saw — and the run, which
ended ``failed``, is ``done``.
"""

from __future__ import annotations

from agent.cards.broker import CardBroker, OpenCard, cut_off_text
from agent.cards.parts import card_parts, part_intent
from agent.contracts import (
    ActionKind,
    AttemptOutcome,
    Card,
    CardReason,
    CardState,
    Channel,
    Evidence,
    Receipt,
    ReceiptStatus,
    Run,
    RunState,
)
from storage.cards import blank

STOPPED = "the runtime stopped mid-answer"
ENDED_LATER = "the runtime stopped before the card's end went; it went after the restart"


async def recover(cards: CardBroker, event_id: str, take_up: bool = False) -> int:
    """Settle the cards an earlier execution of this event left open; how many ended.
    ``take_up``: the event is about to be driven again, and its first card that shows
    nothing yet is left for that execution's answer."""
    store = cards.store
    run = store.events.get_run(event_id)
    if run is None:
        return 0
    if take_up:  # created nowhere (a create or a fallback that waited): answered afresh
        store.cards.forget_unsent_cards(event_id, run.run_id)
    intents = {intent.intent_id: intent for intent in store.actions.intents(event_id)}
    closed = 0
    for card in store.cards.open_cards(event_id):
        intent = intents.get(card.intent_id)
        if intent is None:
            continue
        _close_cut_attempts(cards, card)
        handle = OpenCard(card, intent, exists=None if card.state is CardState.CREATED else True)
        first = "#" not in intent.idempotency_key  # a long answer's later cards stay as they were
        if store.cards.has_receipt(card.intent_id):  # its word is on record: only the platform
            await _close_late(cards, run, handle)
        elif card.final is not None:
            await _finish_decided(cards, run, handle)
        elif take_up and first and blank(card):
            continue  # the next execution's answer goes on it
        else:
            await cards.finish(run, handle, cut_off_text(card.streamed), None, cut_off=STOPPED)
        closed += 1
    return closed


async def send_owed_parts(cards: CardBroker, run: Run) -> int:
    """A long one-frame answer a crash cut between its cards (the earlier ones ended with
    their parts): the cards never opened go now, in order, once each, cut from the whole
    text kept beside its first card. How many answers went on."""
    store = cards.store
    intents = store.actions.intents(run.event_id)
    taken = {intent.idempotency_key for intent in intents}
    went_on = 0
    for intent in intents:
        content = intent.content
        if content is None or content.msgtype != "card" or "#" in intent.idempotency_key:
            continue
        kept = store.pieces.piece_bytes(intent.intent_id)
        if kept is None:
            continue  # a card of one part, or one whose last card opened
        whole = kept.decode("utf-8")
        parts = card_parts(whole, cards.block_chars)
        opened = 1
        while opened < len(parts) and f"{intent.idempotency_key}#{opened + 1}" in taken:
            opened += 1
        receipts = store.actions.intent_receipts(part_intent(intent, opened).intent_id)
        if opened < len(parts) and receipts and receipts[-1].status.delivered:
            full = content.model_copy(update={"text": whole})
            await cards.deliver(run, intent.model_copy(update={"content": full}), None, opened + 1)
            went_on += 1
        store.pieces.forget_bytes_of(intent.intent_id)
    return went_on


def _close_cut_attempts(cards: CardBroker, card: Card) -> None:
    """The card's calls a stop cut off on the wire: uncertain, never sent again as such."""
    for attempt in cards.store.cards.open_attempts(card.intent_id):
        attempt.outcome, attempt.finished_at = AttemptOutcome.UNCERTAIN, cards.clock.now()
        attempt.evidence = Evidence(
            channels_tried=[Channel.CARD],
            detail="the runtime stopped during this card call; outcome unknown",
        )
        cards.store.cards.save_card(card, done=attempt)


async def _close_late(cards: CardBroker, run: Run, handle: OpenCard) -> None:
    card = handle.card
    final = card.final or cut_off_text(card.streamed)
    frame, _ = await cards.close_on_platform(handle, final)
    late = _late_receipt(cards.store.actions.receipts(run.event_id), card.intent_id)
    if late is not None and frame.ok:
        _finished_late(cards, run, late, card.frames)
    cards.store.cards.save_card(card)


async def _finish_decided(cards: CardBroker, run: Run, handle: OpenCard) -> None:
    """The end the stopped execution had decided, put on the card now: the same full text
    on the same card (a frame replaces what it shows, so one that had gone shows it once),
    with the receipt it was to have. A card whose create's answer was lost may not exist:
    the answer then goes as text."""
    card = handle.card
    assert card.final is not None
    cut = ENDED_LATER if card.final_reason is CardReason.CUT_OFF else None
    stopped = card.final_reason is CardReason.STOPPED
    if card.state is CardState.CREATED and cut is None and not stopped:
        card.fallback = CardReason.CREATE_UNKNOWN
    await cards.finish(run, handle, card.final, None, cut_off=cut, stopped=stopped)


async def sweep(cards: CardBroker, everything: bool = False) -> int:
    """Close open cards whose run has ended and that were quiet for ``card_stall_s`` (all of
    them with ``everything``, at start-up): no card is left spinning for good."""
    before = float("inf") if everything else cards.clock.now() - cards.stall_s
    events = dict.fromkeys(card.event_id for card in cards.store.cards.cards_to_close(before))
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
    cards.store.actions.add_receipt(receipt, ended)
