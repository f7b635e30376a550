"""What the approvals run reads from the store: a message a pause silenced, the settlement
events, and whether everything is quiet."""

from __future__ import annotations

from typing import Any

from lab.reliability.daemon import unfinished_runs


def silenced_by_pause(store: Any, msg: str) -> bool:
    """Whether the paused robot silenced ``msg`` (its decision, or a receipt, says so)."""
    decision = store.events.get_decision(msg)
    if decision is not None and str(decision.reason) == "paused":
        return True
    return any(r.reason == "paused" for r in store.actions.receipts(msg))


def settlement_events(store: Any) -> list[str]:
    """The runtime's own events that carry out a decision or tell a read-back's finding."""
    return [
        e.event_id
        for e in store.events.all()
        if e.event_id.startswith(("approval:", "act-checked:"))
    ]


def all_quiet(store: Any, sent: list[str]) -> bool:
    """Nothing open, owed or at work, for ``sent`` (the requests, with codes the replies
    too) and the settlement events."""
    pending = sum(a.status.is_open for a in store.approvals.all(limit=100_000))
    return (
        pending == 0
        and not store.approvals.unsettled_approvals()
        and not store.approvals.uncertain_acts()
        and unfinished_runs(store, [*sent, *settlement_events(store)]) == 0
    )
