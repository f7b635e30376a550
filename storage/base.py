"""The store's connection and transactions; the record families build on it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import sqlite_utils

from agent.contracts import (
    Attempt,
    Receipt,
    ResponseDecision,
    Run,
)
from storage.integrity import (
    FileIdentity,
    StoreError,
    StoreHealth,
    StoreProblem,
    classify,
    file_identity,
    healthy,
    probe_writes,
    remedy,
)
from storage.schema import migrate


class StoreBase:
    """One SQLite connection, its transactions, and the row writers several parts share.

    Opening failures (corrupt file, read-only file, a schema from a newer dta, a directory
    that cannot be created) raise ``StoreError`` with one line to show the operator. The
    file's identity (device, inode) is recorded at opening, so ``probe`` can tell that the
    path now leads elsewhere while this handle still writes into the old file.
    """

    def __init__(
        self, path: str | Path, synchronous: str = "normal", busy_timeout_s: float = 10.0
    ) -> None:
        self.path = str(path)
        self.identity: FileIdentity | None = None
        try:
            self.db = self._open(synchronous, busy_timeout_s)
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            problem = classify(exc)
            message = f"store {self.path} cannot be opened ({problem}: {exc}): {remedy(problem)}"
            raise StoreError(problem, message) from exc
        except RuntimeError as exc:  # storage.schema: written by a newer dta
            raise StoreError(StoreProblem.SCHEMA, f"store {self.path}: {exc}") from exc

    def _open(self, synchronous: str, busy_timeout_s: float) -> sqlite_utils.Database:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we open transactions explicitly (see _tx).
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_s)
        try:
            db = sqlite_utils.Database(conn)
            if self.path != ":memory:":
                db.enable_wal()
                self.identity = file_identity(self.path)
            db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            db.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        return db

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

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

    def page_limit(self) -> int:
        """This connection's ``max_page_count`` (the probe applies the same limit)."""
        return int(self._scalar("PRAGMA max_page_count"))

    def probe(self, timeout_s: float = 0.5, page_limit: int | None = None) -> StoreHealth:
        """Can the store take writes? A real write through a new, short-lived connection.

        Blocking for up to about ``timeout_s`` and safe from any thread (it never touches
        this object's connection): call it through ``run_in_executor`` from a loop.
        """
        if self.path == ":memory:":
            return healthy("in memory")
        return probe_writes(self.path, self.identity, timeout_s, page_limit)

    def writable(self, timeout_s: float = 0.5) -> bool:
        """Does a write commit within ``timeout_s``? (see ``probe`` for the reason if not)"""
        return self.probe(timeout_s).ok

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
