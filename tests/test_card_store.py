"""AI card records, on both backends: stored with the intent before I/O, finished together."""

from __future__ import annotations

from typing import Any

from agent.contracts import (
    ActionIntent,
    ActionKind,
    Attempt,
    AttemptOutcome,
    Card,
    CardState,
    Channel,
    ConversationType,
    MessageContent,
    Origin,
    Receipt,
    ReceiptStatus,
    RunState,
)
from storage import Store
from tests.factories import T0, event, run_for

NOW = T0


def open_run_for(store: Store, event_id: str) -> Any:
    ev = event(msg_id=event_id)
    store.events.add_event(ev, "{}")
    run = run_for(ev).model_copy(update={"run_id": f"run-{event_id}"})
    return store.work.open_run(run)


def _intent(event_id: str, run_id: str) -> ActionIntent:
    return ActionIntent(
        intent_id=f"int-{event_id}",
        run_id=run_id,
        event_id=event_id,
        kind=ActionKind.REPLY,
        idempotency_key=f"{event_id}:terminal",
        target=Origin(conversation_id="cid-1", conversation_type=ConversationType.DM, user_id="u1"),
        gate_checks=["schema"],
        created_at=NOW,
    )


def _card(intent: ActionIntent, out: str) -> Card:
    return Card(
        out_track_id=out,
        intent_id=intent.intent_id,
        run_id=intent.run_id,
        event_id=intent.event_id,
        conversation_id="cid-1",
        template_id="tpl.schema",
        content_key="content",
        created_at=NOW,
        updated_at=NOW,
    )


def _attempt(intent: ActionIntent, name: str) -> Attempt:
    return Attempt(
        attempt_id=name,
        intent_id=intent.intent_id,
        channel=Channel.CARD,
        started_at=NOW,
        request_digest="d",
    )


def _receipt(intent: ActionIntent, status: ReceiptStatus) -> Receipt:
    return Receipt(
        receipt_id=f"rcp-{intent.intent_id}",
        run_id=intent.run_id,
        event_id=intent.event_id,
        intent_id=intent.intent_id,
        kind=ActionKind.REPLY,
        status=status,
        gate_version="action-gate/1",
        skill_snapshot="s",
        created_at=NOW,
        updated_at=NOW,
    )


def _opened(store: Store, event_id: str = "m1") -> tuple[Any, ActionIntent, Card, Attempt]:
    run = open_run_for(store, event_id)
    intent = _intent(event_id, run.run_id)
    card = _card(intent, f"dta_{event_id}")
    attempt = _attempt(intent, f"att-{event_id}-1")
    assert store.cards.open_card(intent, attempt, card)
    return run, intent, card, attempt


def test_a_cis_stored_with_its_iand_create_attempt_and_holds_the_slot(store: Store):
    run, intent, _c, _ = _opened(store)
    again = intent.model_copy(update={"intent_id": "int-other"})
    other = _card(again, "dta_other")
    assert not store.cards.open_card(again, _attempt(again, "att-other"), other)
    assert [c.out_track_id for c in store.cards.all()] == ["dta_m1"]
    assert [a.channel for a in store.cards.open_attempts(intent.intent_id)] == [Channel.CARD]
    assert store.cards.open_cards("m1")[0].state is CardState.CREATED
    # the intent took the write budget, once
    _, last_minute, _, taken = store.actions.gate_facts(
        run.thread_key, "cid-1", NOW - 60, NOW - 86400, ["m1:terminal"]
    )
    assert last_minute == 1 and "m1:terminal" in taken


def test_frames_and_the_finish_are_recorded_and_the_run_ends_with_the_receipt(store: Store):
    run, intent, card, attempt = _opened(store)
    attempt.outcome, attempt.finished_at = AttemptOutcome.ACCEPTED, NOW
    card.state, card.frames, card.streamed = CardState.STREAMING, 3, "so far"
    store.cards.save_card(card, done=attempt)
    assert store.cards.card_for_intent(intent.intent_id).streamed == "so far"
    assert store.cards.open_attempts(intent.intent_id) == []

    final = _attempt(intent, "att-m1-2")
    store.cards.save_card(card, start=final)
    final.outcome, final.finished_at = AttemptOutcome.ACCEPTED, NOW
    card.state, card.final = CardState.FINALIZED, "the answer"
    content = MessageContent(msgtype="card", text="the answer")
    receipt = _receipt(intent, ReceiptStatus.ACCEPTED)
    ended = run.model_copy(update={"state": RunState.DONE})
    outbound = {
        "intent_id": intent.intent_id,
        "process_query_key": "carrier",
        "conversation_id": "cid-1",
        "channel": "card",
        "text": "the answer",
        "sent_at": NOW,
    }
    store.cards.finish_card(
        card, intent.model_copy(update={"content": content}), receipt, final, outbound, ended
    )
    assert store.cards.open_cards("m1") == []
    assert store.actions.intents("m1")[0].content == content
    assert store.actions.receipts("m1")[0].status is ReceiptStatus.ACCEPTED
    assert store.events.get_run("m1").state is RunState.DONE
    assert store.cards.has_receipt(intent.intent_id)


def test_open_cards_of_ended_runs_are_found_for_closing(store: Store):
    run, _i, card, _ = _opened(store)
    assert store.cards.cards_to_close(before=float("inf")) == []  # its run still works
    store.events.save_run(run.model_copy(update={"state": RunState.FAILED}))
    assert [c.out_track_id for c in store.cards.cards_to_close(before=float("inf"))] == ["dta_m1"]
    assert store.cards.cards_to_close(before=NOW - 1) == []  # touched too recently
    card.state = CardState.FINALIZED
    store.cards.save_card(card)
    assert store.cards.cards_to_close(before=float("inf")) == []


def test_the_card_call_budget_is_shared_by_every_process_on_the_store(
    store: Store, store_target: tuple[str, str | None]
):
    where, schema = store_target
    other = Store(where, schema=schema)  # a second replica on the same database
    try:
        taken = [store.cards.take_card_slot(100, 3), other.cards.take_card_slot(100, 3)]
        taken += [store.cards.take_card_slot(100, 3), other.cards.take_card_slot(100, 3)]
        assert taken == [True, True, True, False]
        assert other.cards.take_card_slot(101, 3)  # the next second has its own budget
        assert store.cards.take_card_slot(500, 3)  # old seconds are forgotten as time moves
    finally:
        other.close()


def test_prune_forgets_the_cards_of_pruned_events(store: Store):
    run, _i, card, attempt = _opened(store)
    attempt.outcome = AttemptOutcome.ACCEPTED
    card.state = CardState.FINALIZED
    store.cards.save_card(card, done=attempt)
    store.events.save_run(run.model_copy(update={"state": RunState.DONE}))
    removed = store.prune(before=float("inf"))
    assert removed["cards"] == 1 and store.cards.all() == []


def test_a_stop_is_found_on_any_card_of_the_answer(store: Store):
    assert not store.cards.card_stop_requested()
    assert not store.cards.card_stop_requested("dta_a", "dta_b")
    assert store.cards.request_card_stop("dta_a", "u1", NOW)
    assert not store.cards.request_card_stop("dta_a", "u1", NOW)  # pressed before
    assert store.cards.card_stop_requested("dta_a") and store.cards.card_stop_requested(
        "dta_b", "dta_a"
    )
    assert not store.cards.card_stop_requested("dta_b")


def _waiting(store: Store, event_id: str = "m1") -> tuple[Any, ActionIntent, Card]:
    """A card stored before its create waits for a slot: no attempt yet."""
    run = open_run_for(store, event_id)
    intent = _intent(event_id, run.run_id)
    card = _card(intent, f"dta_{event_id}")
    assert store.cards.open_card(intent, None, card)
    return run, intent, card


def test_a_card_whose_create_never_left_goes_with_its_intent(store: Store):
    run, intent, _card = _waiting(store)
    assert store.actions.attempts(intent.intent_id) == []  # nothing recorded as sent while it waits
    assert store.actions.drop_unsent_intents("m1") == 1
    assert store.cards.all() == [] and store.actions.intents("m1") == []
    # the slot and the budget are free again: the next execution answers afresh
    _, last_minute, _, taken = store.actions.gate_facts(
        run.thread_key, "cid-1", NOW - 60, NOW - 86400, ["m1:terminal"]
    )
    assert last_minute == 0 and taken == {}


def test_a_card_only_throttled_is_forgotten_one_that_may_exist_is_not(store: Store):
    run, intent, card = _waiting(store)
    throttled = _attempt(intent, "att-m1-1")
    store.actions.start_attempt(throttled)
    throttled.outcome, throttled.finished_at = AttemptOutcome.FAILED, NOW
    store.cards.save_card(card, done=throttled)
    assert store.cards.forget_unsent_cards("m1", run.run_id) == 1
    assert store.cards.all() == [] and store.actions.intents("m1") == []

    run2, intent2, card2 = _waiting(store, "m2")
    unknown = _attempt(intent2, "att-m2-1")
    store.actions.start_attempt(unknown)
    unknown.outcome = AttemptOutcome.UNCERTAIN  # a stop cut it on the wire
    store.cards.save_card(card2, done=unknown)
    assert store.cards.forget_unsent_cards("m2", run2.run_id) == 0
    assert [c.out_track_id for c in store.cards.all()] == ["dta_m2"]


def test_a_blank_card_is_taken_up_by_its_own_run_under_its_intent(store: Store):
    run, intent, card, attempt = _opened(store)
    attempt.outcome, attempt.finished_at = AttemptOutcome.ACCEPTED, NOW
    card.state = CardState.STREAMING
    store.cards.save_card(card, done=attempt)
    assert store.cards.card_to_take_up("m1:terminal", run.run_id)
    assert not store.cards.card_to_take_up("m1:terminal", "run-other")  # only the run's own
    again = intent.model_copy(update={"intent_id": "int-new", "created_at": NOW + 5})
    taken = store.cards.take_up_card(again)
    assert taken is not None
    card_taken, intent_taken = taken
    assert card_taken.out_track_id == "dta_m1" and intent_taken.intent_id == intent.intent_id
    assert store.actions.intents("m1")[0].created_at == NOW + 5  # the new approval, the same record
    # one that shows something is never taken up
    card.frames, card.streamed = 1, "第一"
    store.cards.save_card(card)
    assert not store.cards.card_to_take_up("m1:terminal", run.run_id)
    assert store.cards.take_up_card(again) is None


def test_a_fallback_that_never_left_goes_with_its_card(store: Store):
    # the create was refused (nothing taken) and the markdown that replaces it waited for a
    # pool place when the runtime stopped: nothing of the answer reached anyone
    run, intent, card = _waiting(store)
    refused = _attempt(intent, "att-m1-1")
    store.actions.start_attempt(refused)
    refused.outcome, refused.finished_at = AttemptOutcome.FAILED, NOW
    card.state = CardState.ABANDONED
    store.cards.save_card(card, done=refused)
    assert store.cards.forget_unsent_cards("m1", run.run_id) == 1
    assert store.cards.all() == [] and store.actions.intents("m1") == []
