"""The store: the runtime's memory of what it heard, decided, tried and proved.

One ``Store`` owns one connection of its backend (storage/backends/: SQLite by default,
PostgreSQL for replicas); a thread that needs the store opens its own ``Store`` on the same
target. Its records come in families, each an attribute over that one connection (events,
work, actions, pieces, cards, approvals, forms, context, schedule, jobs, knowledge, usage,
feedback, inspect). Every method that changes more than one row does so in a single
transaction, so a crash leaves either all of it or none of it.

    store = Store("./.dta/dta.db")
    inserted = store.events.add_event(event, raw_frame)
    if inserted.new:
        ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.actions import ActionRecords
from storage.approvals import ApprovalRecords
from storage.base import Closing, StoreBase
from storage.cards import CardRecords
from storage.context import ContextRecords
from storage.events import EventInsert, EventRecords
from storage.feedback import FeedbackRecords
from storage.forms import FormRecords
from storage.inspect import InspectRecords
from storage.integrity import FileIdentity, StoreHealth
from storage.jobs import JobRecords
from storage.knowledge import KnowledgeRecords
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


class Store(Closing):
    """The whole store: one connection of its backend (``db``, a ``StoreBase``: transactions,
    fencing) and every record family over it, each an attribute. Its own methods are what is
    the whole store's: opening and closing, its health, pruning, the counts.

    The families hold ``db``, never the store: nothing refers back to it, so a store
    dropped unclosed is closed at once, as any object without a reference cycle."""

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
        self.db = StoreBase(
            path, synchronous, busy_timeout_s, schema=schema, checkpoints=checkpoints, owner=owner
        )
        self.events = EventRecords(self.db)
        self.work = WorkRecords(self.db)
        self.pieces = PieceRecords(self.db)
        self.actions = ActionRecords(self.db, self.pieces)  # forgetting unsent keeps owed pieces
        self.cards = CardRecords(self.db)
        self.approvals = ApprovalRecords(self.db)
        self.forms = FormRecords(self.db)  # ask-user forms waiting for their asker
        self.context = ContextRecords(self.db)
        self.schedule = ScheduleRecords(self.db)
        self.jobs = JobRecords(self.db)
        self.knowledge = KnowledgeRecords(self.db)  # snapshots from DingTalk
        self.usage = UsageRecords(self.db)
        self.feedback = FeedbackRecords(self.db)  # 👍 / 👎 on answers
        self.inspect = InspectRecords(self.db)

    # ------------------------------------------------------------------ opening, health

    def close(self) -> None:
        self.db.close()

    # The connection's own facts, as ``StoreBase`` has them.

    @property
    def path(self) -> str:
        return self.db.path

    @property
    def where(self) -> str:
        return self.db.where

    @property
    def identity(self) -> FileIdentity | None:
        return self.db.identity

    @property
    def exclusive(self) -> bool:
        return self.db.exclusive

    @property
    def conn(self) -> Any:
        """The connection, for reads of the store's own tables (``StoreBase.conn``)."""
        return self.db.conn

    def probe(self, timeout_s: float = 0.5, page_limit: int | None = None) -> StoreHealth:
        """Can the store take writes? (``StoreBase.probe``: safe from any thread)"""
        return self.db.probe(timeout_s, page_limit)

    def writable(self, timeout_s: float = 0.5) -> bool:
        return self.db.writable(timeout_s)

    def page_limit(self) -> int | None:
        return self.db.page_limit()

    # ------------------------------------------------------------------ pruning

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
            # a job's slots as old as the events they were (its newer slots are kept: the
            # next run compares with the last delivered one)
            "job_runs": "DELETE FROM job_runs WHERE at < :before",
            # askers' read rights are kept minutes, never this long
            "knowledge_reads": "DELETE FROM knowledge_reads WHERE checked_at < :before",
            # kept a month and more: the month's budget reads them
            "model_usage": "DELETE FROM model_usage WHERE at < :before - 2764800",
            # a thread with nothing left has no generation worth keeping
            "threads": "DELETE FROM threads WHERE thread_key NOT IN"
            " (SELECT thread_key FROM events)",
        }
        removed: dict[str, int] = {}
        with self.db._tx() as conn:
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
            if self.db.dialect.hourly_budget:  # hours the ledger no longer has a row in
                conn.execute("DELETE FROM budget_hours WHERE writes <= 0")
        return removed

    def vacuum(self) -> None:
        """Give the freed pages back to the file system (rewrites the file; needs space)."""
        self.db.conn.execute("VACUUM")

    # ------------------------------------------------------------------ counts

    def counts(self) -> Counts:
        def count(sql: str) -> int:
            return int(self.db._scalar(sql))

        return Counts(
            events=count("SELECT COUNT(*) FROM events"),
            duplicates=count("SELECT COUNT(*) FROM deliveries WHERE duplicate = 1"),
            quarantined=count("SELECT COUNT(*) FROM quarantine"),
            runs=count("SELECT COUNT(*) FROM runs"),
            receipts=count("SELECT COUNT(*) FROM receipts"),
        )

    def decision_counts(self) -> list[tuple[str, str, int]]:
        """(verdict, reason, count) over every decision ever made: the metrics' source."""
        return self.db.conn.execute(
            "SELECT verdict, reason, COUNT(*) FROM decisions GROUP BY verdict, reason"
        ).fetchall()

    def receipt_counts(self) -> list[tuple[str | None, str, str | None, int]]:
        """(kind, status, reason, count) over every receipt."""
        return self.db.conn.execute(
            "SELECT kind, status, reason, COUNT(*) FROM receipts GROUP BY kind, status, reason"
        ).fetchall()


__all__ = ["Counts", "EventInsert", "Lease", "ModelUsage", "PendingWork", "Store", "TokensSpent"]
