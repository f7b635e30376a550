"""The store's connection and transactions; the record families build on it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from agent.contracts import (
    Attempt,
    Receipt,
    ResponseDecision,
    Run,
)
from storage.schema import migrate


class StoreBase:
    """One SQLite connection, its transactions, and the row writers several parts share."""

    def __init__(
        self, path: str | Path, synchronous: str = "normal", busy_timeout_s: float = 10.0
    ) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we open transactions explicitly (see _tx).
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_s)
        self.db = sqlite_utils.Database(conn)
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
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # also after a failed COMMIT: never leave one open
                conn.execute("ROLLBACK")
            raise

    def _scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.db.conn.execute(sql, params).fetchone()
        return row[0] if row else None

    def writable(self) -> bool:
        """Can we take the write lock right now? (readiness)"""
        try:
            self.db.conn.execute("BEGIN IMMEDIATE")
            self.db.conn.execute("ROLLBACK")
            return True
        except sqlite3.Error:
            return False

    @staticmethod
    def _update_run(conn: sqlite3.Connection, run: Run) -> None:
        conn.execute(
            "UPDATE runs SET state = ?, updated_at = ?, run_json = ? WHERE run_id = ?",
            (run.state.value, run.updated_at, run.to_json(), run.run_id),
        )

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
