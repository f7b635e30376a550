"""The row writers several record families share: each writes its rows on the connection of
a transaction its caller holds (``StoreBase._tx``), so what a family writes with them is
part of that one transaction."""

from __future__ import annotations

from typing import Any

from agent.contracts import ActionIntent, Attempt, Receipt, ResponseDecision, Run


def update_run(conn: Any, run: Run) -> None:
    conn.execute(
        "UPDATE runs SET state = ?, updated_at = ?, run_json = ? WHERE run_id = ?",
        (run.state.value, run.updated_at, run.to_json(), run.run_id),
    )


def insert_decision(conn: Any, run_id: str, decision: ResponseDecision) -> None:
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


def insert_attempt(conn: Any, attempt: Attempt) -> None:
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


def update_attempt(conn: Any, attempt: Attempt) -> None:
    conn.execute(
        "UPDATE attempts SET outcome = ?, finished_at = ?, attempt_json = ? WHERE attempt_id = ?",
        (
            attempt.outcome.value,
            attempt.finished_at,
            attempt.to_json(),
            attempt.attempt_id,
        ),
    )


def insert_receipt(conn: Any, receipt: Receipt) -> None:
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


def insert_intent(conn: Any, intent: ActionIntent) -> bool:
    """The intent and (for a message) its write-budget row; False if its key is held."""
    cursor = conn.execute(
        "INSERT INTO intents (intent_id, run_id, event_id, kind,"
        " idempotency_key, conversation_id, created_at, intent_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            intent.intent_id,
            intent.run_id,
            intent.event_id,
            intent.kind.value,
            intent.idempotency_key,
            intent.target.conversation_id,
            intent.created_at,
            intent.to_json(),
        ),
    )
    if cursor.rowcount == 0:
        return False
    if intent.kind.is_message:
        conn.execute(
            "INSERT INTO budget_ledger (conversation_id, intent_id, at) VALUES (?, ?, ?)",
            (intent.target.conversation_id, intent.intent_id, intent.created_at),
        )
    return True


def insert_outbound(conn: Any, outbound: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO outbound (intent_id, process_query_key,"
        " conversation_id, channel, text, sent_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (intent_id) DO UPDATE SET"
        " process_query_key = excluded.process_query_key,"
        " conversation_id = excluded.conversation_id, channel = excluded.channel,"
        " text = excluded.text, sent_at = excluded.sent_at",
        (
            outbound["intent_id"],
            outbound.get("process_query_key"),
            outbound["conversation_id"],
            outbound["channel"],
            outbound["text"],
            outbound["sent_at"],
        ),
    )
