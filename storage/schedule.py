"""What the heartbeat reads: tasks that may be due, reminders waiting, events already made.

The heartbeat (``agent/proactive/heartbeat.py``) decides what is due from the tasks themselves
(``agent/proactive/schedule.py``); these lookups only narrow the tasks down to the ones
that could be, using the columns migration 7 added (``due_at``, ``waiting_since``,
``created_at``).
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.contracts import TaskCheckpoint
from storage.base import Family


class ScheduleRecords(Family):
    def due_tasks(
        self,
        now: float,
        waiting_before: float | None,
        created_before: float | None,
        limit: int = 500,
    ) -> list[TaskCheckpoint]:
        """Tasks that may have something due at ``now``: reminders whose time has come,
        tasks waiting since before ``waiting_before`` (follow-ups) and open tasks begun
        before ``created_before`` (expiry). ``None`` turns a condition off. Reminders come
        first, then the oldest: follow-ups held back by quiet hours never crowd a reminder
        out of the ``limit``."""
        rows = self.db.conn.execute(
            "SELECT task_json FROM tasks WHERE (status = 'scheduled' AND due_at <= ?)"
            " OR (status = 'waiting' AND waiting_since <= ?)"
            " OR (status IN ('working', 'waiting') AND created_at <= ?)"
            " ORDER BY CASE WHEN status = 'scheduled' THEN 0 ELSE 1 END, rowid LIMIT ?",
            (now, waiting_before, created_before, limit),
        ).fetchall()
        return [TaskCheckpoint.model_validate_json(row[0]) for row in rows]

    def get_task(self, task_id: str) -> TaskCheckpoint | None:
        row = self.db.conn.execute(
            "SELECT task_json FROM tasks WHERE task_id = ?", (task_id,)
        ).fetchone()
        return TaskCheckpoint.model_validate_json(row[0]) if row else None

    def scheduled_reminders(self, scope_id: str) -> list[TaskCheckpoint]:
        """The thread's reminders still waiting for their time, soonest first."""
        rows = self.db.conn.execute(
            "SELECT task_json FROM tasks WHERE scope_id = ? AND status = 'scheduled'"
            " ORDER BY due_at, rowid",
            (scope_id,),
        ).fetchall()
        return [TaskCheckpoint.model_validate_json(row[0]) for row in rows]

    def known_events(self, event_ids: Iterable[str]) -> set[str]:
        """Which of these event ids are already stored (made by an earlier beat, or by
        another replica)."""
        wanted = list(dict.fromkeys(event_ids))
        if not wanted:
            return set()
        marks = ", ".join("?" for _ in wanted)
        rows = self.db.conn.execute(
            f"SELECT event_id FROM events WHERE event_id IN ({marks})", tuple(wanted)
        ).fetchall()
        return {row[0] for row in rows}
