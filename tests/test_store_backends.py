"""Store backends: one schema source for both engines, one numbering, one interface.

A new engine is one module in ``storage/backends/`` naming its class in ``BACKEND``; the
last tests here find the two there are and add a third (a SQLite file under a URL scheme of
its own) to run the store on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

import storage.backends
import storage.schema
from storage import Store
from storage.backends.postgres import LEGACY_REFUSAL, PostgresBackend
from storage.backends.sqlite import SqliteBackend
from storage.integrity import StoreError, StoreProblem
from storage.schema import MIGRATIONS
from tests.conftest import PG_URL
from tests.factories import event

# Kept by one engine only: SQLite's hourly write counts (PostgreSQL counts its index), and
# PostgreSQL's records of how far its schema has come (SQLite has PRAGMA user_version).
ENGINE_ONLY = {"budget_hours", "schema_migrations", "schema_version"}


def _sqlite_columns(path: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {t: [row[1] for row in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        conn.close()


def _pg_columns(schema: str) -> dict[str, list[str]]:
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (schema,),
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        if column != "rowid":  # SQLite's is built in
            columns.setdefault(table, []).append(column)
    return columns


def _shared(columns: dict[str, list[str]]) -> dict[str, set[str]]:
    return {t: set(c) for t, c in columns.items() if t not in ENGINE_ONLY}


def test_both_engines_build_the_same_tables_from_the_one_schema(
    tmp_path: Path, pg_schema: str
) -> None:
    Store(tmp_path / "dta.db").close()
    Store(PG_URL, schema=pg_schema).close()
    sqlite_tables = _shared(_sqlite_columns(tmp_path / "dta.db"))
    assert sqlite_tables == _shared(_pg_columns(pg_schema))
    assert {"events", "runs", "receipts", "cards", "tasks", "store_meta"} <= set(sqlite_tables)


def test_both_engines_record_the_same_migration_number(tmp_path: Path, pg_schema: str) -> None:
    Store(tmp_path / "dta.db").close()
    Store(PG_URL, schema=pg_schema).close()
    conn = sqlite3.connect(tmp_path / "dta.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.close()
    with psycopg.connect(PG_URL) as pg:
        pg.execute(f'SET search_path TO "{pg_schema}"')
        assert pg.execute("SELECT version FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
        # a dta from before the shared numbering refuses this schema instead of migrating it
        assert pg.execute("SELECT version FROM schema_version").fetchone()[0] == LEGACY_REFUSAL


def test_a_postgresql_store_numbered_the_old_way_is_carried_over(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema an older dta built recorded its own numbering (its 4 is the shared 7) and
    had no ``schema_migrations``: it is read as what it is, migrated on, and keeps its rows."""
    monkeypatch.setattr(storage.schema, "MIGRATIONS", MIGRATIONS[:7])
    old = Store(PG_URL, schema=pg_schema)
    old.events.add_event(event(msg_id="m-old"), "{}")
    old.close()
    monkeypatch.undo()
    with psycopg.connect(PG_URL, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{pg_schema}"')
        pg.execute("DROP TABLE schema_migrations")
        pg.execute("UPDATE schema_version SET version = 4")  # the old numbering's newest
    store = Store(PG_URL, schema=pg_schema)
    try:
        assert [e.event_id for e in store.events.all()] == ["m-old"]
        assert store.conn.execute("SELECT version FROM schema_migrations").fetchone()[0] == len(
            MIGRATIONS
        )
    finally:
        store.close()


def test_a_schema_newer_than_this_dta_is_refused_in_one_line(pg_schema: str) -> None:
    Store(PG_URL, schema=pg_schema).close()
    with psycopg.connect(PG_URL, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{pg_schema}"')
        pg.execute("UPDATE schema_migrations SET version = 99")
    with pytest.raises(StoreError) as raised:
        Store(PG_URL, schema=pg_schema)
    assert raised.value.problem is StoreProblem.SCHEMA
    assert "newer than this dta" in str(raised.value) and "\n" not in str(raised.value)


def test_the_engines_are_found_in_the_package_sqlite_asked_last() -> None:
    assert storage.backends.backends() == (PostgresBackend, SqliteBackend)


class PrefixedSqlite(SqliteBackend):
    """A third engine as a newcomer would add one: here, SQLite files named by a URL."""

    fallback = False

    @staticmethod
    def accepts(target: str) -> bool:
        return target.startswith("prefixed:")

    def __init__(self, target: str, **options: Any) -> None:
        super().__init__(target.removeprefix("prefixed:"), **options)


def test_a_new_backend_is_one_class_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = storage.backends.backends()
    monkeypatch.setattr(storage.backends, "backends", lambda: (PrefixedSqlite, *found))
    store = Store(f"prefixed:{tmp_path / 'third.db'}")
    try:
        assert isinstance(store.db.engine, PrefixedSqlite)
        assert store.events.add_event(event(msg_id="m1"), "{}").new
        assert not store.events.add_event(event(msg_id="m1"), "{}").new
        assert store.probe().ok
    finally:
        store.close()
    assert (tmp_path / "third.db").exists()
