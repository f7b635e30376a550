"""The SQLite store: the runtime's memory of what it heard, decided, tried and proved.

One ``Store`` owns one connection; a thread that needs the store opens its own ``Store`` on
the same file (WAL lets readers and one writer work side by side). Every method that
changes more than one row does so in a single transaction, so a crash leaves either all
of it or none of it.

    store = Store("./.dta/dta.db")
    inserted = store.add_event(event, raw_frame)
    if inserted.new:
        ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.contracts import (
    ActionIntent,
    Attempt,
    Event,
    Receipt,
    ResponseDecision,
)
from storage.actions import ActionRecords
from storage.context import ContextRecords
from storage.events import EventInsert, EventRecords


@dataclass(frozen=True)
class Counts:
    events: int
    duplicates: int
    quarantined: int
    runs: int
    receipts: int


class Store(EventRecords, ActionRecords, ContextRecords):
    """The whole store: every record family over one connection (see ``StoreBase``)."""

    # ------------------------------------------------------------------ reading back

    def decisions(self) -> list[ResponseDecision]:
        rows = self.db.conn.execute("SELECT decision_json FROM decisions ORDER BY rowid").fetchall()
        return [ResponseDecision.model_validate_json(row[0]) for row in rows]

    def receipts(self, event_id: str | None = None) -> list[Receipt]:
        if event_id is None:
            rows = self.db.conn.execute("SELECT receipt_json FROM receipts ORDER BY rowid")
        else:
            rows = self.db.conn.execute(
                "SELECT receipt_json FROM receipts WHERE event_id = ? ORDER BY rowid", (event_id,)
            )
        return [Receipt.model_validate_json(row[0]) for row in rows.fetchall()]

    def intents(self, event_id: str | None = None) -> list[ActionIntent]:
        if event_id is None:
            rows = self.db.conn.execute("SELECT intent_json FROM intents ORDER BY rowid")
        else:
            rows = self.db.conn.execute(
                "SELECT intent_json FROM intents WHERE event_id = ? ORDER BY rowid", (event_id,)
            )
        return [ActionIntent.model_validate_json(row[0]) for row in rows.fetchall()]

    def attempts(self, intent_id: str) -> list[Attempt]:
        rows = self.db.conn.execute(
            "SELECT attempt_json FROM attempts WHERE intent_id = ? ORDER BY rowid", (intent_id,)
        ).fetchall()
        return [Attempt.model_validate_json(row[0]) for row in rows]

    def events(self) -> list[Event]:
        rows = self.db.conn.execute("SELECT event_json FROM events ORDER BY rowid").fetchall()
        return [Event.model_validate_json(row[0]) for row in rows]

    def runs_per_event(self) -> dict[str, int]:
        rows = self.db.conn.execute(
            "SELECT event_id, COUNT(*) FROM runs GROUP BY event_id"
        ).fetchall()
        return {event_id: count for event_id, count in rows}

    def quarantined(self) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM quarantine ORDER BY id"))

    def deliveries(self, event_id: str) -> int:
        return int(self._scalar("SELECT COUNT(*) FROM deliveries WHERE event_id = ?", (event_id,)))

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
        return self.db.conn.execute(
            "SELECT verdict, reason, COUNT(*) FROM decisions GROUP BY verdict, reason"
        ).fetchall()

    def receipt_counts(self) -> list[tuple[str | None, str, str | None, int]]:
        """(kind, status, reason, count) over every receipt."""
        return self.db.conn.execute(
            "SELECT kind, status, reason, COUNT(*) FROM receipts GROUP BY kind, status, reason"
        ).fetchall()


__all__ = ["Counts", "EventInsert", "Store"]
