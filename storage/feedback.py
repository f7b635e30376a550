"""👍 / 👎 on answers: one rating per person and answer, kept with the run it rates.

A press arrives as a card callback, decided on the connector's thread before its ack, so
``rate`` is one short transaction: the click kept by its frame id in ``approval_clicks``
(a redelivered callback finds it there and changes nothing), and the person's rating of
that answer written over any earlier one of theirs (the latest press wins; an older press
handled late never overwrites a newer one). The reads are for ``dta trace``, the console,
``/metrics`` and ``dta feedback``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.base import Family

UP, DOWN = "up", "down"


@dataclass(frozen=True)
class Press:
    """One person's press of a feedback button on an answer's card."""

    event_id: str  # the message the answer answered
    user_id: str
    rating: str  # up | down
    frame_id: str
    at: float
    run_id: str | None = None
    reason: str | None = None
    out_track_id: str | None = None
    conversation_id: str | None = None


@dataclass(frozen=True)
class Rated:
    """A stored rating, with what the console groups it by (from its run)."""

    event_id: str
    user_id: str
    rating: str
    reason: str | None
    conversation_id: str | None
    at: float
    run_id: str | None = None
    run_json: str | None = None  # the rated run (provider, skills), when it is still kept


_COLUMNS = "f.event_id, f.user_id, f.rating, f.reason, f.conversation_id, f.at, f.run_id"


class FeedbackRecords(Family):
    def rate(self, press: Press, outcome: str = "feedback") -> bool:
        """Keep the press; False when its frame was seen before (a redelivery: nothing
        changes). The person's earlier rating of the same answer is replaced."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO approval_clicks (frame_id, approval_id, user_id, action, outcome,"
                " at) VALUES (?, NULL, ?, ?, ?, ?) ON CONFLICT (frame_id) DO NOTHING",
                (press.frame_id, press.user_id, press.rating, outcome, press.at),
            )
            if not cursor.rowcount:
                return False
            conn.execute(
                "INSERT INTO feedback (event_id, user_id, run_id, rating, reason, out_track_id,"
                " conversation_id, frame_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (event_id, user_id) DO UPDATE SET rating = excluded.rating,"
                " reason = excluded.reason, out_track_id = excluded.out_track_id,"
                " frame_id = excluded.frame_id, at = excluded.at"
                " WHERE feedback.at <= excluded.at",
                (
                    press.event_id,
                    press.user_id,
                    press.run_id,
                    press.rating,
                    press.reason,
                    press.out_track_id,
                    press.conversation_id,
                    press.frame_id,
                    press.at,
                ),
            )
        return True

    def of_event(self, event_id: str) -> list[Rated]:
        """The ratings of one message's answer, in the order they were last pressed."""
        return self._rated(
            f"SELECT {_COLUMNS}, NULL AS run_json FROM feedback f WHERE f.event_id = ?"
            " ORDER BY f.at, f.user_id",
            (event_id,),
        )

    def since(self, since: float | None = None, limit: int = 10000) -> list[Rated]:
        """Every rating pressed since ``since`` (all when None), oldest first, each with
        its run's record when the store still keeps it."""
        return self._rated(
            f"SELECT {_COLUMNS}, r.run_json FROM feedback f"
            " LEFT JOIN runs r ON r.event_id = f.event_id"
            " WHERE f.at >= ? ORDER BY f.at, f.event_id, f.user_id LIMIT ?",
            (since if since is not None else 0.0, limit),
        )

    def event_named(self, key: str) -> str | None:
        """The message ``key`` names: a stored msgId, or the id of a run (its message)."""
        return self._scalar(
            "SELECT event_id FROM events WHERE event_id = ? UNION"
            " SELECT event_id FROM runs WHERE run_id = ?",
            (key, key),
        )

    def counts(self) -> list[tuple[str, int]]:
        """(rating, how many) over every stored rating: the metrics' source."""
        rows = self.db.conn.execute(
            "SELECT rating, COUNT(*) FROM feedback GROUP BY rating ORDER BY rating"
        ).fetchall()
        return [(str(row[0]), int(row[1])) for row in rows]

    def _rated(self, sql: str, params: tuple[Any, ...]) -> list[Rated]:
        return [
            Rated(
                event_id=row["event_id"],
                user_id=row["user_id"],
                rating=row["rating"],
                reason=row["reason"],
                conversation_id=row["conversation_id"],
                at=float(row["at"]),
                run_id=row["run_id"],
                run_json=row["run_json"],
            )
            for row in self._dicts(sql, params)
        ]
