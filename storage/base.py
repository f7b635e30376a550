"""The store's connection and transactions, and ``Family``: what each record family builds on."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Self

from storage.backends import StoreBackend, open_backend
from storage.integrity import FileIdentity, StoreHealth
from storage.schema import Dialect

# The most rows one transaction writes when a caller hands over many (a batch of cached
# identities, a thousand leases to renew): a transaction holds the write lock that the
# connector's next ack waits for, so a large batch goes in several short ones.
WRITE_CHUNK = 50


def write_chunks(items: list[Any]) -> Iterator[list[Any]]:
    """``items`` in pieces of at most ``WRITE_CHUNK``, one transaction each."""
    for start in range(0, len(items), WRITE_CHUNK):
        yield items[start : start + WRITE_CHUNK]


class LeaseLost(Exception):
    """This owner no longer holds the run's lease: another replica took the run over (this
    process was paused, or cut off from the store, past its lease). Nothing of the write
    was kept, and nothing more may be sent for that run from here."""

    def __init__(self, run_id: str, holder: str) -> None:
        super().__init__(f"run {run_id} is now owned by {holder}")
        self.run_id = run_id
        self.holder = holder


class Closing:
    """Closed at the end of its ``with`` / ``async with`` block (``close``)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


class StoreBase(Closing):
    """One store backend's connection and its transactions (the row writers several record
    families share are in ``storage/rows.py``).

    ``path``: a SQLite file (or ``":memory:"``), or a PostgreSQL URL with ``schema`` the
    robot's schema in it (storage/backends/). Opening failures (corrupt file, read-only
    file, a schema from a newer dta, a directory that cannot be created, a server that
    cannot be reached) raise ``StoreError`` with one line to show the operator. A database
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
        self._busy_timeout_s = busy_timeout_s
        self.engine: StoreBackend = open_backend(
            self.path, synchronous=synchronous, busy_timeout_s=busy_timeout_s, schema=schema
        )
        self.dialect: Dialect = self.engine.dialect
        self._conn: Any = self.engine.conn
        self._writers = self.engine.writers()
        if not checkpoints:
            # The commit that crosses the WAL's size limit copies it into the database
            # file, which takes milliseconds; a connection whose commits an ack waits for
            # leaves that to the others (the pipeline's writes follow).
            self.set_autocheckpoint(False)
        # The run owner this store writes for: on a store replicas share, every write of a
        # run's records checks, in its own transaction, that this owner still holds the
        # run (a fencing check: ``_tx(run=...)``). One daemon per SQLite file needs none.
        self.owner = None if self.exclusive else owner

    @property
    def where(self) -> str:
        """The store's location for messages: a path, or the PostgreSQL URL without secrets."""
        return self.engine.where

    @property
    def identity(self) -> FileIdentity | None:
        """The database file's (device, inode) at opening; None without a local file."""
        return self.engine.identity

    @property
    def exclusive(self) -> bool:
        """One daemon per store (SQLite, under its instance lock): whatever another owner
        left unfinished is a dead process's, and runs of a thread are serial in memory."""
        return self.engine.exclusive

    @property
    def conn(self) -> Any:
        """The connection: ``sqlite3.Connection``, or a ``PgConnection`` speaking the same
        SQL (``storage/backends/postgres.py``)."""
        return self._conn

    def close(self) -> None:
        self.engine.close()

    def set_autocheckpoint(self, on: bool) -> None:
        """Whether this connection's commits checkpoint the WAL (SQLite's default) or leave
        it to someone else (storage/backends/sqlite_checkpoints.py). PostgreSQL: nothing to
        do."""
        self.engine.set_autocheckpoint(on)

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
            sql = "SELECT run_id, owner FROM runs WHERE run_id = ?" + self.dialect.lock_rows
            key = run
        else:
            sql = (
                "SELECT r.run_id, r.owner FROM runs r JOIN intents i ON i.run_id = r.run_id"
                " WHERE i.intent_id = ?" + self.dialect.lock_rows_of.format(table="r")
            )
            key = intent
        row = conn.execute(sql, (key,)).fetchone()
        if row is not None and row[1] is not None and row[1] != self.owner:
            raise LeaseLost(row[0], row[1])

    def writers_held(self) -> AbstractContextManager[None]:
        """Hold this process's writers of the file between two of their transactions (for
        the WAL's restart: storage/backends/sqlite_checkpoints.py)."""
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

    def _update_where_in(self, sql: str, params: tuple[Any, ...], keys: list[str]) -> int:
        """``sql`` (ending ``IN ({marks})``) for ``keys``, a chunk per transaction; how many
        rows it changed in all."""
        changed = 0
        for chunk in write_chunks(keys):
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
        return self.engine.page_limit()

    def probe(self, timeout_s: float = 0.5, page_limit: int | None = None) -> StoreHealth:
        """Can the store take writes? A real write through a new, short-lived connection.

        Blocking for up to about ``timeout_s`` and safe from any thread (it never touches
        this object's connection): call it through ``run_in_executor`` from a loop.
        """
        return self.engine.probe(timeout_s, page_limit)

    def writable(self, timeout_s: float = 0.5) -> bool:
        """Does a write commit within ``timeout_s``? (see ``probe`` for the reason if not)"""
        return self.probe(timeout_s).ok


class Family:
    """One record family (events, cards, approvals, ...): its queries over the store's one
    connection, ``db``. Every family of a store is given the same ``StoreBase``, so a
    transaction any of them opens is the store's, with its lease fence and its writers'
    turn; a family that needs another is given it (``ActionRecords`` its ``PieceRecords``).
    A family holds the ``StoreBase``, never the ``Store``: no reference cycle."""

    def __init__(self, db: StoreBase) -> None:
        self.db = db

    def _tx(
        self, *, run: str | None = None, intent: str | None = None
    ) -> AbstractContextManager[Any]:
        return self.db._tx(run=run, intent=intent)

    def _scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.db._scalar(sql, params)

    def _dicts(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return self.db._dicts(sql, params)

    def _update_where_in(self, sql: str, params: tuple[Any, ...], keys: list[str]) -> int:
        return self.db._update_where_in(sql, params, keys)
