"""Intents, attempts, receipts, the budget ledger and the outbound index: what was done."""

from __future__ import annotations

from typing import Any

from agent.contracts import (
    ActionIntent,
    Attempt,
    AttemptOutcome,
    Receipt,
    Run,
    RunState,
)
from storage.base import Family, StoreBase
from storage.pieces import PieceRecords
from storage.rows import (
    insert_attempt,
    insert_intent,
    insert_outbound,
    insert_receipt,
    update_attempt,
    update_run,
)


class ActionRecords(Family):
    """What was done; ``pieces``: the answers of several pieces, whose owed pieces the
    forgetting of unsent intents keeps."""

    def __init__(self, db: StoreBase, pieces: PieceRecords) -> None:
        super().__init__(db)
        self.pieces = pieces

    # ------------------------------------------------------------------ gate facts

    def receipt_for_idempotency_key(self, key: str) -> Receipt | None:
        """The first receipt of the intent holding ``key`` (None if it has none yet)."""
        row = self.db.conn.execute(
            "SELECT r.receipt_json FROM intents i JOIN receipts r ON r.intent_id = i.intent_id"
            " WHERE i.idempotency_key = ? ORDER BY r.rowid LIMIT 1",
            (key,),
        ).fetchone()
        return Receipt.model_validate_json(row[0]) if row else None

    def intent_key_taken(self, key: str) -> bool:
        return self._scalar("SELECT 1 FROM intents WHERE idempotency_key = ?", (key,)) is not None

    def intent_by_key(self, key: str) -> ActionIntent | None:
        row = self.db.conn.execute(
            "SELECT intent_json FROM intents WHERE idempotency_key = ?", (key,)
        ).fetchone()
        return ActionIntent.model_validate_json(row[0]) if row else None

    def finished_acks_since(self, since: float) -> list[ActionIntent]:
        """Reaction acks made since ``since`` whose run has ended and that no accepted
        recall has taken off yet (the recovery pass's candidates: few, however busy)."""
        finished = [state.value for state in RunState if state.is_finished]
        rows = self.db.conn.execute(
            "SELECT i.intent_json FROM intents i JOIN runs r ON r.event_id = i.event_id"
            " WHERE i.kind = 'ack' AND i.created_at >= ?"
            f" AND r.state IN ({', '.join('?' * len(finished))})"
            " AND EXISTS (SELECT 1 FROM attempts a WHERE a.intent_id = i.intent_id"
            " AND a.channel = 'reaction')"
            " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.intent_id = i.intent_id"
            " AND a.outcome = 'accepted' AND a.attempt_json LIKE ?) ORDER BY i.created_at",
            (since, *finished, '%"request_digest":"recall"%'),
        ).fetchall()
        return [ActionIntent.model_validate_json(row[0]) for row in rows]

    def intent(self, intent_id: str) -> ActionIntent | None:
        row = self.db.conn.execute(
            "SELECT intent_json FROM intents WHERE intent_id = ?", (intent_id,)
        ).fetchone()
        return ActionIntent.model_validate_json(row[0]) if row else None

    def intent_receipts(self, intent_id: str) -> list[Receipt]:
        """Every receipt of one intent, oldest first (an uncertain act, then its read-back)."""
        rows = self.db.conn.execute(
            "SELECT receipt_json FROM receipts WHERE intent_id = ? ORDER BY rowid", (intent_id,)
        ).fetchall()
        return [Receipt.model_validate_json(r[0]) for r in rows]

    def _writes_since(self, day_ago: float) -> tuple[str, tuple[float, ...]]:
        """SQL counting the ledger rows stamped after ``day_ago``, and its parameters.

        On SQLite the count is by time but reads little: whole hours after the one
        ``day_ago`` falls in come from ``budget_hours`` (kept by triggers), and only that
        one hour's rows are counted one by one. Rows out of time order (a clock stepped
        back, a restored backup) are counted by their own time, as anywhere else.
        PostgreSQL counts."""
        if not self.db.dialect.hourly_budget:
            return "(SELECT COUNT(*) FROM budget_ledger WHERE at > ?)", (day_ago,)
        hour = float(int(day_ago // 3600))
        return (
            "(SELECT COALESCE(SUM(writes), 0) FROM budget_hours WHERE hour > ?)"
            " + (SELECT COUNT(*) FROM budget_ledger WHERE at > ? AND at < ?"
            " AND CAST(at / 3600 AS INTEGER) <= ?)",
            (hour, day_ago, (hour + 1) * 3600, hour),
        )

    def gate_facts(
        self,
        thread_key: str,
        conversation_id: str,
        minute_ago: float,
        day_ago: float,
        keys: list[str],
    ) -> tuple[int, int, int, dict[str, Receipt | None]]:
        """Everything the action gate reads, in one statement (it runs before every write):
        the thread's generation, writes in the conversation since ``minute_ago`` and in
        total since ``day_ago``, and which of ``keys`` are already held."""
        marks = ",".join("?" * len(keys))
        day_sql, day_params = self._writes_since(day_ago)
        row = self.db.conn.execute(
            "SELECT (SELECT generation FROM threads WHERE thread_key = ?),"
            " (SELECT COUNT(*) FROM budget_ledger WHERE conversation_id = ? AND at > ?),"
            f" {day_sql},"
            f" (SELECT COUNT(*) FROM intents WHERE idempotency_key IN ({marks}))",
            (thread_key, conversation_id, minute_ago, *day_params, *keys),
        ).fetchone()
        taken: dict[str, Receipt | None] = {}
        if row[3]:  # rarely: a repeat, or an ack before the answer
            held = self.db.conn.execute(
                f"SELECT idempotency_key FROM intents WHERE idempotency_key IN ({marks})", keys
            ).fetchall()
            taken = {key: self.receipt_for_idempotency_key(key) for (key,) in held}
        return int(row[0] or 0), int(row[1]), int(row[2] or 0), taken

    # ------------------------------------------------------------------ intents, attempts

    def add_intent(self, intent: ActionIntent, first_attempt: Attempt | None = None) -> bool:
        """Store an approved intent, its write-budget row and (before any I/O) its first
        attempt, together. False if another execution already holds the idempotency key;
        ``LeaseLost`` if another owner took the run over (then nothing may be sent)."""
        with self._tx(run=intent.run_id) as conn:
            if not insert_intent(conn, intent):
                return False
            if first_attempt is not None:
                insert_attempt(conn, first_attempt)
        return True

    def start_attempt(self, attempt: Attempt) -> None:
        """Record an attempt before its I/O, for an intent already stored (an act stores
        its intent first, has what its request needs, and only then may it be sent)."""
        with self._tx(intent=attempt.intent_id) as conn:
            insert_attempt(conn, attempt)

    def switch_delivery(self, done: Attempt, intent: ActionIntent, attempt: Attempt) -> None:
        """A form that could not carry the intent (an approval card DingTalk refused): that
        attempt closed, the intent's new content and its first attempt on the usual
        channel recorded, together, before any I/O."""
        with self._tx(intent=intent.intent_id) as conn:
            update_attempt(conn, done)
            conn.execute(
                "UPDATE intents SET intent_json = ? WHERE intent_id = ?",
                (intent.to_json(), intent.intent_id),
            )
            insert_attempt(conn, attempt)

    def finish_attempt(self, attempt: Attempt, start_next: Attempt | None = None) -> None:
        """Close an attempt; ``start_next`` is recorded in the same breath, before its I/O."""
        with self._tx(intent=attempt.intent_id) as conn:
            update_attempt(conn, attempt)
            if start_next is not None:
                insert_attempt(conn, start_next)

    def finish_delivery(
        self,
        attempt: Attempt,
        receipt: Receipt,
        outbound: dict[str, Any] | None,
        run: Run | None = None,
    ) -> None:
        """Close the last attempt, write the receipt, index what we sent and (when this was
        the run's last word) save the run's final state, together."""
        with self._tx(run=receipt.run_id) as conn:
            update_attempt(conn, attempt)
            insert_receipt(conn, receipt)
            if run is not None:
                update_run(conn, run)
            if outbound is not None:
                insert_outbound(conn, outbound)

    def add_receipt(self, receipt: Receipt, run: Run | None = None) -> None:
        with self._tx(run=receipt.run_id) as conn:
            insert_receipt(conn, receipt)
            if run is not None:
                update_run(conn, run)

    def interrupted_attempts(
        self, event_id: str | None = None
    ) -> list[tuple[Attempt, ActionIntent]]:
        """Attempts left ``started`` by an execution that stopped (a crash, or a store that
        failed mid-run): we cannot know whether they reached DingTalk. All of them, or
        those of one event's run."""
        only = " AND i.event_id = ?" if event_id is not None else ""
        rows = self.db.conn.execute(
            "SELECT a.attempt_json, i.intent_json FROM attempts a"
            " JOIN intents i ON i.intent_id = a.intent_id WHERE a.outcome = ?"
            f"{only} ORDER BY a.rowid",
            (AttemptOutcome.STARTED.value, *([event_id] if event_id is not None else [])),
        ).fetchall()
        return [
            (Attempt.model_validate_json(a), ActionIntent.model_validate_json(i)) for a, i in rows
        ]

    def drop_unsent_intents(
        self, event_id: str | None = None, keep: frozenset[str] = frozenset()
    ) -> int:
        """Forget intents an execution stopped before their first attempt was even recorded
        (all of them, or one event's), with the card of one whose create never left.

        Such an intent provably never reached DingTalk, so dropping it (and its budget row)
        lets the run's re-execution go through the action gate afresh. An answer that
        started going keeps its owed pieces (storage/pieces.py), as it keeps ``keep``.
        """
        keep = keep | self.pieces.owed_piece_ids(event_id)
        orphan = (
            "SELECT i.intent_id FROM intents i WHERE NOT EXISTS"
            " (SELECT 1 FROM attempts a WHERE a.intent_id = i.intent_id)"
            " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id = i.intent_id)"
        )
        params: tuple[str, ...] = ()
        if event_id is not None:
            orphan += " AND i.event_id = ?"
            params = (event_id,)
        if keep:  # the owed pieces of an answer that started going (storage/pieces.py)
            orphan += f" AND i.intent_id NOT IN ({', '.join('?' * len(keep))})"
            params = (*params, *sorted(keep))
        with self._tx() as conn:
            conn.execute(f"DELETE FROM budget_ledger WHERE intent_id IN ({orphan})", params)
            # a card whose create never left goes with its intent (storage/cards.py)
            conn.execute(f"DELETE FROM cards WHERE intent_id IN ({orphan})", params)
            cursor = conn.execute(f"DELETE FROM intents WHERE intent_id IN ({orphan})", params)
        return cursor.rowcount

    def forget_unsent(self, intent_id: str) -> None:
        """Forget an intent and its attempts when nothing of it can have reached DingTalk
        (stopped while waiting for a token or a back-off), so re-execution sends it. A piece
        of a stored answer stays owed (storage/pieces.py): only its try, which provably sent
        nothing, goes."""
        intent = self.intent(intent_id)
        if intent is None or not self.pieces.is_piece(intent):
            self._forget_intent(intent_id)
            return
        with self._tx(intent=intent_id) as conn:
            if conn.execute("SELECT 1 FROM receipts WHERE intent_id = ?", (intent_id,)).fetchone():
                return
            conn.execute("DELETE FROM attempts WHERE intent_id = ?", (intent_id,))

    def _forget_intent(self, intent_id: str) -> None:
        """``forget_unsent`` for an intent that is no piece of a stored answer."""
        with self._tx(intent=intent_id) as conn:
            if conn.execute("SELECT 1 FROM receipts WHERE intent_id = ?", (intent_id,)).fetchone():
                return  # it already has a final word; that stands
            if conn.execute("SELECT 1 FROM cards WHERE intent_id = ?", (intent_id,)).fetchone():
                # A card's intent (its markdown fallback was stopped before it left): only
                # the unsent try goes, and the card keeps its outTrackId — unless no call of
                # it can have reached DingTalk (every create refused or throttled): then the
                # card goes with its intent, and the next execution answers afresh.
                conn.execute(
                    "DELETE FROM attempts WHERE intent_id = ? AND outcome = 'started'", (intent_id,)
                )
                arrived = conn.execute(
                    "SELECT 1 FROM attempts WHERE intent_id = ? AND outcome != 'failed'",
                    (intent_id,),
                ).fetchone()
                if arrived:
                    return
                conn.execute("DELETE FROM cards WHERE intent_id = ?", (intent_id,))
            conn.execute("DELETE FROM attempts WHERE intent_id = ?", (intent_id,))
            conn.execute("DELETE FROM budget_ledger WHERE intent_id = ?", (intent_id,))
            conn.execute("DELETE FROM intents WHERE intent_id = ?", (intent_id,))

    def close_interrupted(self, attempt: Attempt, receipt: Receipt) -> None:
        with self._tx(run=receipt.run_id) as conn:
            update_attempt(conn, attempt)
            insert_receipt(conn, receipt)

    # ------------------------------------------------------------------ reading back

    def receipts(self, event_id: str | None = None) -> list[Receipt]:
        return [Receipt.model_validate_json(j) for j in self._json_of("receipt", event_id)]

    def intents(self, event_id: str | None = None) -> list[ActionIntent]:
        return [ActionIntent.model_validate_json(j) for j in self._json_of("intent", event_id)]

    def _json_of(self, record: str, event_id: str | None) -> list[str]:
        """The stored JSON of every ``record`` (receipt, intent), or one event's, in order."""
        sql = f"SELECT {record}_json FROM {record}s"
        where, params = (" WHERE event_id = ?", (event_id,)) if event_id is not None else ("", ())
        rows = self.db.conn.execute(f"{sql}{where} ORDER BY rowid", params).fetchall()
        return [row[0] for row in rows]

    def attempts(self, intent_id: str) -> list[Attempt]:
        rows = self.db.conn.execute(
            "SELECT attempt_json FROM attempts WHERE intent_id = ? ORDER BY rowid", (intent_id,)
        ).fetchall()
        return [Attempt.model_validate_json(row[0]) for row in rows]
