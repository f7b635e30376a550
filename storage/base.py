"""The store's connection and transactions; the record families build on it."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import psycopg
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
from storage.postgres import PgConnection, is_postgres_url, probe_pg, schema_for
from storage.schema import migrate

# The most rows one transaction writes when a caller hands over many (a batch of cached
# identities, a thousand leases to renew): a transaction holds the write lock that the
# connector's next ack waits for, so a large batch goes in several short ones.
WRITE_CHUNK = 50
SQLITE_AUTOCHECKPOINT_PAGES = 1000  # SQLite's own default


class LeaseLost(Exception):
    """This owner no longer holds the run's lease: another replica took the run over (this
    process was paused, or cut off from the store, past its lease). Nothing of the write
    was kept, and nothing more may be sent for that run from here."""

    def __init__(self, run_id: str, holder: str) -> None:
        super().__init__(f"run {run_id} is now owned by {holder}")
        self.run_id = run_id
        self.holder = holder


_WRITERS: dict[str, threading.Lock] = {}
_WRITERS_GUARD = threading.Lock()


def _writers_of(path: str) -> threading.Lock:
    """The one lock this process's writers of the SQLite file at ``path`` take turns on."""
    key = os.path.realpath(path)
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(key, threading.Lock())


class StoreBase:
    """One SQLite connection, its transactions, and the row writers several parts share.

    Opening failures (corrupt file, read-only file, a schema from a newer dta, a directory
    that cannot be created) raise ``StoreError`` with one line to show the operator. The
    file's identity (device, inode) is recorded at opening, so ``probe`` can tell that the
    path now leads elsewhere while this handle still writes into the old file.
    """

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
        self.path = str(path)
        self.synchronous = synchronous
        self._writers: threading.Lock | None = None
        self._busy_timeout_s = busy_timeout_s
        self.identity: FileIdentity | None = None
        self.db: sqlite_utils.Database | None = None
        self._conn: Any
        try:
            if is_postgres_url(self.path):
                self.backend = "postgresql"
                self._conn = PgConnection(
                    self.path, schema or schema_for(None), busy_timeout_s, synchronous
                )
            else:
                self.backend = "sqlite"
                self.db = self._open(synchronous, busy_timeout_s)
                self._conn = self.db.conn
                if not checkpoints:
                    # The commit that crosses the WAL's size limit copies it into the
                    # database file, which takes milliseconds; a connection whose commits an
                    # ack waits for leaves that to the others (the pipeline's writes follow).
                    self.set_autocheckpoint(False)
                if self.path != ":memory:":
                    self._writers = _writers_of(self.path)
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            problem = classify(exc)
            message = f"store {self.path} cannot be opened ({problem}: {exc}): {remedy(problem)}"
            raise StoreError(problem, message) from exc
        except psycopg.Error as exc:
            message = f"store {self.where} cannot be opened ({type(exc).__name__}: {exc})"
            raise StoreError(StoreProblem.ERROR, message) from exc
        except RuntimeError as exc:  # a schema written by a newer dta
            raise StoreError(StoreProblem.SCHEMA, f"store {self.where}: {exc}") from exc
        # The run owner this store writes for: on a store replicas share, every write of a
        # run's records checks, in its own transaction, that this owner still holds the
        # run (a fencing check: ``_tx(run=...)``). One daemon per SQLite file needs none.
        self.owner = None if self.exclusive else owner

    @property
    def where(self) -> str:
        """The store's location for messages: a path, or the PostgreSQL URL without secrets."""
        if self.backend != "postgresql":
            return self.path
        parts = urlsplit(self.path)
        host = parts.hostname or "localhost"
        return f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"

    @property
    def exclusive(self) -> bool:
        """One daemon per store (SQLite, under its instance lock): whatever another owner
        left unfinished is a dead process's, and runs of a thread are serial in memory."""
        return self.backend == "sqlite"

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
    def conn(self) -> Any:
        """The connection: ``sqlite3.Connection``, or a ``PgConnection`` speaking the same
        SQL (``storage/postgres.py``)."""
        return self._conn

    def close(self) -> None:
        self._conn.close()

    def set_autocheckpoint(self, on: bool) -> None:
        """Whether this connection's commits checkpoint the WAL (SQLite's default) or leave
        it to someone else (storage/checkpoints.py). PostgreSQL: nothing to do."""
        if self.backend == "sqlite":
            pages = SQLITE_AUTOCHECKPOINT_PAGES if on else 0
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")

    @contextmanager
    def _tx(self, *, run: str | None = None, intent: str | None = None) -> Iterator[Any]:
        """One write transaction; IMMEDIATE so concurrent SQLite writers queue instead of
        failing (PostgreSQL locks rows as they are written).

        ``run`` (a run id) or ``intent`` (an intent id, for its run): the write belongs to
        that run, so on a shared store it first checks, holding the run's row until the
        commit, that this store's owner still holds it (``LeaseLost`` if not; a takeover
        waits for this transaction, and this one for a takeover).

        Writers of one SQLite file in this process (the connector's thread storing frames,
        the loop running the pipeline) also take turns on a lock of their own: a writer
        that finds SQLite's lock taken sleeps in its busy handler for a millisecond or more
        before it looks again, which is what an ack waiting behind a run's write would
        pay; this lock hands over the moment the other commits."""
        conn = self._conn
        with self._turn():
            conn.execute("BEGIN IMMEDIATE")
            try:
                if self.owner is not None and (run is not None or intent is not None):
                    self._fence(conn, run, intent)
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # also after a failed COMMIT: never leave one open
                    conn.execute("ROLLBACK")
                raise

    def _fence(self, conn: Any, run: str | None, intent: str | None) -> None:
        """Raise ``LeaseLost`` unless this owner holds the run (or it has no owner)."""
        if run is not None:
            sql, key = "SELECT run_id, owner FROM runs WHERE run_id = ? FOR UPDATE", run
        else:
            sql = (
                "SELECT r.run_id, r.owner FROM runs r JOIN intents i ON i.run_id = r.run_id"
                " WHERE i.intent_id = ? FOR UPDATE OF r"
            )
            key = intent
        row = conn.execute(sql, (key,)).fetchone()
        if row is not None and row[1] is not None and row[1] != self.owner:
            raise LeaseLost(row[0], row[1])

    def writers_held(self) -> AbstractContextManager[None]:
        """Hold this process's writers of the file between two of their transactions (for
        the WAL's restart: storage/checkpoints.py)."""
        return self._turn()

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This process's turn to write the SQLite file; waited for as long as SQLite's own
        busy timeout, then "database is locked" as SQLite would say."""
        lock = self._writers
        if lock is None:
            yield
            return
        if not lock.acquire(timeout=self._busy_timeout_s):
            raise sqlite3.OperationalError("database is locked (by another writer here)")
        try:
            yield
        finally:
            lock.release()

    @staticmethod
    def _chunks(items: list[Any]) -> Iterator[list[Any]]:
        """``items`` in pieces of at most ``WRITE_CHUNK``, one transaction each."""
        for start in range(0, len(items), WRITE_CHUNK):
            yield items[start : start + WRITE_CHUNK]

    def _update_where_in(self, sql: str, params: tuple[Any, ...], keys: list[str]) -> int:
        """``sql`` (ending ``IN ({marks})``) for ``keys``, a chunk per transaction; how many
        rows it changed in all."""
        changed = 0
        for chunk in self._chunks(keys):
            marks = ",".join("?" * len(chunk))
            with self._tx() as conn:
                changed += conn.execute(sql.format(marks=marks), (*params, *chunk)).rowcount
        return changed

    def _scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self._conn.execute(sql, params).fetchone()
        return row[0] if row else None

    def _dicts(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cursor = self._conn.execute(sql, params)
        names = [column[0] for column in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def page_limit(self) -> int | None:
        """This connection's ``max_page_count`` (the probe applies the same limit)."""
        if self.backend != "sqlite":
            return None
        return int(self._scalar("PRAGMA max_page_count"))

    def probe(self, timeout_s: float = 0.5, page_limit: int | None = None) -> StoreHealth:
        """Can the store take writes? A real write through a new, short-lived connection.

        Blocking for up to about ``timeout_s`` and safe from any thread (it never touches
        this object's connection): call it through ``run_in_executor`` from a loop.
        """
        if self.path == ":memory:":
            return healthy("in memory")
        if isinstance(self._conn, PgConnection):
            return probe_pg(self.path, self._conn.schema, timeout_s)
        return probe_writes(self.path, self.identity, timeout_s, page_limit, self.synchronous)

    def writable(self, timeout_s: float = 0.5) -> bool:
        """Does a write commit within ``timeout_s``? (see ``probe`` for the reason if not)"""
        return self.probe(timeout_s).ok

    @staticmethod
    def _update_run(conn: Any, run: Run) -> None:
        conn.execute(
            "UPDATE runs SET state = ?, updated_at = ?, run_json = ? WHERE run_id = ?",
            (run.state.value, run.updated_at, run.to_json(), run.run_id),
        )

    @staticmethod
    def _insert_decision(conn: Any, run_id: str, decision: ResponseDecision) -> None:
        conn.execute(
            "INSERT INTO decisions (event_id, run_id, verdict, reason, gate_version,"
            " decided_at, decision_json) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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
    def _insert_attempt(conn: Any, attempt: Attempt) -> None:
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
    def _update_attempt(conn: Any, attempt: Attempt) -> None:
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
    def _insert_receipt(conn: Any, receipt: Receipt) -> None:
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
