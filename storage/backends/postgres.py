"""PostgreSQL, for replicas: one connection that speaks the store's SQL.

The record families write one SQL dialect: the subset SQLite and PostgreSQL share
(``INSERT … ON CONFLICT``, ``RETURNING``, ``?`` placeholders, ``rowid`` ordering). This
module makes a psycopg 3 connection accept it: placeholders become psycopg's, and the
schema (``storage/schema.py``, rendered with ``POSTGRESQL``) declares a ``rowid`` identity
column on every table read "oldest first", so the order means the same on both.

Each robot's records live in their own PostgreSQL schema (``dta_<robot code>`` unless
``store_schema`` says otherwise): several robots @-ed in one message receive the same
msgId, and with one schema each, a msgId is unique per robot even in a shared database.

    conn = PgConnection("postgresql://127.0.0.1/test", schema="dta_robot1", lock_timeout_s=10)
    conn.execute("SELECT event_json FROM events WHERE event_id = ?", ("m1",)).fetchone()
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.pq import TransactionStatus

from agent.contracts.base import schema_for
from storage.integrity import StoreError, StoreHealth, StoreProblem, healthy, unhealthy
from storage.schema import POSTGRESQL, newer_than_this_dta, scripts

Params = tuple[Any, ...] | list[Any] | dict[str, Any]

_TOKENS = re.compile(r"'[^']*'|\?|:([A-Za-z_][A-Za-z0-9_]*)|%")


def is_postgres_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))



@lru_cache(maxsize=512)
def translate(sql: str, named: bool) -> str:
    """The store's SQL for psycopg: ``?`` → ``%s``, ``:name`` → ``%(name)s`` (when the
    parameters are a mapping), a literal ``%`` doubled. Quoted strings are left alone."""

    def swap(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("'"):
            return token.replace("%", "%%")
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return f"%({match.group(1)})s" if named else token

    return _TOKENS.sub(swap, sql)


class PgConnection:
    """A psycopg connection in autocommit mode (transactions are opened explicitly, as on
    SQLite), reopened when the server dropped it between transactions."""

    def __init__(
        self, url: str, schema: str, lock_timeout_s: float, synchronous: str = "normal"
    ) -> None:
        self.url, self.schema = url, schema
        self.lock_timeout_ms = max(1, int(lock_timeout_s * 1000))
        # The same promise as SQLite's setting: "normal" survives a crash of dta (the
        # server has the commit), "full" also the server's crash or a power loss.
        self.synchronous_commit = "on" if synchronous == "full" else "off"
        self._conn = self._connect()
        migrate(self._conn, schema)

    def _connect(self) -> psycopg.Connection[Any]:
        # A lock held longer than the busy timeout fails the statement, as SQLite's does:
        # the run then waits and is driven again (it is an OperationalError, transient).
        options = (
            f"-c lock_timeout={self.lock_timeout_ms}"
            f" -c synchronous_commit={self.synchronous_commit}"
        )
        conn = psycopg.connect(self.url, autocommit=True, options=options, connect_timeout=10)
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        conn.execute(f'SET search_path TO "{self.schema}"')
        return conn

    def execute(self, sql: str, params: Params = ()) -> psycopg.Cursor[Any]:
        if self._conn.closed and not self.in_transaction:
            self._conn = self._connect()
        if sql == "BEGIN IMMEDIATE":
            sql = "BEGIN"
        query = translate(sql, isinstance(params, dict))
        return self._conn.execute(query, params or None)  # type: ignore[arg-type]

    @property
    def in_transaction(self) -> bool:
        if self._conn.closed:
            return False
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self._conn.close()


def probe_pg(url: str, schema: str, timeout_s: float) -> StoreHealth:
    """Can the database take this robot's writes now? A real write on a new connection,
    given ``timeout_s`` to connect and as long again to commit."""
    wait = max(1, int(timeout_s * 1000))
    options = f"-c statement_timeout={wait} -c lock_timeout={wait}"
    try:
        with psycopg.connect(
            url, autocommit=True, options=options, connect_timeout=max(1, round(timeout_s))
        ) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES ('probe', now()::text)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            )
    except psycopg.errors.LockNotAvailable as exc:
        return unhealthy(StoreProblem.LOCKED, str(exc).strip())
    except psycopg.errors.QueryCanceled as exc:
        return unhealthy(StoreProblem.LOCKED, f"no commit within {timeout_s:g} s: {exc}".strip())
    except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory) as exc:
        return unhealthy(StoreProblem.FULL, str(exc).strip())
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        return unhealthy(StoreProblem.READONLY, str(exc).strip())
    except psycopg.OperationalError as exc:
        return unhealthy(StoreProblem.UNREACHABLE, str(exc).strip()[:300])
    except psycopg.Error as exc:
        return unhealthy(StoreProblem.ERROR, f"{type(exc).__name__}: {exc}".strip()[:300])
    return healthy("postgresql")


# Before one schema served both engines, PostgreSQL numbered its own migrations, recorded in
# ``schema_version``: its 1 held what SQLite's 1-4 build, then 2, 3, 4 were SQLite's 5, 6, 7.
LEGACY_VERSIONS = {0: 0, 1: 4, 2: 5, 3: 6, 4: 7}
# Left in ``schema_version`` for a dta from before: it refuses a version above its own
# newest (4) in one line, instead of migrating a schema it does not know.
LEGACY_REFUSAL = 1000


def _version(conn: psycopg.Connection[Any]) -> int:
    """How far this schema has come, in the shared numbering (0: a new schema)."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT NOT NULL)")
    row = conn.execute("SELECT version FROM schema_migrations").fetchone()
    if row is not None:
        return int(row[0])
    legacy = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if not legacy or not legacy[0]:
        return 0
    old = conn.execute("SELECT version FROM schema_version").fetchone()
    version = int(old[0]) if old else 0
    if version not in LEGACY_VERSIONS:
        raise StoreError(StoreProblem.SCHEMA, newer_than_this_dta(version))
    return LEGACY_VERSIONS[version]


def migrate(conn: psycopg.Connection[Any], schema: str) -> int:
    """Bring ``schema`` up to the newest version, once, whoever else is starting."""
    every = scripts(POSTGRESQL)
    newest = len(every)
    with conn.transaction():
        # One migrator at a time per schema; the lock ends with the transaction.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"dta-migrate:{schema}",))
        version = _version(conn)
        if version > newest:
            raise StoreError(StoreProblem.SCHEMA, newer_than_this_dta(version))
        for script in every[version:]:
            if script.strip():  # a migration may be another engine's alone
                conn.execute(script)  # type: ignore[arg-type]
        conn.execute("DELETE FROM schema_migrations")
        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (newest,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (LEGACY_REFUSAL,))
    return newest


class PostgresBackend:
    """A robot's records in their own schema of a PostgreSQL database."""

    dialect = POSTGRESQL
    exclusive = False  # replicas share it: runs are fenced by their leases
    fallback = False
    file = None
    identity = None

    @staticmethod
    def accepts(target: str) -> bool:
        return is_postgres_url(target)

    def __init__(
        self, target: str, *, synchronous: str, busy_timeout_s: float, schema: str | None
    ) -> None:
        self.url = target
        self.schema = schema or schema_for(None)
        try:
            self._conn = PgConnection(target, self.schema, busy_timeout_s, synchronous)
        except StoreError as exc:
            raise StoreError(exc.problem, f"store {self.where}: {exc}") from exc
        except psycopg.Error as exc:
            message = f"store {self.where} cannot be opened ({type(exc).__name__}: {exc})"
            raise StoreError(StoreProblem.ERROR, message) from exc

    @property
    def conn(self) -> PgConnection:
        return self._conn

    @property
    def where(self) -> str:
        """The URL without user, password or query."""
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        return f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"

    def writers(self) -> threading.Lock | None:
        return None  # the server orders writers

    def probe(self, timeout_s: float, page_limit: int | None) -> StoreHealth:
        return probe_pg(self.url, self.schema, timeout_s)

    def page_limit(self) -> int | None:
        return None

    def set_autocheckpoint(self, on: bool) -> None:
        """Nothing to do: the server checkpoints."""

    def close(self) -> None:
        self._conn.close()


BACKEND = PostgresBackend
