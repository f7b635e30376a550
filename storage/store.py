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

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from agent.contracts import (
    ActionIntent,
    Attempt,
    AttemptOutcome,
    Event,
    MemoryCandidate,
    Receipt,
    ResponseDecision,
    Run,
    RunState,
    TaskCheckpoint,
)
from storage.schema import migrate


@dataclass(frozen=True)
class EventInsert:
    """Result of ingesting a callback: whether it was new, and the thread's generation."""

    new: bool
    generation: int


@dataclass(frozen=True)
class Counts:
    events: int
    duplicates: int
    quarantined: int
    runs: int
    receipts: int


class Store:
    def __init__(self, path: str | Path, synchronous: str = "normal") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we open transactions explicitly (see _tx).
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        self.db = sqlite_utils.Database(conn)
        self.db.execute("PRAGMA busy_timeout = 10000")
        if self.path != ":memory:":
            self.db.enable_wal()
        self.db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        self.db.execute("PRAGMA foreign_keys = ON")
        migrate(conn)

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    def close(self) -> None:
        self.db.conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; IMMEDIATE so concurrent writers queue instead of failing."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.db.conn.execute(sql, params).fetchone()
        return row[0] if row else None

    # ------------------------------------------------------------------ ingest

    def add_event(self, event: Event, raw: str) -> EventInsert:
        """Store a callback and its raw frame together; a known msgId is a counted duplicate.

        A new event that is addressed to the robot (DM or @) bumps its thread's generation,
        which makes older runs of the same thread stale for the action gate.
        """
        with self._tx() as conn:
            known = conn.execute(
                "SELECT generation FROM events WHERE event_id = ?", (event.event_id,)
            ).fetchone()
            if known is not None:
                conn.execute(
                    "INSERT INTO deliveries (event_id, frame_message_id, received_at, duplicate)"
                    " VALUES (?, ?, ?, 1)",
                    (event.event_id, event.frame_message_id, event.received_at),
                )
                return EventInsert(new=False, generation=known[0])
            generation = 0
            if event.addressed:
                generation = conn.execute(
                    "INSERT INTO threads (thread_key, generation) VALUES (?, 1)"
                    " ON CONFLICT (thread_key) DO UPDATE SET generation = generation + 1"
                    " RETURNING generation",
                    (event.thread_key,),
                ).fetchone()[0]
            else:
                row = conn.execute(
                    "SELECT generation FROM threads WHERE thread_key = ?", (event.thread_key,)
                ).fetchone()
                generation = row[0] if row else 0
            conn.execute(
                "INSERT INTO events (event_id, thread_key, conversation_id, actor_id, generation,"
                " created_at, received_at, event_json, raw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            conn.execute(
                "INSERT INTO deliveries (event_id, frame_message_id, received_at, duplicate)"
                " VALUES (?, ?, ?, 0)",
                (event.event_id, event.frame_message_id, event.received_at),
            )
        return EventInsert(new=True, generation=generation)

    def quarantine(
        self, raw: str, reason: str, error: str, received_at: float, frame_message_id: str | None
    ) -> int:
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO quarantine (received_at, frame_message_id, reason, error, raw)"
                " VALUES (?, ?, ?, ?, ?)",
                (received_at, frame_message_id, reason, error, raw),
            )
        return int(cursor.lastrowid or 0)

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

    def pending_events(self) -> list[Event]:
        """Events stored but not finished: no run yet, or a run a crash left working."""
        rows = self.db.conn.execute(
            "SELECT e.event_json FROM events e LEFT JOIN runs r ON r.event_id = e.event_id"
            " WHERE r.run_id IS NULL OR r.state = ? ORDER BY e.rowid",
            (RunState.WORKING.value,),
        ).fetchall()
        return [Event.model_validate_json(row[0]) for row in rows]

    # ------------------------------------------------------------------ runs and decisions

    def open_run(self, run: Run, decision: ResponseDecision | None = None) -> Run:
        """Create the event's run (with its decision), or return the run that already exists."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO runs (run_id, event_id, thread_key, generation, state,"
                " provider, created_at, updated_at, run_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    run.event_id,
                    run.thread_key,
                    run.generation,
                    run.state.value,
                    run.provider,
                    run.created_at,
                    run.updated_at,
                    run.to_json(),
                ),
            )
            if cursor.rowcount == 0:
                row = conn.execute(
                    "SELECT run_json FROM runs WHERE event_id = ?", (run.event_id,)
                ).fetchone()
                return Run.model_validate_json(row[0])
            if decision is not None:
                self._insert_decision(conn, run.run_id, decision)
        return run

    def save_run(self, run: Run) -> None:
        with self._tx() as conn:
            self._update_run(conn, run)

    @staticmethod
    def _update_run(conn: sqlite3.Connection, run: Run) -> None:
        conn.execute(
            "UPDATE runs SET state = ?, updated_at = ?, run_json = ? WHERE run_id = ?",
            (run.state.value, run.updated_at, run.to_json(), run.run_id),
        )

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
        with self._tx() as conn:
            self._insert_decision(conn, run_id, decision)

    def add_silence(self, run: Run, decision: ResponseDecision, receipt: Receipt) -> None:
        """A silent verdict: decision, silent receipt and the run's end, all at once."""
        with self._tx() as conn:
            self._insert_decision(conn, run.run_id, decision)
            self._insert_receipt(conn, receipt)
            self._update_run(conn, run)

    @staticmethod
    def _insert_decision(conn: sqlite3.Connection, run_id: str, decision: ResponseDecision) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO decisions (event_id, run_id, verdict, reason, gate_version,"
            " decided_at, decision_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                decision.event_id,
                run_id,
                decision.verdict.value,
                decision.reason.value,
                decision.gate_version,
                decision.decided_at,
                decision.to_json(),
            ),
        )

    # ------------------------------------------------------------------ gate facts

    def receipt_for_idempotency_key(self, key: str) -> Receipt | None:
        """The newest receipt of the intent holding ``key`` (None if none, or no receipt yet)."""
        row = self.db.conn.execute(
            "SELECT r.receipt_json FROM intents i JOIN receipts r ON r.intent_id = i.intent_id"
            " WHERE i.idempotency_key = ? ORDER BY r.rowid DESC LIMIT 1",
            (key,),
        ).fetchone()
        return Receipt.model_validate_json(row[0]) if row else None

    def taken_keys(self, keys: list[str]) -> dict[str, Receipt | None]:
        """Which idempotency keys are already held, each with its first receipt (if any)."""
        marks = ",".join("?" * len(keys))
        held = [
            row[0]
            for row in self.db.conn.execute(
                f"SELECT idempotency_key FROM intents WHERE idempotency_key IN ({marks})", keys
            ).fetchall()
        ]
        return {key: self.receipt_for_idempotency_key(key) for key in held}

    def writes_since(self, since: float, conversation_id: str | None = None) -> int:
        if conversation_id is None:
            return int(self._scalar("SELECT COUNT(*) FROM budget_ledger WHERE at > ?", (since,)))
        return int(
            self._scalar(
                "SELECT COUNT(*) FROM budget_ledger WHERE conversation_id = ? AND at > ?",
                (conversation_id, since),
            )
        )

    # ------------------------------------------------------------------ intents, attempts

    def add_intent(self, intent: ActionIntent, first_attempt: Attempt | None = None) -> bool:
        """Store an approved intent, its write-budget row and (before any I/O) its first
        attempt, together. False if another execution already holds the idempotency key."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO intents (intent_id, run_id, event_id, kind,"
                " idempotency_key, conversation_id, created_at, intent_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    intent.intent_id,
                    intent.run_id,
                    intent.event_id,
                    intent.kind.value,
                    intent.idempotency_key,
                    intent.target.conversation_id,
                    intent.created_at,
                    intent.to_json(),
                ),
            )
            if cursor.rowcount == 0:
                return False
            if intent.kind.is_message:
                conn.execute(
                    "INSERT INTO budget_ledger (conversation_id, intent_id, at) VALUES (?, ?, ?)",
                    (intent.target.conversation_id, intent.intent_id, intent.created_at),
                )
            if first_attempt is not None:
                self._insert_attempt(conn, first_attempt)
        return True

    def start_attempt(self, attempt: Attempt) -> None:
        """Written before any I/O, so a crash mid-send leaves a trace to reconcile."""
        with self._tx() as conn:
            self._insert_attempt(conn, attempt)

    @staticmethod
    def _insert_attempt(conn: sqlite3.Connection, attempt: Attempt) -> None:
        conn.execute(
            "INSERT INTO attempts (attempt_id, intent_id, channel, outcome, started_at,"
            " finished_at, attempt_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                attempt.attempt_id,
                attempt.intent_id,
                attempt.channel.value,
                attempt.outcome.value,
                attempt.started_at,
                attempt.finished_at,
                attempt.to_json(),
            ),
        )

    def finish_attempt(self, attempt: Attempt, start_next: Attempt | None = None) -> None:
        """Close an attempt; ``start_next`` is recorded in the same breath, before its I/O."""
        with self._tx() as conn:
            self._update_attempt(conn, attempt)
            if start_next is not None:
                self._insert_attempt(conn, start_next)

    @staticmethod
    def _update_attempt(conn: sqlite3.Connection, attempt: Attempt) -> None:
        conn.execute(
            "UPDATE attempts SET outcome = ?, finished_at = ?, attempt_json = ?"
            " WHERE attempt_id = ?",
            (
                attempt.outcome.value,
                attempt.finished_at,
                attempt.to_json(),
                attempt.attempt_id,
            ),
        )

    def finish_delivery(
        self,
        attempt: Attempt,
        receipt: Receipt,
        outbound: dict[str, Any] | None,
        run: Run | None = None,
    ) -> None:
        """Close the last attempt, write the receipt, index what we sent and (when this was
        the run's last word) save the run's final state, together."""
        with self._tx() as conn:
            self._update_attempt(conn, attempt)
            self._insert_receipt(conn, receipt)
            if run is not None:
                self._update_run(conn, run)
            if outbound is not None:
                conn.execute(
                    "INSERT OR REPLACE INTO outbound (intent_id, process_query_key,"
                    " conversation_id, channel, text, sent_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        outbound["intent_id"],
                        outbound.get("process_query_key"),
                        outbound["conversation_id"],
                        outbound["channel"],
                        outbound["text"],
                        outbound["sent_at"],
                    ),
                )

    def add_receipt(self, receipt: Receipt, run: Run | None = None) -> None:
        with self._tx() as conn:
            self._insert_receipt(conn, receipt)
            if run is not None:
                self._update_run(conn, run)

    @staticmethod
    def _insert_receipt(conn: sqlite3.Connection, receipt: Receipt) -> None:
        conn.execute(
            "INSERT INTO receipts (receipt_id, run_id, event_id, intent_id, kind, status, reason,"
            " created_at, receipt_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                receipt.receipt_id,
                receipt.run_id,
                receipt.event_id,
                receipt.intent_id,
                receipt.kind.value if receipt.kind else None,
                receipt.status.value,
                receipt.reason,
                receipt.created_at,
                receipt.to_json(),
            ),
        )

    def interrupted_attempts(self) -> list[tuple[Attempt, ActionIntent]]:
        """Attempts a crash left ``started``: we cannot know whether they reached DingTalk."""
        rows = self.db.conn.execute(
            "SELECT a.attempt_json, i.intent_json FROM attempts a"
            " JOIN intents i ON i.intent_id = a.intent_id WHERE a.outcome = ? ORDER BY a.rowid",
            (AttemptOutcome.STARTED.value,),
        ).fetchall()
        return [
            (Attempt.model_validate_json(a), ActionIntent.model_validate_json(i)) for a, i in rows
        ]

    def drop_unsent_intents(self) -> int:
        """Forget intents a crash cut off before their first attempt was even recorded.

        Such an intent provably never reached DingTalk, so dropping it (and its budget row)
        lets the run's re-execution go through the action gate afresh.
        """
        orphan = (
            "SELECT i.intent_id FROM intents i WHERE NOT EXISTS"
            " (SELECT 1 FROM attempts a WHERE a.intent_id = i.intent_id)"
            " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id = i.intent_id)"
        )
        with self._tx() as conn:
            conn.execute(f"DELETE FROM budget_ledger WHERE intent_id IN ({orphan})")
            cursor = conn.execute(f"DELETE FROM intents WHERE intent_id IN ({orphan})")
        return cursor.rowcount

    def close_interrupted(self, attempt: Attempt, receipt: Receipt) -> None:
        with self._tx() as conn:
            self._update_attempt(conn, attempt)
            self._insert_receipt(conn, receipt)

    # ------------------------------------------------------------------ invocation lookups

    def events_between(
        self, conversation_id: str, actor_id: str, since: float, before: float
    ) -> list[Event]:
        """The actor's messages in a conversation created in [since, before), oldest first."""
        rows = self.db.conn.execute(
            "SELECT event_json FROM events WHERE conversation_id = ? AND actor_id = ?"
            " AND created_at >= ? AND created_at < ? ORDER BY created_at, rowid",
            (conversation_id, actor_id, since, before),
        ).fetchall()
        return [Event.model_validate_json(row[0]) for row in rows]

    def outbound(self, *, process_query_key: str | None = None) -> dict[str, Any] | None:
        """One of our own sent messages, found by DingTalk's processQueryKey."""
        if not process_query_key:
            return None
        rows = list(
            self.db.query(
                "SELECT o.*, i.event_id FROM outbound o JOIN intents i"
                " ON i.intent_id = o.intent_id WHERE o.process_query_key = ?",
                (process_query_key,),
            )
        )
        return rows[0] if rows else None

    def cached_identity(self, user_id: str, fresh_after: float) -> dict[str, Any] | None:
        row = self.db.conn.execute(
            "SELECT identity_json FROM identity_cache WHERE user_id = ? AND fetched_at > ?",
            (user_id, fresh_after),
        ).fetchone()
        return json.loads(row[0]) if row else None

    def cache_identity(self, user_id: str, identity: dict[str, Any], fetched_at: float) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO identity_cache (user_id, fetched_at, identity_json)"
                " VALUES (?, ?, ?)",
                (user_id, fetched_at, json.dumps(identity, ensure_ascii=False)),
            )

    # ------------------------------------------------------------------ tasks

    def active_task(self, scope_id: str) -> TaskCheckpoint | None:
        row = self.db.conn.execute(
            "SELECT task_json FROM tasks WHERE scope_id = ? AND status IN ('working', 'waiting')"
            " ORDER BY updated_at DESC, rowid DESC LIMIT 1",
            (scope_id,),
        ).fetchone()
        return TaskCheckpoint.model_validate_json(row[0]) if row else None

    def save_task(self, task: TaskCheckpoint) -> bool:
        """Compare-and-set: ``task.revision`` must be one more than the stored revision
        (or 1 for a new task). False when someone else moved the task first."""
        with self._tx() as conn:
            if task.revision == 1:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO tasks (task_id, scope_id, status, revision,"
                    " updated_at, task_json) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        task.task_id,
                        task.scope_id,
                        task.status.value,
                        task.revision,
                        task.updated_at,
                        task.to_json(),
                    ),
                )
            else:
                cursor = conn.execute(
                    "UPDATE tasks SET status = ?, revision = ?, updated_at = ?, task_json = ?"
                    " WHERE task_id = ? AND revision = ?",
                    (
                        task.status.value,
                        task.revision,
                        task.updated_at,
                        task.to_json(),
                        task.task_id,
                        task.revision - 1,
                    ),
                )
        return cursor.rowcount == 1

    def tasks(self) -> list[TaskCheckpoint]:
        rows = self.db.conn.execute("SELECT task_json FROM tasks ORDER BY rowid").fetchall()
        return [TaskCheckpoint.model_validate_json(row[0]) for row in rows]

    # ------------------------------------------------------------------ memory candidates

    def propose_memory(self, candidates: list[MemoryCandidate]) -> int:
        """Store new proposals; one already known (same scope and content) is left as is."""
        added = 0
        with self._tx() as conn:
            for c in candidates:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO memory_candidates (candidate_id, scope_id, status,"
                    " revision, created_at, candidate_json) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        c.candidate_id,
                        c.scope_id,
                        c.status.value,
                        c.revision,
                        c.created_at,
                        c.to_json(),
                    ),
                )
                added += cursor.rowcount
        return added

    def memory_candidates(self, status: str | None = None) -> list[MemoryCandidate]:
        if status is None:
            rows = self.db.conn.execute(
                "SELECT candidate_json FROM memory_candidates ORDER BY created_at, rowid"
            )
        else:
            rows = self.db.conn.execute(
                "SELECT candidate_json FROM memory_candidates WHERE status = ?"
                " ORDER BY created_at, rowid",
                (status,),
            )
        return [MemoryCandidate.model_validate_json(row[0]) for row in rows.fetchall()]

    def save_memory(self, candidate: MemoryCandidate) -> bool:
        """Compare-and-set on the revision, like tasks: False when the candidate moved."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE memory_candidates SET status = ?, revision = ?, candidate_json = ?"
                " WHERE candidate_id = ? AND revision = ?",
                (
                    candidate.status.value,
                    candidate.revision,
                    candidate.to_json(),
                    candidate.candidate_id,
                    candidate.revision - 1,
                ),
            )
        return cursor.rowcount == 1

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

    def writable(self) -> bool:
        """Can we take the write lock right now? (readiness)"""
        try:
            self.db.conn.execute("BEGIN IMMEDIATE")
            self.db.conn.execute("ROLLBACK")
            return True
        except sqlite3.Error:
            return False
