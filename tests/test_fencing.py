"""Fencing on a store replicas share: a replica that lost a run's lease (paused past it,
cut off from the store) writes nothing more for that run, in the same transaction as the
check; the replica that took the run over writes as usual (issue 24: a paused replica
wrote receipts into runs it no longer owned and sent their replies)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.contracts import (
    ActionIntent,
    ActionKind,
    Attempt,
    AttemptOutcome,
    Channel,
    ConversationType,
    Evidence,
    Origin,
    Receipt,
    ReceiptStatus,
    RunState,
)
from storage import Lease, LeaseLost, Store
from tests.conftest import PG_URL
from tests.factories import T0, event, run_for


@pytest.fixture
def replicas(pg_schema: str) -> Iterator[tuple[Store, Store]]:
    first = Store(PG_URL, schema=pg_schema, owner="replica-a")
    second = Store(PG_URL, schema=pg_schema, owner="replica-b")
    yield first, second
    first.close()
    second.close()


def intent(run_id: str, n: int = 1) -> ActionIntent:
    return ActionIntent(
        intent_id=f"int-{n}",
        run_id=run_id,
        event_id="m1",
        kind=ActionKind.REPLY,
        idempotency_key=f"m1:terminal:{n}",
        target=Origin(conversation_id="cid-1", conversation_type=ConversationType.DM, user_id="u1"),
        gate_checks=["schema"],
        created_at=T0,
    )


def attempt(n: int = 1) -> Attempt:
    return Attempt(
        attempt_id=f"att-{n}",
        intent_id=f"int-{n}",
        channel=Channel.SESSION_WEBHOOK,
        started_at=T0,
        request_digest="d",
    )


def receipt(run_id: str, n: int = 1) -> Receipt:
    return Receipt(
        receipt_id=f"rcp-{n}",
        run_id=run_id,
        event_id="m1",
        intent_id=f"int-{n}",
        kind=ActionKind.REPLY,
        status=ReceiptStatus.ACCEPTED,
        evidence=Evidence(),
        gate_version="test",
        skill_snapshot="s",
        created_at=T0,
        updated_at=T0,
    )


def test_a_replica_that_lost_the_lease_writes_nothing_more_for_the_run(replicas) -> None:
    first, second = replicas
    ev = event(msg_id="m1")
    first.events.add_event(ev, "{}")
    run = first.work.open_run(run_for(ev), None, Lease("replica-a", T0 + 60, T0))
    assert run is not None
    assert first.actions.add_intent(intent(run.run_id), attempt())  # its own: written
    # The first replica pauses past its lease; the second takes the run over.
    assert (
        second.work.open_run(run_for(ev), None, Lease("replica-b", T0 + 200, T0 + 100)) is not None
    )

    sent = attempt()
    sent.outcome, sent.finished_at = AttemptOutcome.ACCEPTED, T0 + 101
    done = run.model_copy(update={"state": RunState.DONE})
    writes = [
        lambda: first.actions.add_intent(intent(run.run_id, 2), attempt(2)),
        lambda: first.actions.finish_delivery(sent, receipt(run.run_id), None, done),
        lambda: first.actions.add_receipt(receipt(run.run_id, 3), done),
        lambda: first.events.save_run(done),
        lambda: first.actions.finish_attempt(sent),
        lambda: first.actions.forget_unsent("int-1"),
    ]
    for write in writes:
        with pytest.raises(LeaseLost) as lost:
            write()
        assert lost.value.holder == "replica-b" and lost.value.run_id == run.run_id
    assert [i.intent_id for i in second.actions.intents()] == ["int-1"]
    assert second.actions.receipts() == [] and second.events.get_run("m1").state is RunState.WORKING
    assert [a.outcome for a in second.actions.attempts("int-1")] == [AttemptOutcome.STARTED]
    # The new owner writes as usual: its receipt is the run's one last word.
    second.actions.finish_delivery(sent, receipt(run.run_id), None, done)
    assert [r.receipt_id for r in second.actions.receipts()] == ["rcp-1"]


def test_a_run_still_held_is_written_and_an_unowned_one_too(replicas) -> None:
    first, _ = replicas
    ev = event(msg_id="m1")
    first.events.add_event(ev, "{}")
    run = first.work.open_run(run_for(ev))  # no lease (an operator's send, a test): no owner
    assert run is not None and first.actions.add_intent(intent(run.run_id), attempt())
    first.actions.add_receipt(receipt(run.run_id))
    assert len(first.actions.receipts()) == 1


def test_sqlite_has_one_daemon_per_file_and_no_fence(tmp_path) -> None:
    store = Store(tmp_path / "dta.db", owner="replica-a")
    try:
        assert store.db.owner is None  # the instance lock already keeps every other owner out
    finally:
        store.close()
