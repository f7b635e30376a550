"""Loads the store facts the action gate decides on.

The gate (``gates.action``) is a pure decision over data; reading the store lives here so
the gates package needs nothing but the contracts, and a decision can be replayed from the
facts alone. The pipeline calls ``load_facts`` right before every ``ActionGate.decide``:
the facts must be fresh, since each approved intent spends budget and takes a key.
"""

from __future__ import annotations

from agent.contracts import Run
from gates.action import DAY_S, MINUTE_S, ActionFacts, slot_keys
from storage import Store


def load_facts(
    store: Store, run: Run, now: float, webhook_problem: str | None = None
) -> ActionFacts:
    """The run's thread generation, the write-budget counts and its taken idempotency
    slots, as of ``now`` (one store statement); ``webhook_problem`` is the transport's
    word on the origin's session webhook."""
    generation, last_minute, last_day, taken = store.actions.gate_facts(
        run.thread_key,
        run.origin.conversation_id,
        now - MINUTE_S,
        now - DAY_S,
        slot_keys(run.event_id),
    )
    # rarely: a slot taken with no receipt yet, maybe by this run's own card that a stop
    # left showing nothing (storage/cards.py, take_up_card)
    blank = frozenset(
        key
        for key, first in taken.items()
        if first is None and store.cards.card_to_take_up(key, run.run_id)
    )
    return ActionFacts(
        now=now,
        thread_generation=generation,
        writes_last_minute=last_minute,
        writes_last_day=last_day,
        taken_keys=taken,
        blank_card_keys=blank,
        webhook_problem=webhook_problem,
    )
