"""Events, quarantine, runs and decisions: what was heard and what was decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.contracts import (
    Event,
    Receipt,
    ResponseDecision,
    Run,
)
from storage.base import Family
from storage.rows import insert_decision, insert_receipt, update_run


@dataclass(frozen=True)
class EventInsert:
    """Result of ingesting a callback: whether it was new, and the thread's generation."""

    new: bool
    generation: int


class _LostRace(Exception):
    """The msgId was stored already, though our look (or the lack of one) said it was not."""


class EventRecords(Family):
    # ------------------------------------------------------------------ ingest

    def add_event(
        self, event: Event, raw: str, supersedes: bool | None = None, *, look_first: bool = True
    ) -> EventInsert:
        """Store a callback and its raw frame together; a known msgId is a counted duplicate.

        A new event that ``supersedes`` (one the robot will answer; by default any DM or @)
        bumps its thread's generation, which makes older runs of the same thread stale for
        the action gate. ``look_first=False`` (the caller has not seen this msgId) skips the
        look for it: the insert itself finds a duplicate, which then costs a second try.
        """
        while True:
            try:
                return self._add_event_once(event, raw, supersedes, look_first)
            except _LostRace:
                look_first = True  # stored already (earlier, or by another replica just now)

    def _add_event_once(
        self, event: Event, raw: str, supersedes: bool | None, look_first: bool
    ) -> EventInsert:
        with self._tx() as conn:
            known = (
                conn.execute(
                    "SELECT generation FROM events WHERE event_id = ?", (event.event_id,)
                ).fetchone()
                if look_first
                else None
            )
            if known is not None:
                _count_delivery(conn, event, duplicate=True)
                return EventInsert(new=False, generation=known[0])
            bumps = event.addressed if supersedes is None else supersedes
            generation = _thread_generation(conn, event.thread_key, bump=bumps)
            if not _insert_event(conn, event, raw, generation):
                # Stored already: unlooked-for, or by another replica between our look and
                # our insert. The generation bump is undone with the rest, and the frame
                # counted again, as a duplicate.
                raise _LostRace
            _count_delivery(conn, event, duplicate=False)
        return EventInsert(new=True, generation=generation)

    def quarantine(
        self, raw: str, reason: str, error: str, received_at: float, frame_message_id: str | None
    ) -> int:
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO quarantine (received_at, frame_message_id, reason, error, raw)"
                " VALUES (?, ?, ?, ?, ?) RETURNING id",
                (received_at, frame_message_id, reason, error, raw),
            ).fetchone()
        return int(row[0])

    def get_event(self, event_id: str) -> Event | None:
        row = self.db.conn.execute(
            "SELECT event_json FROM events WHERE event_id = ?", (event_id,)
        ).fetchone()
        return Event.model_validate_json(row[0]) if row else None

    def event_generation(self, event_id: str) -> int:
        return int(self._scalar("SELECT generation FROM events WHERE event_id = ?", (event_id,)))

    def thread_generation(self, thread_key: str) -> int:
        value = self._scalar("SELECT generation FROM threads WHERE thread_key = ?", (thread_key,))
        return int(value or 0)

    # ------------------------------------------------------------------ runs and decisions

    def save_run(self, run: Run) -> None:
        with self._tx(run=run.run_id) as conn:
            update_run(conn, run)

    def get_run(self, event_id: str) -> Run | None:
        row = self.db.conn.execute(
            "SELECT run_json FROM runs WHERE event_id = ?", (event_id,)
        ).fetchone()
        return Run.model_validate_json(row[0]) if row else None

    def get_decision(self, event_id: str) -> ResponseDecision | None:
        row = self.db.conn.execute(
            "SELECT decision_json FROM decisions WHERE event_id = ?", (event_id,)
        ).fetchone()
        return ResponseDecision.model_validate_json(row[0]) if row else None

    def add_decision(self, run_id: str, decision: ResponseDecision) -> None:
        """Record the response gate's verdict; the first verdict for an event stands."""
        with self._tx(run=run_id) as conn:
            insert_decision(conn, run_id, decision)

    def add_silence(self, run: Run, decision: ResponseDecision, receipt: Receipt) -> None:
        """A silent verdict: decision, silent receipt and the run's end, all at once."""
        with self._tx(run=run.run_id) as conn:
            insert_decision(conn, run.run_id, decision)
            insert_receipt(conn, receipt)
            update_run(conn, run)

    # ------------------------------------------------------------------ reading back

    def all(self) -> list[Event]:
        rows = self.db.conn.execute("SELECT event_json FROM events ORDER BY rowid").fetchall()
        return [Event.model_validate_json(row[0]) for row in rows]

    def decisions(self) -> list[ResponseDecision]:
        rows = self.db.conn.execute("SELECT decision_json FROM decisions ORDER BY rowid").fetchall()
        return [ResponseDecision.model_validate_json(row[0]) for row in rows]

    def quarantined(self) -> list[dict[str, Any]]:
        return self._dicts(
            "SELECT id, received_at, frame_message_id, reason, error, raw FROM quarantine"
            " ORDER BY id"
        )

    def deliveries(self, event_id: str) -> int:
        return int(self._scalar("SELECT COUNT(*) FROM deliveries WHERE event_id = ?", (event_id,)))


def _count_delivery(conn: Any, event: Event, *, duplicate: bool) -> None:
    """One delivery of the callback's frame, a duplicate or the first."""
    conn.execute(
        "INSERT INTO deliveries (event_id, frame_message_id, received_at, duplicate)"
        " VALUES (?, ?, ?, ?)",
        (event.event_id, event.frame_message_id, event.received_at, 1 if duplicate else 0),
    )


def _thread_generation(conn: Any, thread_key: str, *, bump: bool) -> int:
    """The thread's generation for a new event: bumped by one that supersedes, else as is."""
    if bump:
        return conn.execute(
            "INSERT INTO threads (thread_key, generation) VALUES (?, 1)"
            " ON CONFLICT (thread_key) DO UPDATE SET generation = threads.generation + 1"
            " RETURNING generation",
            (thread_key,),
        ).fetchone()[0]
    row = conn.execute(
        "SELECT generation FROM threads WHERE thread_key = ?", (thread_key,)
    ).fetchone()
    return row[0] if row else 0


def _insert_event(conn: Any, event: Event, raw: str, generation: int) -> bool:
    """Store the event with its raw frame; False when its msgId was stored already."""
    stored = conn.execute(
        "INSERT INTO events (event_id, thread_key, conversation_id, actor_id, generation,"
        " created_at, received_at, event_json, raw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (
            event.event_id,
            event.thread_key,
            event.conversation.id,
            event.actor.user_id,
            generation,
            event.created_at,
            event.received_at,
            event.to_json(),
            raw,
        ),
    )
    return stored.rowcount != 0
