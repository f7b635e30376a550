"""The store's schema on PostgreSQL: the same tables as ``storage/schema.py``, as migrations.

The tables match the SQLite schema column for column, with PostgreSQL's types, and every
table the store reads "oldest first" has a ``rowid`` identity column so the same SQL orders
the same way on both. Migrations run once each, under a transaction-scoped advisory lock:
replicas starting together wait for the first one, and an older dta refuses a newer schema
in one line (upgrade replicas one at a time: a newer dta migrates, older ones keep working
until the schema outgrows them, then refuse to start).
"""

from __future__ import annotations

from typing import Any

import psycopg

PG_MIGRATIONS: list[str] = [
    # 1: everything SQLite's migrations 1-4 build, plus the store's own metadata
    """
    CREATE TABLE events (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        event_id TEXT PRIMARY KEY,
        thread_key TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        generation BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        received_at DOUBLE PRECISION NOT NULL,
        event_json TEXT NOT NULL,
        raw TEXT NOT NULL
    );
    CREATE INDEX events_thread ON events (conversation_id, actor_id, created_at);
    CREATE TABLE deliveries (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        event_id TEXT NOT NULL,
        frame_message_id TEXT,
        received_at DOUBLE PRECISION NOT NULL,
        duplicate BIGINT NOT NULL
    );
    CREATE INDEX deliveries_event ON deliveries (event_id);
    CREATE TABLE quarantine (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        received_at DOUBLE PRECISION NOT NULL,
        frame_message_id TEXT,
        reason TEXT NOT NULL,
        error TEXT NOT NULL,
        raw TEXT NOT NULL
    );
    CREATE TABLE threads (
        thread_key TEXT PRIMARY KEY,
        generation BIGINT NOT NULL
    );
    CREATE TABLE runs (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        run_id TEXT PRIMARY KEY,
        event_id TEXT NOT NULL UNIQUE,
        thread_key TEXT NOT NULL,
        generation BIGINT NOT NULL,
        state TEXT NOT NULL,
        provider TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        run_json TEXT NOT NULL,
        owner TEXT,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_state ON runs (state);
    CREATE TABLE decisions (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        event_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        verdict TEXT NOT NULL,
        reason TEXT NOT NULL,
        gate_version TEXT NOT NULL,
        decided_at DOUBLE PRECISION NOT NULL,
        decision_json TEXT NOT NULL
    );
    CREATE TABLE intents (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        intent_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        intent_json TEXT NOT NULL
    );
    CREATE INDEX intents_run ON intents (run_id);
    CREATE INDEX intents_event ON intents (event_id);
    CREATE TABLE attempts (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        attempt_id TEXT PRIMARY KEY,
        intent_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        outcome TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        attempt_json TEXT NOT NULL
    );
    CREATE INDEX attempts_intent ON attempts (intent_id);
    CREATE INDEX attempts_outcome ON attempts (outcome);
    CREATE TABLE receipts (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        receipt_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        intent_id TEXT,
        kind TEXT,
        status TEXT NOT NULL,
        reason TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        receipt_json TEXT NOT NULL
    );
    CREATE INDEX receipts_event ON receipts (event_id);
    CREATE INDEX receipts_intent ON receipts (intent_id);
    CREATE TABLE budget_ledger (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        intent_id TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX budget_conversation ON budget_ledger (conversation_id, at);
    CREATE INDEX budget_at ON budget_ledger (at);
    CREATE TABLE outbound (
        intent_id TEXT PRIMARY KEY,
        process_query_key TEXT,
        conversation_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        text TEXT NOT NULL,
        sent_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX outbound_pqk ON outbound (process_query_key);
    CREATE TABLE tasks (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        task_id TEXT PRIMARY KEY,
        scope_id TEXT NOT NULL,
        status TEXT NOT NULL,
        revision BIGINT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        task_json TEXT NOT NULL
    );
    CREATE INDEX tasks_scope ON tasks (scope_id, status);
    CREATE TABLE identity_cache (
        user_id TEXT PRIMARY KEY,
        fetched_at DOUBLE PRECISION NOT NULL,
        identity_json TEXT NOT NULL
    );
    CREATE TABLE memory_candidates (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        candidate_id TEXT PRIMARY KEY,
        scope_id TEXT NOT NULL,
        status TEXT NOT NULL,
        revision BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        candidate_json TEXT NOT NULL
    );
    CREATE INDEX memory_status ON memory_candidates (status, created_at);
    CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT);
    """,
    # 2: runs of one thread stay serial across replicas
    """
    CREATE TABLE thread_leases (
        thread_key TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL
    );
    """,
    # 3: AI cards and the app-wide card call budget shared by replicas (SQLite's 6)
    """
    CREATE TABLE cards (
        rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
        out_track_id TEXT PRIMARY KEY,
        intent_id TEXT NOT NULL UNIQUE,
        event_id TEXT NOT NULL,
        state TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        card_json TEXT NOT NULL
    );
    CREATE INDEX cards_state ON cards (state, updated_at);
    CREATE INDEX cards_event ON cards (event_id);
    CREATE TABLE card_slots (
        slot_second BIGINT PRIMARY KEY,
        used BIGINT NOT NULL
    );
    """,
    # 4: proactive work: what the heartbeat looks up each beat (SQLite's 7)
    """
    ALTER TABLE tasks ADD COLUMN due_at DOUBLE PRECISION;
    ALTER TABLE tasks ADD COLUMN waiting_since DOUBLE PRECISION;
    ALTER TABLE tasks ADD COLUMN created_at DOUBLE PRECISION;
    UPDATE tasks SET created_at = CAST(task_json::json ->> 'created_at' AS DOUBLE PRECISION);
    CREATE INDEX tasks_due ON tasks (status, due_at);
    """,
]


def migrate_pg(conn: psycopg.Connection[Any], schema: str) -> int:
    """Bring ``schema`` up to the newest version, once, whoever else is starting."""
    newest = len(PG_MIGRATIONS)
    with conn.transaction():
        # One migrator at a time per schema; the lock ends with the transaction.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"dta-migrate:{schema}",))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        version = int(row[0]) if row else 0
        if version > newest:
            raise RuntimeError(
                f"store schema version {version} is newer than this dta ({newest}); "
                "upgrade dta or use another store"
            )
        for script in PG_MIGRATIONS[version:]:
            conn.execute(script)  # type: ignore[arg-type]
        if row is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (newest,))
        elif version < newest:
            conn.execute("UPDATE schema_version SET version = %s", (newest,))
    return newest
