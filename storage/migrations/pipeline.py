"""Migrations 1-7: the pipeline's records, the store as its queue, cards and proactive tasks.

Released: never edit one, append new migrations to the last era (``storage/migrations/``).
"""

from __future__ import annotations

from storage.migrations.step import Migration

PIPELINE: list[Migration] = [
    Migration(
        "1: the core pipeline",
        """
        CREATE TABLE events (
            {rowid}
            event_id TEXT PRIMARY KEY,
            thread_key TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            actor_id TEXT NOT NULL,
            generation {integer} NOT NULL,
            created_at {real} NOT NULL,
            received_at {real} NOT NULL,
            event_json TEXT NOT NULL,
            raw TEXT NOT NULL
        );
        CREATE INDEX events_thread ON events (conversation_id, actor_id, created_at);

        -- every delivery of a chatbot callback, duplicates included (they are counted here)
        CREATE TABLE deliveries (
            id {serial},
            event_id TEXT NOT NULL,
            frame_message_id TEXT,
            received_at {real} NOT NULL,
            duplicate {integer} NOT NULL
        );
        CREATE INDEX deliveries_event ON deliveries (event_id);

        CREATE TABLE quarantine (
            id {serial},
            received_at {real} NOT NULL,
            frame_message_id TEXT,
            reason TEXT NOT NULL,
            error TEXT NOT NULL,
            raw TEXT NOT NULL
        );

        -- the current generation of each thread (conversation + actor)
        CREATE TABLE threads (
            thread_key TEXT PRIMARY KEY,
            generation {integer} NOT NULL
        );

        CREATE TABLE runs (
            {rowid}
            run_id TEXT PRIMARY KEY,
            event_id TEXT NOT NULL UNIQUE,
            thread_key TEXT NOT NULL,
            generation {integer} NOT NULL,
            state TEXT NOT NULL,
            provider TEXT NOT NULL,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL,
            run_json TEXT NOT NULL
        );
        CREATE INDEX runs_state ON runs (state);

        CREATE TABLE decisions (
            {rowid}
            event_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            verdict TEXT NOT NULL,
            reason TEXT NOT NULL,
            gate_version TEXT NOT NULL,
            decided_at {real} NOT NULL,
            decision_json TEXT NOT NULL
        );

        CREATE TABLE intents (
            {rowid}
            intent_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            event_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            idempotency_key TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL,
            created_at {real} NOT NULL,
            intent_json TEXT NOT NULL
        );
        CREATE INDEX intents_run ON intents (run_id);

        CREATE TABLE attempts (
            {rowid}
            attempt_id TEXT PRIMARY KEY,
            intent_id TEXT NOT NULL,
            channel TEXT NOT NULL,
            outcome TEXT NOT NULL,
            started_at {real} NOT NULL,
            finished_at {real},
            attempt_json TEXT NOT NULL
        );
        CREATE INDEX attempts_intent ON attempts (intent_id);
        CREATE INDEX attempts_outcome ON attempts (outcome);

        CREATE TABLE receipts (
            {rowid}
            receipt_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            event_id TEXT NOT NULL,
            intent_id TEXT,
            kind TEXT,
            status TEXT NOT NULL,
            reason TEXT,
            created_at {real} NOT NULL,
            receipt_json TEXT NOT NULL
        );
        CREATE INDEX receipts_event ON receipts (event_id);
        CREATE INDEX receipts_intent ON receipts (intent_id);

        -- one row per message the runtime decided to put on the wire (write budgets)
        CREATE TABLE budget_ledger (
            id {serial},
            conversation_id TEXT NOT NULL,
            intent_id TEXT NOT NULL,
            at {real} NOT NULL
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
            sent_at {real} NOT NULL
        );
        CREATE INDEX outbound_pqk ON outbound (process_query_key);
        """,
    ),
    Migration(
        "2: tasks and the identity cache",
        """
        CREATE TABLE tasks (
            {rowid}
            task_id TEXT PRIMARY KEY,
            scope_id TEXT NOT NULL,
            status TEXT NOT NULL,
            revision {integer} NOT NULL,
            updated_at {real} NOT NULL,
            task_json TEXT NOT NULL
        );
        CREATE INDEX tasks_scope ON tasks (scope_id, status);

        CREATE TABLE identity_cache (
            user_id TEXT PRIMARY KEY,
            fetched_at {real} NOT NULL,
            identity_json TEXT NOT NULL
        );
        """,
    ),
    Migration(
        "3: memory candidates (proposed online, reviewed and published offline)",
        """
        CREATE TABLE memory_candidates (
            {rowid}
            candidate_id TEXT PRIMARY KEY,
            scope_id TEXT NOT NULL,
            status TEXT NOT NULL,
            revision {integer} NOT NULL,
            created_at {real} NOT NULL,
            candidate_json TEXT NOT NULL
        );
        CREATE INDEX memory_status ON memory_candidates (status, created_at);
        """,
    ),
    Migration(
        "4: the store is the queue: each run is owned under a lease renewed while it works",
        """
        ALTER TABLE runs ADD COLUMN owner TEXT;
        ALTER TABLE runs ADD COLUMN lease_until {real} NOT NULL DEFAULT 0;
        """,
    ),
    Migration(
        "5: runs of one thread stay serial across replicas",
        """
        CREATE TABLE thread_leases (
            thread_key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            lease_until {real} NOT NULL
        );
        """,
    ),
    Migration(
        "6: AI cards (agent/cards/broker.py) and the app-wide card call budget of replicas",
        """
        CREATE TABLE cards (
            {rowid}
            out_track_id TEXT PRIMARY KEY,
            intent_id TEXT NOT NULL UNIQUE,
            event_id TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_at {real} NOT NULL,
            card_json TEXT NOT NULL
        );
        CREATE INDEX cards_state ON cards (state, updated_at);
        CREATE INDEX cards_event ON cards (event_id);

        -- card calls taken in each second, for every process on this store together
        CREATE TABLE card_slots (
            slot_second {integer} PRIMARY KEY,
            used {integer} NOT NULL
        );
        """,
    ),
    Migration(
        "7: proactive work (agent/proactive/heartbeat.py): what the heartbeat looks up",
        """
        ALTER TABLE tasks ADD COLUMN due_at {real};
        ALTER TABLE tasks ADD COLUMN waiting_since {real};
        ALTER TABLE tasks ADD COLUMN created_at {real};
        CREATE INDEX tasks_due ON tasks (status, due_at);
        """,
        {  # when each task began, for tasks an older dta left open (they expire too)
            "sqlite": "UPDATE tasks SET created_at = json_extract(task_json, '$.created_at');",
            "postgresql": "UPDATE tasks SET created_at ="
            " CAST(task_json::json ->> 'created_at' AS DOUBLE PRECISION);",
        },
    ),
]
