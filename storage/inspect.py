"""Read queries for the people who inspect the store: ``dta trace`` and the web console.

They only read, so they never take the daemon's write lock and are safe while it runs.
The SQL is the dialect every backend of the store speaks (``?`` placeholders, no
backend-only functions); JSON columns are parsed here and filtered in Python, never with
a database's JSON functions, so the same queries work on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.contracts import (
    Event,
    TaskCheckpoint,
)
from storage.base import Family

# The filters the console offers; each is a condition on an event's receipts or run.
FILTERS = ("silent", "failed", "uncertain", "refused")


def _filter(only: str, reason: str | None) -> tuple[str, list[Any]]:
    """The WHERE condition (and its parameters) for one of ``FILTERS``."""
    if only == "silent":
        narrow = " AND r.reason = ?" if reason else ""
        return (
            "EXISTS (SELECT 1 FROM receipts r WHERE r.event_id = e.event_id"
            f" AND r.status = 'silent'{narrow})",
            [reason] if reason else [],
        )
    if only == "failed":
        return (
            "(EXISTS (SELECT 1 FROM runs u WHERE u.event_id = e.event_id"
            " AND u.state IN ('failed', 'interrupted')) OR EXISTS (SELECT 1 FROM receipts r"
            " WHERE r.event_id = e.event_id AND r.status = 'failed'))",
            [],
        )
    if only in ("uncertain", "refused"):
        return (
            "EXISTS (SELECT 1 FROM receipts r WHERE r.event_id = e.event_id"
            f" AND r.status = '{only}')",
            [],
        )
    raise ValueError(f"unknown filter {only!r}; one of {', '.join(FILTERS)}")


@dataclass(frozen=True)
class ConversationSummary:
    conversation_id: str
    messages: int
    senders: int
    last_received_at: float


@dataclass(frozen=True)
class Delivery:
    received_at: float
    duplicate: bool


def _like(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere, its own wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class InspectRecords(Family):
    """Read-only lookups by message, conversation, sender, text and time."""

    def find_events(
        self,
        *,
        msg_id: str | None = None,
        conversation: str | None = None,
        sender: str | None = None,
        text: str | None = None,
        since: float | None = None,
        until: float | None = None,
        only: str | None = None,
        reason: str | None = None,
        limit: int = 50,
    ) -> list[Event]:
        """Events matching every given condition, newest first (at most ``limit``).

        ``text`` is a substring of the message text; ``only`` is one of ``FILTERS``
        (``reason`` narrows ``silent`` to one reason code).
        """
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("e.event_id", msg_id),
            ("e.conversation_id", conversation),
            ("e.actor_id", sender),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            where.append("e.received_at >= ?")
            params.append(since)
        if until is not None:
            where.append("e.received_at <= ?")
            params.append(until)
        if text:
            # The text sits in the event's JSON: LIKE narrows, the parsed text decides.
            where.append("e.event_json LIKE ? ESCAPE '\\'")
            params.append(_like(text))
        if only is not None:
            condition, extra = _filter(only, reason)
            where.append(condition)
            params.extend(extra)
        sql = "SELECT e.event_json FROM events e"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY e.received_at DESC, e.event_id DESC LIMIT ?"
        rows = self.db.conn.execute(sql, (*params, max(limit * 4, limit) if text else limit))
        events = [Event.model_validate_json(row[0]) for row in rows.fetchall()]
        if text:
            events = [event for event in events if text in event.text][:limit]
        return events

    def conversations(self, limit: int = 100) -> list[ConversationSummary]:
        """Conversations with stored messages, the most recently active first."""
        rows = self.db.conn.execute(
            "SELECT conversation_id, COUNT(*), COUNT(DISTINCT actor_id), MAX(received_at)"
            " FROM events GROUP BY conversation_id ORDER BY MAX(received_at) DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [ConversationSummary(c, int(n), int(s), float(t)) for c, n, s, t in rows]

    def silence_reasons(self) -> dict[str, int]:
        """How many silent receipts each reason has (the console's filter list)."""
        rows = self.db.conn.execute(
            "SELECT reason, COUNT(*) FROM receipts WHERE status = 'silent'"
            " GROUP BY reason ORDER BY COUNT(*) DESC"
        ).fetchall()
        return {str(reason): int(count) for reason, count in rows}

    def delivery_log(self, event_id: str) -> list[Delivery]:
        """Each time the platform delivered the message, duplicates included."""
        rows = self.db.conn.execute(
            "SELECT received_at, duplicate FROM deliveries WHERE event_id = ?"
            " ORDER BY received_at, id",
            (event_id,),
        ).fetchall()
        return [Delivery(float(at), bool(duplicate)) for at, duplicate in rows]

    def quarantine_mentioning(self, fragment: str, limit: int = 5) -> list[dict[str, Any]]:
        """Quarantined frames whose raw text contains ``fragment`` (a msgId, usually)."""
        rows = self.db.conn.execute(
            "SELECT received_at, reason, error FROM quarantine WHERE raw LIKE ? ESCAPE '\\'"
            " ORDER BY received_at DESC LIMIT ?",
            (_like(fragment), limit),
        ).fetchall()
        return [{"received_at": at, "reason": reason, "error": error} for at, reason, error in rows]

    def tasks_in_scope(self, scope_id: str) -> list[TaskCheckpoint]:
        rows = self.db.conn.execute(
            "SELECT task_json FROM tasks WHERE scope_id = ? ORDER BY updated_at", (scope_id,)
        ).fetchall()
        return [TaskCheckpoint.model_validate_json(row[0]) for row in rows]

    def change_mark(self) -> tuple[int, ...]:
        """A value that changes whenever something a viewer shows changes (live updates)."""
        row = self.db.conn.execute(
            "SELECT (SELECT COUNT(*) FROM events), (SELECT COUNT(*) FROM deliveries),"
            " (SELECT COUNT(*) FROM receipts), (SELECT COUNT(*) FROM quarantine),"
            " (SELECT COUNT(*) FROM runs WHERE state = 'working'),"
            " (SELECT COALESCE(SUM(revision), 0) FROM memory_candidates),"
            " (SELECT COALESCE(SUM(revision), 0) FROM tasks)"
        ).fetchone()
        return tuple(int(value or 0) for value in row)

    def newest_events(self, after: float, limit: int = 100) -> list[tuple[float, Event]]:
        """Events received after ``after``, oldest first, with their arrival time."""
        rows = self.db.conn.execute(
            "SELECT received_at, event_json FROM events WHERE received_at > ?"
            " ORDER BY received_at, event_id LIMIT ?",
            (after, limit),
        ).fetchall()
        return [(float(at), Event.model_validate_json(event)) for at, event in rows]
