"""Migrations 8-15: budgets by time, model usage, approvals and read-backs of acts, an
answer's stored pieces.

Released: never edit one; a new migration is appended to this list (or to a new era's).
"""

from __future__ import annotations

from storage.migrations.step import Migration

ACTS: list[Migration] = [
    Migration(
        # Rows out of time order (a clock stepped back, a restored backup) must not move the
        # day's count; the hourly rows, kept by triggers on every insert and delete, let the
        # count before every write read at most 25 hours and one hour's ledger rows
        # (storage/actions.py). PostgreSQL counts the ledger's index instead: a trigger
        # there would make every replica's send wait on one hot row.
        "8: the day's write budget counted by time, not by row ids",
        only={
            "sqlite": """
            CREATE TABLE budget_hours (
                hour INTEGER PRIMARY KEY,
                writes INTEGER NOT NULL
            );
            INSERT INTO budget_hours (hour, writes)
                SELECT CAST(at / 3600 AS INTEGER), COUNT(*) FROM budget_ledger
                GROUP BY CAST(at / 3600 AS INTEGER);
            CREATE TRIGGER budget_hours_add AFTER INSERT ON budget_ledger BEGIN
                INSERT INTO budget_hours (hour, writes)
                VALUES (CAST(NEW.at / 3600 AS INTEGER), 1)
                ON CONFLICT (hour) DO UPDATE SET writes = writes + 1;
            END;
            CREATE TRIGGER budget_hours_remove AFTER DELETE ON budget_ledger BEGIN
                UPDATE budget_hours SET writes = writes - 1
                WHERE hour = CAST(OLD.at / 3600 AS INTEGER);
            END;
            """
        },
    ),
    Migration(
        # PostgreSQL stores had these from their first migration; SQLite made store_meta on
        # demand (storage/integrity.py), hence IF NOT EXISTS.
        "9: the store's own key/value table, and intents found by their event (trace, prune)",
        "CREATE INDEX IF NOT EXISTS intents_event ON intents (event_id);",
        {  # SQLite's value keeps whatever it is given (the probe's time, a blob)
            "sqlite": "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value);",
            "postgresql": "CREATE TABLE IF NOT EXISTS store_meta"
            " (key TEXT PRIMARY KEY, value TEXT);",
        },
    ),
    Migration(
        "10: what each run of a model cost, for the token budgets and their metrics",
        """
        CREATE TABLE model_usage (
            run_id TEXT PRIMARY KEY,
            actor_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            model TEXT NOT NULL,
            at {real} NOT NULL,
            prompt_tokens {integer} NOT NULL,
            completion_tokens {integer} NOT NULL,
            total_tokens {integer} NOT NULL,
            cost {real} NOT NULL,
            degraded TEXT
        );
        CREATE INDEX model_usage_actor ON model_usage (actor_id, at);
        CREATE INDEX model_usage_conversation ON model_usage (conversation_id, at);
        CREATE INDEX model_usage_at ON model_usage (at);
        """,
    ),
    Migration(
        "11: a conversation's memories, read for every run's grounding",
        """
        CREATE INDEX memory_scope ON memory_candidates (scope_id, created_at);
        """,
    ),
    Migration(
        # A pending approval is a row, so it survives a restart and any replica may take
        # the click; the first decision stands by a compare-and-set on ``status``. Clicks
        # are kept by their Stream frame id: a redelivered click is recognised anywhere.
        "12: approvals of acts, and the clicks on their cards",
        """
        CREATE TABLE approvals (
            {rowid}
            approval_id TEXT PRIMARY KEY,
            event_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            authorizer TEXT NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            code TEXT NOT NULL,
            out_track_id TEXT,
            settled_by TEXT,
            created_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            approval_json TEXT NOT NULL
        );
        CREATE INDEX approvals_event ON approvals (event_id);
        CREATE INDEX approvals_status ON approvals (status, expires_at);
        CREATE INDEX approvals_track ON approvals (out_track_id);
        CREATE INDEX approvals_conversation ON approvals (conversation_id, status);
        CREATE INDEX intents_kind ON intents (kind, conversation_id, created_at);

        CREATE TABLE approval_clicks (
            frame_id TEXT PRIMARY KEY,
            approval_id TEXT,
            user_id TEXT NOT NULL,
            action TEXT NOT NULL,
            outcome TEXT NOT NULL,
            at {real} NOT NULL
        );
        CREATE INDEX approval_clicks_approval ON approval_clicks (approval_id);
        """,
    ),
    Migration(
        # The asker's stop on a streaming reply card, written by whichever replica took the
        # click and read by the one streaming (between frames).
        "13: stop requests on streaming reply cards",
        """
        CREATE TABLE card_stops (
            out_track_id TEXT PRIMARY KEY,
            stopped_by TEXT NOT NULL,
            at {real} NOT NULL
        );
        """,
    ),
    Migration(
        # An act that may have happened (uncertain) or that no read has confirmed yet
        # (accepted) is read back until it resolves; this row keeps the back-off between
        # tries, and when the doubt began (a "not found" right after a timeout is read
        # again once the platform's settling time has passed).
        "14: the read-back queue of acts; an approval found by its act's key",
        """
        CREATE TABLE act_readbacks (
            intent_id TEXT PRIMARY KEY,
            since {real} NOT NULL,
            tries {integer} NOT NULL DEFAULT 0,
            next_at {real} NOT NULL,
            last_error TEXT
        );
        ALTER TABLE approvals ADD COLUMN act_key TEXT;
        CREATE INDEX approvals_act_key ON approvals (act_key);
        """,
    ),
    Migration(
        # The bytes of a reply's pictures and files, kept with its stored pieces before the
        # first goes, so the recovery pass can still send one a crash cut off (base64: one
        # spelling for every engine); dropped once the answer's pieces all have receipts.
        "15: the bytes of an answer's attachments, kept until they are sent",
        """
        CREATE TABLE piece_bytes (
            intent_id TEXT PRIMARY KEY,
            event_id TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at {real} NOT NULL
        );
        CREATE INDEX piece_bytes_event ON piece_bytes (event_id);
        """,
    ),
]
