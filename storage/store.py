"""The store: the runtime's memory of what it heard, decided, tried and proved.

One ``Store`` owns one connection of its backend (storage/backends/: SQLite by default,
PostgreSQL for replicas); a thread that needs the store opens its own ``Store`` on the same
target. Its records come in families, each an attribute over that one connection (events,
work, actions, pieces, cards, approvals, context, schedule, usage, inspect). Every method
that changes more than one row does so in a single transaction, so a crash leaves either
all of it or none of it.

    store = Store("./.dta/dta.db")
    inserted = store.events.add_event(event, raw_frame)
    if inserted.new:
        ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage.actions import ActionRecords
from storage.approvals import ApprovalRecords
from storage.base import StoreBase
from storage.cards import CardRecords
from storage.context import ContextRecords
from storage.events import EventInsert, EventRecords
from storage.inspect import InspectRecords
from storage.pieces import PieceRecords
from storage.schedule import ScheduleRecords
from storage.usage import ModelUsage, TokensSpent, UsageRecords
from storage.work import Lease, PendingWork, WorkRecords


@dataclass(frozen=True)
class Counts:
    events: int
    duplicates: int
    quarantined: int
    runs: int
    receipts: int


class Store(StoreBase):
    """The whole store: its connection and transactions (``StoreBase``), what is the whole
    store's (pruning, counts), and its record families over that one connection."""

    def __init__(
        self,
        path: str | Path,
        synchronous: str = "normal",
        busy_timeout_s: float = 10.0,
        *,
        schema: str | None = None,
        checkpoints: bool = True,
        owner: str | None = None,
    ) -> None:
        super().__init__(
            path, synchronous, busy_timeout_s, schema=schema, checkpoints=checkpoints, owner=owner
        )
        self.events = EventRecords(self)
        self.work = WorkRecords(self)
        self.pieces = PieceRecords(self)
        self.actions = ActionRecords(self, self.pieces)  # forgetting unsent keeps owed pieces
        self.cards = CardRecords(self)
        self.approvals = ApprovalRecords(self)
        self.context = ContextRecords(self)
        self.schedule = ScheduleRecords(self)
        self.usage = UsageRecords(self)
        self.inspect = InspectRecords(self)

    def prune(self, before: float) -> dict[str, int]:
        """Forget finished work received before ``before`` (epoch seconds).

        Safe for dedupe: an event that old would be silenced as ``stale_event`` anyway if
        DingTalk ever delivered it again. Unfinished runs, active tasks, proposed or
        approved memories and anything newer are kept. One transaction.
        """
        old_events = "SELECT event_id FROM prune_events"
        old_intents = (
            "SELECT intent_id FROM intents WHERE event_id IN (SELECT event_id FROM prune_events)"
        )
        statements = {
            "attempts": f"DELETE FROM attempts WHERE intent_id IN ({old_intents})",
            "outbound": f"DELETE FROM outbound WHERE intent_id IN ({old_intents})",
            "act_readbacks": f"DELETE FROM act_readbacks WHERE intent_id IN ({old_intents})",
            "receipts": f"DELETE FROM receipts WHERE event_id IN ({old_events})",
            "cards": f"DELETE FROM cards WHERE event_id IN ({old_events})",
            "intents": f"DELETE FROM intents WHERE event_id IN ({old_events})",
            "decisions": f"DELETE FROM decisions WHERE event_id IN ({old_events})",
            "deliveries": f"DELETE FROM deliveries WHERE event_id IN ({old_events})",
            "runs": f"DELETE FROM runs WHERE event_id IN ({old_events})",
            "events": f"DELETE FROM events WHERE event_id IN ({old_events})",
            "quarantine": "DELETE FROM quarantine WHERE received_at < :before",
            "budget_ledger": "DELETE FROM budget_ledger WHERE at < :before",
            "tasks": "DELETE FROM tasks WHERE updated_at < :before"
            " AND status NOT IN ('working', 'waiting', 'scheduled')",
            "memory_candidates": "DELETE FROM memory_candidates WHERE created_at < :before"
            " AND status IN ('rejected', 'published')",
            "identity_cache": "DELETE FROM identity_cache WHERE fetched_at < :before",
            # kept a month and more: the month's budget reads them
            "model_usage": "DELETE FROM model_usage WHERE at < :before - 2764800",
            # a thread with nothing left has no generation worth keeping
            "threads": "DELETE FROM threads WHERE thread_key NOT IN"
            " (SELECT thread_key FROM events)",
        }
        removed: dict[str, int] = {}
        with self._tx() as conn:
            # Chosen once, before any row goes: later deletes must not change the choice.
            conn.execute(
                "CREATE TEMP TABLE prune_events AS SELECT e.event_id FROM events e"
                " JOIN runs r ON r.event_id = e.event_id"
                " WHERE e.received_at < ? AND r.state != 'working'",
                (before,),
            )
            for table, sql in statements.items():
                removed[table] = conn.execute(sql, {"before": before}).rowcount
            conn.execute("DROP TABLE prune_events")
            if self.dialect.hourly_budget:  # hours the ledger no longer has a row in
                conn.execute("DELETE FROM budget_hours WHERE writes <= 0")
        return removed

    def vacuum(self) -> None:
        """Give the freed pages back to the file system (rewrites the file; needs space)."""
        self.conn.execute("VACUUM")

    # ------------------------------------------------------------------ counts

    def counts(self) -> Counts:
        def count(sql: str) -> int:
            return int(self._scalar(sql))

        return Counts(
            events=count("SELECT COUNT(*) FROM events"),
            duplicates=count("SELECT COUNT(*) FROM deliveries WHERE duplicate = 1"),
            quarantined=count("SELECT COUNT(*) FROM quarantine"),
            runs=count("SELECT COUNT(*) FROM runs"),
            receipts=count("SELECT COUNT(*) FROM receipts"),
        )

    def decision_counts(self) -> list[tuple[str, str, int]]:
        """(verdict, reason, count) over every decision ever made: the metrics' source."""
        return self.conn.execute(
            "SELECT verdict, reason, COUNT(*) FROM decisions GROUP BY verdict, reason"
        ).fetchall()

    def receipt_counts(self) -> list[tuple[str | None, str, str | None, int]]:
        """(kind, status, reason, count) over every receipt."""
        return self.conn.execute(
            "SELECT kind, status, reason, COUNT(*) FROM receipts GROUP BY kind, status, reason"
        ).fetchall()


__all__ = ["Counts", "EventInsert", "Lease", "ModelUsage", "PendingWork", "Store", "TokensSpent"]
