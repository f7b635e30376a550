"""The store's schema: one ordered list of migrations for every engine, one numbering.

A migration is written once, in the SQL the engines share, with a few words left for the
engine to fill in (``{real}``, ``{integer}``, ``{serial}``, ``{rowid}``: see ``Dialect``);
where an engine needs a statement of its own (a trigger, a JSON function) the migration
carries it beside the shared part. Each backend records how far a database has come and
applies the rest in order (``storage/backends/``). Never edit a released migration: append
a new one.

    for number, script in enumerate(scripts(SQLITE), start=1):
        ...
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Dialect:
    """How one engine spells what the store's SQL leaves open."""

    name: str
    real: str
    integer: str
    serial: str  # an integer primary key the database numbers itself
    # The column "oldest first" orders by: SQLite has one built in; elsewhere it is declared
    # on every table read in order, so the same ``ORDER BY rowid`` means the same thing.
    rowid: str
    # Appended to a SELECT whose rows the transaction holds until it commits (fencing).
    lock_rows: str
    lock_rows_of: str  # the same, for the rows of one table of a join (``{table}``)
    # The day's write budget: SQLite keeps the ledger's rows per hour (migration 8) so the
    # count before every write reads little; PostgreSQL counts its index.
    hourly_budget: bool
    words: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        words = {"real": self.real, "integer": self.integer, "serial": self.serial}
        object.__setattr__(self, "words", {**words, "rowid": self.rowid})

    def render(self, sql: str) -> str:
        return sql.format_map(self.words)


SQLITE = Dialect(
    name="sqlite",
    real="REAL",
    integer="INTEGER",
    serial="INTEGER PRIMARY KEY",
    rowid="",
    lock_rows="",  # one writer at a time holds the whole file (BEGIN IMMEDIATE)
    lock_rows_of="",
    hourly_budget=True,
)
POSTGRESQL = Dialect(
    name="postgresql",
    real="DOUBLE PRECISION",
    integer="BIGINT",
    serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    rowid="rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,",
    lock_rows=" FOR UPDATE",
    lock_rows_of=" FOR UPDATE OF {table}",
    hourly_budget=False,
)


@dataclass(frozen=True)
class Migration:
    """One step of the schema: ``shared`` SQL for every engine, then each engine's own."""

    title: str
    shared: str = ""
    only: dict[str, str] = field(default_factory=dict)  # engine name -> its own SQL

    def script(self, dialect: Dialect) -> str:
        return dialect.render(self.shared) + "\n" + self.only.get(dialect.name, "")


MIGRATIONS: list[Migration] = [
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
]


def scripts(dialect: Dialect) -> list[str]:
    """Every migration's SQL for ``dialect``, in order (migration ``n`` is item ``n - 1``)."""
    return [migration.script(dialect) for migration in MIGRATIONS]


def newer_than_this_dta(version: int) -> str:
    return (
        f"store schema version {version} is newer than this dta ({len(MIGRATIONS)}); "
        "upgrade dta or use another store"
    )
