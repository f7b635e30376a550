"""The pieces of one answer (its chunks and attachments), stored together before the first
goes, and what of them is still owed after a crash.

A long reply is several intents in one slot (``…:terminal``, ``…:terminal#2``, …; its
pictures and files follow its words in the same slot). All of them, and the bytes of the
attachments, are written in one transaction before any piece is sent; each piece then gets
its own attempt and receipt. A piece with neither, in an answer some piece of which has
started, is owed: the recovery pass sends it (``agent/run/pieces.py``). An answer none of
whose pieces started is provably unsent and is dropped whole, as before.
"""

from __future__ import annotations

import base64

from agent.contracts import ActionIntent, Attempt
from storage.base import Family
from storage.rows import insert_attempt, insert_intent


def answer_of(intent_key: str) -> str:
    """The slot an answer's pieces share: ``e1:terminal#3`` → ``e1:terminal``."""
    return intent_key.split("#", 1)[0]


class PieceRecords(Family):
    def is_piece(self, intent: ActionIntent) -> bool:
        """Is ``intent`` one of several pieces of one answer (its slot holds others)?"""
        slot = answer_of(intent.idempotency_key)
        row = self.db.conn.execute(
            "SELECT COUNT(*) FROM intents WHERE event_id = ?"
            " AND (idempotency_key = ? OR idempotency_key LIKE ?)",
            (intent.event_id, slot, f"{slot}#%"),
        ).fetchone()
        return int(row[0]) > 1

    def add_pieces(self, intents: list[ActionIntent], payloads: dict[str, bytes]) -> bool:
        """Store every piece of an answer (``payloads``: an attachment's bytes by its
        intent id), together, before any I/O. False when its first piece's key is already
        held (another execution's answer): nothing is written then."""
        with self._tx(run=intents[0].run_id) as conn:
            for index, intent in enumerate(intents):
                if not insert_intent(conn, intent):
                    if index == 0:
                        return False
                    continue  # a piece stored by an execution that crashed: it stands
                data = payloads.get(intent.intent_id)
                if data is not None:
                    conn.execute(
                        "INSERT INTO piece_bytes (intent_id, event_id, data, created_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        (
                            intent.intent_id,
                            intent.event_id,
                            base64.b64encode(data).decode("ascii"),
                            intent.created_at,
                        ),
                    )
        return True

    def start_piece(self, attempt: Attempt) -> bool:
        """A stored piece's first attempt, before its I/O; False when it already has an
        attempt or a receipt (another execution sent it, or tried)."""
        with self._tx(intent=attempt.intent_id) as conn:
            sent = conn.execute(
                "SELECT 1 FROM attempts WHERE intent_id = ?"
                " UNION ALL SELECT 1 FROM receipts WHERE intent_id = ?",
                (attempt.intent_id, attempt.intent_id),
            ).fetchone()
            if sent is not None:
                return False
            insert_attempt(conn, attempt)
        return True

    def keep_piece_bytes(self, intent: ActionIntent, data: bytes) -> None:
        """Bytes a piece needs if a crash cuts its answer, kept beside it (a long one-frame
        card answer's whole text, beside its first card, until its last card opened)."""
        with self._tx(intent=intent.intent_id) as conn:
            conn.execute(
                "INSERT INTO piece_bytes (intent_id, event_id, data, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    intent.intent_id,
                    intent.event_id,
                    base64.b64encode(data).decode("ascii"),
                    intent.created_at,
                ),
            )

    def forget_bytes_of(self, intent_id: str) -> None:
        with self._tx(intent=intent_id) as conn:
            conn.execute("DELETE FROM piece_bytes WHERE intent_id = ?", (intent_id,))

    def piece_bytes(self, intent_id: str) -> bytes | None:
        row = self.db.conn.execute(
            "SELECT data FROM piece_bytes WHERE intent_id = ?", (intent_id,)
        ).fetchone()
        return base64.b64decode(row[0]) if row is not None else None

    def forget_piece_bytes(self, event_id: str) -> None:
        """An answer whose pieces all have receipts needs its bytes no more."""
        with self._tx() as conn:
            conn.execute("DELETE FROM piece_bytes WHERE event_id = ?", (event_id,))

    def prune_piece_bytes(self, before: float) -> int:
        """Bytes kept longer than the retention (their answer long settled or abandoned)."""
        with self._tx() as conn:
            cursor = conn.execute("DELETE FROM piece_bytes WHERE created_at < ?", (before,))
        return cursor.rowcount

    def owed_pieces(self, event_id: str) -> list[ActionIntent]:
        """Pieces with no attempt and no receipt, of answers that started going, in order."""
        return [intent for intent, started in self._pieces(event_id) if not started]

    def _pieces(self, event_id: str | None) -> list[tuple[ActionIntent, bool]]:
        """Every intent of answers some piece of which started (attempted or receipted),
        with whether it did itself."""
        only = " WHERE i.event_id = ?" if event_id is not None else ""
        rows = self.db.conn.execute(
            "SELECT i.intent_json, EXISTS (SELECT 1 FROM attempts a WHERE a.intent_id ="
            " i.intent_id) OR EXISTS (SELECT 1 FROM receipts r WHERE r.intent_id ="
            f" i.intent_id) FROM intents i{only} ORDER BY i.created_at, i.rowid",
            (event_id,) if event_id is not None else (),
        ).fetchall()
        answers: dict[str, list[tuple[ActionIntent, bool]]] = {}
        for intent_json, started in rows:
            intent = ActionIntent.model_validate_json(intent_json)
            answers.setdefault(answer_of(intent.idempotency_key), []).append(
                (intent, bool(started))
            )
        pieces: list[tuple[ActionIntent, bool]] = []
        for members in answers.values():
            if len(members) > 1 and any(started for _, started in members):
                pieces += sorted(members, key=lambda m: m[0].chunk)
        return pieces

    def owed_piece_ids(self, event_id: str | None = None) -> set[str]:
        """The ids of every owed piece (all events, or one's): kept by the start-up drop."""
        return {intent.intent_id for intent, started in self._pieces(event_id) if not started}
