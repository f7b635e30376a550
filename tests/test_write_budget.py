"""The day's write budget counts the writes stamped inside the day, whatever order the rows
came in: a clock stepped back or a restored backup must neither fill the budget nor hide
writes from it (issue 24: the row-id span read 100,500 writes and refused every reply)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.contracts import ActionIntent, ActionKind, ConversationType, Origin
from storage import Store
from tests.factories import T0

DAY = 86_400.0


def intent(n: int, at: float, conversation: str = "cid-1") -> ActionIntent:
    return ActionIntent(
        intent_id=f"int-{n}",
        run_id=f"run-{n}",
        event_id=f"m{n}",
        kind=ActionKind.REPLY,
        idempotency_key=f"m{n}:terminal",
        target=Origin(
            conversation_id=conversation, conversation_type=ConversationType.DM, user_id="u1"
        ),
        gate_checks=["schema"],
        created_at=at,
    )


def writes_today(store: Store, now: float, conversation: str = "cid-1") -> tuple[int, int]:
    _, minute, day, _ = store.actions.gate_facts("t", conversation, now - 60, now - DAY, ["none"])
    return minute, day


def counted(store: Store, since: float) -> int:
    """What the budget must say: the ledger's rows stamped after ``since``, counted."""
    return int(store.db._scalar("SELECT COUNT(*) FROM budget_ledger WHERE at > ?", (since,)))


def test_rows_out_of_time_order_are_counted_by_their_time(store: Store) -> None:
    """A clock that ran a day ahead and was stepped back: the rows it stamped in the future
    count as today's (as a count over the time says); each new one counts once."""
    now = T0
    for n in range(300):  # stamped by the clock that ran ahead
        store.actions.add_intent(intent(n, now + DAY + n))
    for n in range(300, 310):  # the clock stepped back
        store.actions.add_intent(intent(n, now - 5 + n / 100))
    assert writes_today(store, now)[1] == counted(store, now - DAY) == 310
    # A restored backup: old rows, from before the day, come back behind newer row ids.
    for n in range(310, 400):
        store.actions.add_intent(intent(n, now - 2 * DAY + n))
    assert writes_today(store, now)[1] == 310
    # Tomorrow the future-stamped rows are still inside the window; the rest has left it.
    assert writes_today(store, now + DAY)[1] == counted(store, now) == 300


def test_a_forgotten_unsent_intent_gives_its_write_back(store: Store) -> None:
    for n in range(5):
        store.actions.add_intent(intent(n, T0 - n * 3600))
    store.actions.forget_unsent("int-2")
    assert writes_today(store, T0)[1] == 4
    store.actions.drop_unsent_intents()  # every intent without an attempt: all the rest
    assert writes_today(store, T0)[1] == 0


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    offsets=st.lists(st.floats(-3 * DAY, 2 * DAY, allow_nan=False), min_size=1, max_size=60),
    seed=st.integers(0, 2**16),
)
def test_the_count_equals_counting_rows_for_any_order_and_any_moment(
    tmp_path_factory: pytest.TempPathFactory, offsets: list[float], seed: int
) -> None:
    """Against a plain count, on hour edges too: any stamps, some forgotten, any moment."""
    store = Store(tmp_path_factory.mktemp("budget") / "dta.db")
    try:
        rng = random.Random(seed)
        for n, offset in enumerate(offsets):
            store.actions.add_intent(intent(n, T0 + offset))
        for n in rng.sample(range(len(offsets)), k=len(offsets) // 3):
            store.actions.forget_unsent(f"int-{n}")
        edges = [T0 + offset for offset in offsets] + [T0 + rng.uniform(-DAY, 3 * DAY)]
        for now in edges + [DAY + edge for edge in edges]:
            assert writes_today(store, now)[1] == counted(store, now - DAY)
        store.prune(T0 + DAY)
        assert writes_today(store, T0 + 2 * DAY)[1] == counted(store, T0 + DAY)
    finally:
        store.close()
