"""AI cards: each card's state beside its intent, attempts and receipt; the card call budget.

A card is stored with its intent before its create waits for a slot, and each card call's
attempt only once the call leaves (``save_card(start=…)``), so a crash at any point leaves a
card that recovery knows about — never one it does not, never a second create — and a create
that never left is forgotten with its intent (``forget_unsent_cards``), so the next execution
answers afresh. Every frame DingTalk takes is recorded, so a card cut off by a crash ends
with exactly what the person saw; a card that shows nothing yet is taken up by the run's next
execution (``take_up_card``). The receipt, the card's finished state, the intent's final
content and (when it is the run's last word) the ended run are written together.
"""

from __future__ import annotations

from typing import Any

from agent.contracts import (
    ActionIntent,
    Attempt,
    AttemptOutcome,
    Card,
    CardState,
    Receipt,
    Run,
    RunState,
)
from storage.base import Family
from storage.rows import (
    insert_attempt,
    insert_intent,
    insert_outbound,
    insert_receipt,
    update_attempt,
    update_run,
)

_OPEN = (CardState.CREATED.value, CardState.STREAMING.value)


def blank(card: Card) -> bool:
    """A card that shows nothing of an answer yet: no frame taken, no final text decided."""
    return card.frames == 0 and card.final is None and card.fallback is None


class CardRecords(Family):
    def open_card(self, intent: ActionIntent, attempt: Attempt | None, card: Card) -> bool:
        """Store the approved intent (claiming its key and its budget row), the card and
        (when the create goes at once) its attempt, together; False when another execution
        holds the key."""
        with self._tx(run=intent.run_id) as conn:
            if not insert_intent(conn, intent):
                return False
            if attempt is not None:
                insert_attempt(conn, attempt)
            conn.execute(
                "INSERT INTO cards (out_track_id, intent_id, event_id, state, updated_at,"
                " card_json) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    card.out_track_id,
                    card.intent_id,
                    card.event_id,
                    card.state.value,
                    card.updated_at,
                    card.to_json(),
                ),
            )
        return True

    def save_card(
        self, card: Card, done: Attempt | None = None, start: Attempt | None = None
    ) -> None:
        """The card's new state (a frame taken, the create answered); an attempt closed
        and the next one started before its I/O, in the same breath."""
        with self._tx(run=card.run_id) as conn:
            self._update_card(conn, card)
            if done is not None:
                update_attempt(conn, done)
            if start is not None:
                insert_attempt(conn, start)

    def finish_card(
        self,
        card: Card,
        intent: ActionIntent,
        receipt: Receipt,
        attempt: Attempt | None = None,
        outbound: dict[str, Any] | None = None,
        run: Run | None = None,
    ) -> None:
        """The card's last word: its state, the intent's final content (recorded here, once),
        the receipt, the attempt it closes, what was said, and the ended run."""
        with self._tx(run=receipt.run_id) as conn:
            self._update_card(conn, card)
            conn.execute(
                "UPDATE intents SET intent_json = ? WHERE intent_id = ?",
                (intent.to_json(), intent.intent_id),
            )
            if attempt is not None:
                update_attempt(conn, attempt)
            insert_receipt(conn, receipt)
            if outbound is not None:
                insert_outbound(conn, outbound)
            if run is not None:
                update_run(conn, run)

    def fall_back(self, card: Card, intent: ActionIntent, attempt: Attempt) -> None:
        """The card will not carry the answer: its state, the intent's content as the
        markdown message that replaces it, and that message's first attempt (before I/O)."""
        with self._tx(run=card.run_id) as conn:
            self._update_card(conn, card)
            conn.execute(
                "UPDATE intents SET intent_json = ? WHERE intent_id = ?",
                (intent.to_json(), intent.intent_id),
            )
            insert_attempt(conn, attempt)

    def forget_unsent_cards(self, event_id: str, run_id: str) -> int:
        """Forget the event's answer cards that provably never reached DingTalk — no receipt,
        and every call they made answered "not taken" (or none left: the create waited for
        its slot, a fallback for its pool place) — with their intents, attempts and budget
        rows, so the run's next execution answers afresh. Only an answer's first card: a
        later one's answer has begun on the card before it. Fenced on the run (``run_id``).
        How many went."""
        unsent = (
            "SELECT c.intent_id FROM cards c JOIN intents i ON i.intent_id = c.intent_id"
            " WHERE c.event_id = ? AND i.idempotency_key NOT LIKE '%#%'"
            " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id = c.intent_id)"
            " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.intent_id = c.intent_id"
            " AND a.outcome != ?)"
        )
        params = (event_id, AttemptOutcome.FAILED.value)
        with self._tx(run=run_id) as conn:
            ids = [row[0] for row in conn.execute(unsent, params).fetchall()]
            for table in ("attempts", "cards", "budget_ledger", "intents"):
                for intent_id in ids:
                    conn.execute(f"DELETE FROM {table} WHERE intent_id = ?", (intent_id,))
        return len(ids)

    def take_up_card(self, intent: ActionIntent) -> tuple[Card, ActionIntent] | None:
        """The run's own card in ``intent``'s slot that an earlier execution created and
        left showing nothing (no frame taken, no final text, no receipt): it carries this
        execution's answer. The stored intent gets the new one's fields under its own id
        (its card, attempts and budget row name it). None when there is no such card."""
        with self._tx(run=intent.run_id) as conn:
            row = conn.execute(
                "SELECT i.intent_id, c.card_json FROM intents i"
                " JOIN cards c ON c.intent_id = i.intent_id"
                " WHERE i.idempotency_key = ? AND i.run_id = ? AND c.state IN (?, ?)"
                " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id = i.intent_id)",
                (intent.idempotency_key, intent.run_id, *_OPEN),
            ).fetchone()
            card = Card.model_validate_json(row[1]) if row else None
            if card is None or not blank(card):
                return None
            taken = intent.model_copy(update={"intent_id": row[0]})
            conn.execute(
                "UPDATE intents SET intent_json = ? WHERE intent_id = ?",
                (taken.to_json(), taken.intent_id),
            )
        return card, taken

    def card_to_take_up(self, key: str, run_id: str) -> bool:
        """Does ``take_up_card`` hold a card for this slot of this run (the gate's fact)?"""
        row = self.db.conn.execute(
            "SELECT c.card_json FROM intents i JOIN cards c ON c.intent_id = i.intent_id"
            " WHERE i.idempotency_key = ? AND i.run_id = ? AND c.state IN (?, ?)"
            " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id = i.intent_id)",
            (key, run_id, *_OPEN),
        ).fetchone()
        return row is not None and blank(Card.model_validate_json(row[0]))

    def card_answer_cut(self, event_id: str) -> bool:
        """Did a stop cut this event's card answer between two of its cards: its last card
        that opened ended with its part (``Card.continues``), and no next card opened?"""
        rows = self.db.conn.execute(
            "SELECT c.card_json, EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id ="
            " c.intent_id AND r.status IN ('accepted', 'verified')) FROM cards c"
            " WHERE c.event_id = ? ORDER BY c.rowid DESC LIMIT 1",
            (event_id,),
        ).fetchall()
        if not rows:
            return False
        card = Card.model_validate_json(rows[0][0])
        return card.continues and bool(rows[0][1])

    def card_for_intent(self, intent_id: str) -> Card | None:
        row = self.db.conn.execute(
            "SELECT card_json FROM cards WHERE intent_id = ?", (intent_id,)
        ).fetchone()
        return Card.model_validate_json(row[0]) if row else None

    def open_cards(self, event_id: str) -> list[Card]:
        """One event's cards that may still be spinning."""
        rows = self.db.conn.execute(
            "SELECT card_json FROM cards WHERE event_id = ? AND state IN (?, ?) ORDER BY rowid",
            (event_id, *_OPEN),
        ).fetchall()
        return [Card.model_validate_json(row[0]) for row in rows]

    def cards_to_close(self, before: float, limit: int = 100) -> list[Card]:
        """Open cards, untouched since ``before``, whose run has ended: nobody is streaming
        into them any more (a final frame that never got through, a run settled after a
        crash)."""
        rows = self.db.conn.execute(
            "SELECT c.card_json FROM cards c JOIN runs r ON r.event_id = c.event_id"
            " WHERE c.state IN (?, ?) AND c.updated_at < ? AND r.state != ?"
            " ORDER BY c.rowid LIMIT ?",
            (*_OPEN, before, RunState.WORKING.value, limit),
        ).fetchall()
        return [Card.model_validate_json(row[0]) for row in rows]

    def all(self) -> list[Card]:
        rows = self.db.conn.execute("SELECT card_json FROM cards ORDER BY rowid").fetchall()
        return [Card.model_validate_json(row[0]) for row in rows]

    def open_attempts(self, intent_id: str) -> list[Attempt]:
        """A card intent's attempts still ``started``: a stop cut them off."""
        rows = self.db.conn.execute(
            "SELECT attempt_json FROM attempts WHERE intent_id = ? AND outcome = 'started'"
            " ORDER BY rowid",
            (intent_id,),
        ).fetchall()
        return [Attempt.model_validate_json(row[0]) for row in rows]

    def has_receipt(self, intent_id: str) -> bool:
        row = self.db.conn.execute(
            "SELECT 1 FROM receipts WHERE intent_id = ? LIMIT 1", (intent_id,)
        ).fetchone()
        return row is not None

    def card_by_track(self, out_track_id: str) -> Card | None:
        rows = self._dicts("SELECT card_json FROM cards WHERE out_track_id = ?", (out_track_id,))
        return Card.model_validate_json(rows[0]["card_json"]) if rows else None

    def request_card_stop(self, out_track_id: str, by: str, at: float) -> bool:
        """The asker pressed stop on a streaming card; False when it was pressed before."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO card_stops (out_track_id, stopped_by, at) VALUES (?, ?, ?)"
                " ON CONFLICT (out_track_id) DO NOTHING",
                (out_track_id, by, at),
            )
            return bool(cursor.rowcount)

    def card_stop_requested(self, *out_track_ids: str) -> bool:
        """Was stop pressed on any of these cards (the cards of one answer)?"""
        if not out_track_ids:
            return False
        marks = ", ".join("?" for _ in out_track_ids)
        sql = f"SELECT 1 FROM card_stops WHERE out_track_id IN ({marks}) LIMIT 1"
        return self._scalar(sql, out_track_ids) is not None

    def take_card_slot(self, second: int, limit: int) -> bool:
        """Take one card call in ``second`` if fewer than ``limit`` were taken in it, by any
        process on this store (the app-wide budget replicas share)."""
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO card_slots (slot_second, used) VALUES (?, 1)"
                " ON CONFLICT (slot_second) DO UPDATE SET used = card_slots.used + 1"
                " WHERE card_slots.used < ? RETURNING used",
                (second, limit),
            ).fetchone()
            conn.execute("DELETE FROM card_slots WHERE slot_second < ?", (second - 60,))
        return row is not None

    @staticmethod
    def _update_card(conn: Any, card: Card) -> None:
        conn.execute(
            "UPDATE cards SET state = ?, updated_at = ?, card_json = ? WHERE out_track_id = ?",
            (card.state.value, card.updated_at, card.to_json(), card.out_track_id),
        )
