"""The storage floor for benchmarks: the rows one answered DM costs, written directly.

``write_bare_rows`` inserts exactly the rows the pipeline writes for one answered message
(event, delivery, thread generation, run, decision, intent, budget row, attempt, receipt,
outbound index, run update) in the same four transactions, with pre-built JSON and no
parsing, gates, skills or HTTP. Dividing the pipeline's rate by this rate shows what the
pipeline adds on top of the durability it needs anyway; the share of the time spent in
``COMMIT`` shows how much of that floor is the commits themselves.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from agent.contracts import new_id
from storage.store import Store


class BareWrites(NamedTuple):
    seconds: float
    commit_seconds: float  # of ``seconds``, the time inside COMMIT statements


def write_bare_rows(
    target: str | Path, count: int, synchronous: str = "normal", schema: str | None = None
) -> BareWrites:
    """Write ``count`` answered messages' rows (a SQLite file, or a PostgreSQL URL and
    schema); returns how long it took, and how much of that was committing. Each message
    takes the pipeline's four transactions: stored, run opened, intent sent, settled."""
    store = Store(target, synchronous, schema=schema)
    conn = store.conn
    blob = json.dumps({"pad": "x" * 600})  # about the size of the pipeline's JSON columns
    committing = 0.0
    started = time.perf_counter()
    for i in range(count):
        row = _Row(i, new_id("run"), new_id("int"), new_id("att"))
        for write in (_stored, _opened, _sent, _settled):
            conn.execute("BEGIN IMMEDIATE")
            write(conn, row, blob)
            at = time.perf_counter()
            conn.execute("COMMIT")
            committing += time.perf_counter() - at
    seconds = time.perf_counter() - started
    store.close()
    return BareWrites(seconds, committing)


@dataclass(frozen=True)
class _Row:
    """One synthetic message's keys."""

    i: int
    run_id: str
    intent_id: str
    attempt_id: str

    @property
    def event_id(self) -> str:
        return f"bench-{self.i}"

    @property
    def thread(self) -> str:
        return f"cid-{self.i}|u{self.i}"


def _stored(conn: Any, row: _Row, blob: str) -> None:
    i = row.i
    conn.execute(
        "INSERT INTO threads (thread_key, generation) VALUES (?, 1)"
        " ON CONFLICT (thread_key) DO UPDATE SET generation = threads.generation + 1",
        (row.thread,),
    )
    conn.execute(
        "INSERT INTO events (event_id, thread_key, conversation_id, actor_id, generation,"
        " created_at, received_at, event_json, raw) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
        (row.event_id, row.thread, f"cid-{i}", f"u{i}", 0.0, 0.0, blob, blob),
    )
    conn.execute(
        "INSERT INTO deliveries (event_id, frame_message_id, received_at, duplicate)"
        " VALUES (?, ?, 0, 0)",
        (row.event_id, f"f{i}"),
    )


def _opened(conn: Any, row: _Row, blob: str) -> None:
    conn.execute(
        "INSERT INTO runs (run_id, event_id, thread_key, generation, state, provider,"
        " created_at, updated_at, run_json) VALUES (?, ?, ?, 1, 'working', 'rules', 0, 0, ?)",
        (row.run_id, row.event_id, row.thread, blob),
    )
    conn.execute(
        "INSERT INTO decisions (event_id, run_id, verdict, reason, gate_version, decided_at,"
        " decision_json) VALUES (?, ?, 'engage', 'dm', 'g', 0, ?)",
        (row.event_id, row.run_id, blob),
    )


def _sent(conn: Any, row: _Row, blob: str) -> None:
    conversation = f"cid-{row.i}"
    conn.execute(
        "INSERT INTO intents (intent_id, run_id, event_id, kind, idempotency_key,"
        " conversation_id, created_at, intent_json) VALUES (?, ?, ?, 'reply', ?, ?, 0, ?)",
        (row.intent_id, row.run_id, row.event_id, f"{row.event_id}:terminal", conversation, blob),
    )
    conn.execute(
        "INSERT INTO budget_ledger (conversation_id, intent_id, at) VALUES (?, ?, 0)",
        (conversation, row.intent_id),
    )
    conn.execute(
        "INSERT INTO attempts (attempt_id, intent_id, channel, outcome, started_at,"
        " attempt_json) VALUES (?, ?, 'session_webhook', 'started', 0, ?)",
        (row.attempt_id, row.intent_id, blob),
    )


def _settled(conn: Any, row: _Row, blob: str) -> None:
    conn.execute(
        "UPDATE attempts SET outcome = 'accepted', finished_at = 0, attempt_json = ?"
        " WHERE attempt_id = ?",
        (blob, row.attempt_id),
    )
    conn.execute(
        "INSERT INTO receipts (receipt_id, run_id, event_id, intent_id, kind, status,"
        " created_at, receipt_json) VALUES (?, ?, ?, ?, 'reply', 'accepted', 0, ?)",
        (new_id("rcp"), row.run_id, row.event_id, row.intent_id, blob),
    )
    conn.execute(
        "INSERT INTO outbound (intent_id, conversation_id, channel, text, sent_at)"
        " VALUES (?, ?, 'session_webhook', '12', 0)",
        (row.intent_id, f"cid-{row.i}"),
    )
    conn.execute(
        "UPDATE runs SET state = 'done', updated_at = 0, run_json = ? WHERE run_id = ?",
        (blob, row.run_id),
    )
