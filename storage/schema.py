"""The store's schema, as an ordered list of migrations.

Each migration runs once, in order, inside a transaction; ``PRAGMA user_version`` records
how far a database has come. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: list[str] = [
    # 1: the core pipeline
    """
    CREATE TABLE events (
        event_id TEXT PRIMARY KEY,
        thread_key TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        created_at REAL NOT NULL,
        received_at REAL NOT NULL,
        event_json TEXT NOT NULL,
        raw TEXT NOT NULL
    );
    CREATE INDEX events_thread ON events (conversation_id, actor_id, created_at);

    -- every delivery of a chatbot callback, duplicates included (they are counted here)
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY,
        event_id TEXT NOT NULL,
        frame_message_id TEXT,
        received_at REAL NOT NULL,
        duplicate INTEGER NOT NULL
    );
    CREATE INDEX deliveries_event ON deliveries (event_id);

    CREATE TABLE quarantine (
        id INTEGER PRIMARY KEY,
        received_at REAL NOT NULL,
        frame_message_id TEXT,
        reason TEXT NOT NULL,
        error TEXT NOT NULL,
        raw TEXT NOT NULL
    );

    -- the current generation of each thread (conversation + actor)
    CREATE TABLE threads (
        thread_key TEXT PRIMARY KEY,
        generation INTEGER NOT NULL
    );

    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        event_id TEXT NOT NULL UNIQUE,
        thread_key TEXT NOT NULL,
        generation INTEGER NOT NULL,
        state TEXT NOT NULL,
        provider TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        run_json TEXT NOT NULL
    );
    CREATE INDEX runs_state ON runs (state);

    CREATE TABLE decisions (
        event_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        verdict TEXT NOT NULL,
        reason TEXT NOT NULL,
        gate_version TEXT NOT NULL,
        decided_at REAL NOT NULL,
        decision_json TEXT NOT NULL
    );

    CREATE TABLE intents (
        intent_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        intent_json TEXT NOT NULL
    );
    CREATE INDEX intents_run ON intents (run_id);

    CREATE TABLE attempts (
        attempt_id TEXT PRIMARY KEY,
        intent_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        outcome TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        attempt_json TEXT NOT NULL
    );
    CREATE INDEX attempts_intent ON attempts (intent_id);
    CREATE INDEX attempts_outcome ON attempts (outcome);

    CREATE TABLE receipts (
        receipt_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        intent_id TEXT,
        kind TEXT,
        status TEXT NOT NULL,
        reason TEXT,
        created_at REAL NOT NULL,
        receipt_json TEXT NOT NULL
    );
    CREATE INDEX receipts_event ON receipts (event_id);
    CREATE INDEX receipts_intent ON receipts (intent_id);

    -- one row per message the runtime decided to put on the wire (write budgets)
    CREATE TABLE budget_ledger (
        id INTEGER PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        intent_id TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX budget_conversation ON budget_ledger (conversation_id, at);
    CREATE INDEX budget_at ON budget_ledger (at);

    -- our own outbound messages, to resolve quotes and readbacks (processQueryKey -> intent)
    CREATE TABLE outbound (
        intent_id TEXT PRIMARY KEY,
        process_query_key TEXT,
        conversation_id TEXT NOT NULL,
        channel TEXT NOT NULL,
        text TEXT NOT NULL,
        sent_at REAL NOT NULL
    );
    CREATE INDEX outbound_pqk ON outbound (process_query_key);
    """,
    # 2: tasks and the identity cache
    """
    CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        scope_id TEXT NOT NULL,
        status TEXT NOT NULL,
        revision INTEGER NOT NULL,
        updated_at REAL NOT NULL,
        task_json TEXT NOT NULL
    );
    CREATE INDEX tasks_scope ON tasks (scope_id, status);

    CREATE TABLE identity_cache (
        user_id TEXT PRIMARY KEY,
        fetched_at REAL NOT NULL,
        identity_json TEXT NOT NULL
    );
    """,
    # 3: memory candidates (proposed online, reviewed and published offline)
    """
    CREATE TABLE memory_candidates (
        candidate_id TEXT PRIMARY KEY,
        scope_id TEXT NOT NULL,
        status TEXT NOT NULL,
        revision INTEGER NOT NULL,
        created_at REAL NOT NULL,
        candidate_json TEXT NOT NULL
    );
    CREATE INDEX memory_status ON memory_candidates (status, created_at);
    """,
    # 4: the store is the queue: each run is owned under a lease renewed while it works
    """
    ALTER TABLE runs ADD COLUMN owner TEXT;
    ALTER TABLE runs ADD COLUMN lease_until REAL NOT NULL DEFAULT 0;
    """,
    # 5: runs of one thread stay serial across replicas (PostgreSQL; kept alike here)
    """
    CREATE TABLE thread_leases (
        thread_key TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        lease_until REAL NOT NULL
    );
    """,
    # 6: AI cards (agent/cards/broker.py) and the app-wide card call budget shared by replicas
    """
    CREATE TABLE cards (
        out_track_id TEXT PRIMARY KEY,
        intent_id TEXT NOT NULL UNIQUE,
        event_id TEXT NOT NULL,
        state TEXT NOT NULL,
        updated_at REAL NOT NULL,
        card_json TEXT NOT NULL
    );
    CREATE INDEX cards_state ON cards (state, updated_at);
    CREATE INDEX cards_event ON cards (event_id);

    -- card calls taken in each second, for every process on this store together
    CREATE TABLE card_slots (
        slot_second INTEGER PRIMARY KEY,
        used INTEGER NOT NULL
    );
    """,
    # 7: proactive work (agent/proactive/heartbeat.py): what the heartbeat looks up each beat
    """
    ALTER TABLE tasks ADD COLUMN due_at REAL;
    ALTER TABLE tasks ADD COLUMN waiting_since REAL;
    ALTER TABLE tasks ADD COLUMN created_at REAL;
    UPDATE tasks SET created_at = json_extract(task_json, '$.created_at');
    CREATE INDEX tasks_due ON tasks (status, due_at);
    """,
    # 8: the day's write budget counted by time, not by row ids (rows out of time order, a
    # clock stepped back or a restored backup, must not move it): the ledger's rows per
    # hour, kept by triggers on every insert and delete, so the count before every write
    # reads at most 25 hours and the ledger rows of one of them (storage/actions.py)
    """
    CREATE TABLE budget_hours (
        hour INTEGER PRIMARY KEY,
        writes INTEGER NOT NULL
    );
    INSERT INTO budget_hours (hour, writes)
        SELECT CAST(at / 3600 AS INTEGER), COUNT(*) FROM budget_ledger
        GROUP BY CAST(at / 3600 AS INTEGER);
    CREATE TRIGGER budget_hours_add AFTER INSERT ON budget_ledger BEGIN
        INSERT INTO budget_hours (hour, writes) VALUES (CAST(NEW.at / 3600 AS INTEGER), 1)
        ON CONFLICT (hour) DO UPDATE SET writes = writes + 1;
    END;
    CREATE TRIGGER budget_hours_remove AFTER DELETE ON budget_ledger BEGIN
        UPDATE budget_hours SET writes = writes - 1 WHERE hour = CAST(OLD.at / 3600 AS INTEGER);
    END;
    """,
]


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn`` up to the newest schema; returns the resulting version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise RuntimeError(
            f"store schema version {version} is newer than this dta ({len(MIGRATIONS)}); "
            "upgrade dta or use another store"
        )
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        # executescript commits first; wrap each migration so it applies whole or not at all
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    return len(MIGRATIONS)
