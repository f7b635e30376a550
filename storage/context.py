"""What runs read and keep between messages: lookups for the invocation, tasks, memory."""

from __future__ import annotations

import json
import time
from typing import Any

from agent.contracts import (
    Event,
    MemoryCandidate,
    TaskCheckpoint,
)
from storage.base import Family, write_chunks


class ContextRecords(Family):
    # ------------------------------------------------------------------ invocation lookups

    def events_between(
        self,
        conversation_id: str,
        actor_id: str,
        since: float,
        before: float,
        excluding: str = "",
    ) -> list[Event]:
        """The actor's messages in a conversation created in [since, before), oldest first
        (but the event ``excluding`` names: the one asking, never parsed for nothing)."""
        rows = self.db.conn.execute(
            "SELECT event_json FROM events WHERE conversation_id = ? AND actor_id = ?"
            " AND created_at >= ? AND created_at < ? AND event_id != ?"
            " ORDER BY created_at, rowid",
            (conversation_id, actor_id, since, before, excluding),
        ).fetchall()
        return [Event.model_validate_json(row[0]) for row in rows]

    def recent_exchange(
        self,
        conversation_id: str,
        actor_id: str,
        since: float,
        before: float,
        exclude: str,
        limit: int,
    ) -> list[tuple[str, str, float, str | None]]:
        """The actor's last ``limit`` messages in the conversation created in
        [since, before) other than ``exclude``, oldest first: (msgId, text, created_at, the
        text the robot last delivered in answer, or None). One statement."""
        rows = self.db.conn.execute(
            "SELECT e.event_id, e.event_json, e.created_at,"
            " (SELECT o.text FROM intents i JOIN outbound o ON o.intent_id = i.intent_id"
            "  WHERE i.event_id = e.event_id AND i.kind IN ('reply', 'ask')"
            "  ORDER BY o.sent_at DESC LIMIT 1)"
            " FROM events e WHERE e.conversation_id = ? AND e.actor_id = ?"
            " AND e.created_at >= ? AND e.created_at < ? AND e.event_id != ?"
            " ORDER BY e.created_at DESC, e.rowid DESC LIMIT ?",
            (conversation_id, actor_id, since, before, exclude, limit),
        ).fetchall()
        turns = [
            (msg, Event.model_validate_json(raw).text, float(at), reply)
            for msg, raw, at, reply in rows
        ]
        return list(reversed(turns))

    def outbound(self, *, process_query_key: str | None = None) -> dict[str, Any] | None:
        """One of our own sent messages, found by DingTalk's processQueryKey."""
        if not process_query_key:
            return None
        rows = self._dicts(
            "SELECT o.intent_id, o.process_query_key, o.conversation_id, o.channel, o.text,"
            " o.sent_at, i.event_id FROM outbound o JOIN intents i"
            " ON i.intent_id = o.intent_id WHERE o.process_query_key = ?",
            (process_query_key,),
        )
        return rows[0] if rows else None

    def cached_identity(self, user_id: str, fresh_after: float) -> dict[str, Any] | None:
        row = self.db.conn.execute(
            "SELECT identity_json FROM identity_cache WHERE user_id = ? AND fetched_at > ?",
            (user_id, fresh_after),
        ).fetchone()
        return json.loads(row[0]) if row else None

    def cached_identities(
        self, fresh_after: float, limit: int
    ) -> dict[str, tuple[dict[str, Any], float]]:
        """The cache's fresh answers (user id → (fields, fetched at)), at most ``limit``,
        the most recently fetched kept, in the order they were fetched."""
        rows = self.db.conn.execute(
            "SELECT user_id, identity_json, fetched_at FROM identity_cache"
            " WHERE fetched_at > ? ORDER BY fetched_at DESC LIMIT ?",
            (fresh_after, limit),
        ).fetchall()
        return {user: (json.loads(fields), at) for user, fields, at in reversed(rows)}

    def cache_identities(self, found: dict[str, tuple[dict[str, Any], float]]) -> None:
        """Remember directory answers (user id → (fields, fetched at)), a few dozen per
        transaction (``WRITE_CHUNK``)."""
        rows = [
            (user_id, at, json.dumps(fields, ensure_ascii=False))
            for user_id, (fields, at) in found.items()
        ]
        for chunk in write_chunks(rows):
            with self._tx() as conn:
                for row in chunk:
                    conn.execute(
                        "INSERT INTO identity_cache (user_id, fetched_at, identity_json)"
                        " VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET"
                        " fetched_at = excluded.fetched_at,"
                        " identity_json = excluded.identity_json",
                        row,
                    )

    # ------------------------------------------------------------------ tasks

    def active_task(self, scope_id: str) -> TaskCheckpoint | None:
        row = self.db.conn.execute(
            "SELECT task_json FROM tasks WHERE scope_id = ? AND status IN ('working', 'waiting')"
            " ORDER BY updated_at DESC, rowid DESC LIMIT 1",
            (scope_id,),
        ).fetchone()
        return TaskCheckpoint.model_validate_json(row[0]) if row else None

    def save_task(self, task: TaskCheckpoint) -> bool:
        """Compare-and-set: ``task.revision`` must be one more than the stored revision
        (or 1 for a new task). False when someone else moved the task first."""
        with self._tx(run=task.updated_by_run) as conn:
            if task.revision == 1:
                cursor = conn.execute(
                    "INSERT INTO tasks (task_id, scope_id, status, revision, updated_at,"
                    " task_json, due_at, waiting_since, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (
                        task.task_id,
                        task.scope_id,
                        task.status.value,
                        task.revision,
                        task.updated_at,
                        task.to_json(),
                        task.due_at,
                        task.waiting_since,
                        task.created_at,
                    ),
                )
            else:
                cursor = conn.execute(
                    "UPDATE tasks SET status = ?, revision = ?, updated_at = ?, task_json = ?,"
                    " due_at = ?, waiting_since = ?, created_at = ?"
                    " WHERE task_id = ? AND revision = ?",
                    (
                        task.status.value,
                        task.revision,
                        task.updated_at,
                        task.to_json(),
                        task.due_at,
                        task.waiting_since,
                        task.created_at,
                        task.task_id,
                        task.revision - 1,
                    ),
                )
        return cursor.rowcount == 1

    def tasks(self) -> list[TaskCheckpoint]:
        rows = self.db.conn.execute("SELECT task_json FROM tasks ORDER BY rowid").fetchall()
        return [TaskCheckpoint.model_validate_json(row[0]) for row in rows]

    # ------------------------------------------------------------------ memory candidates

    def propose_memory(self, candidates: list[MemoryCandidate]) -> int:
        """Store new proposals; one already known (same scope and content) is left as is."""
        added = 0
        with self._tx() as conn:
            for c in candidates:
                cursor = conn.execute(
                    "INSERT INTO memory_candidates (candidate_id, scope_id, status,"
                    " revision, created_at, candidate_json) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    (
                        c.candidate_id,
                        c.scope_id,
                        c.status.value,
                        c.revision,
                        c.created_at,
                        c.to_json(),
                    ),
                )
                added += cursor.rowcount
        return added

    def memory_candidates(self, status: str | None = None) -> list[MemoryCandidate]:
        if status is None:
            rows = self.db.conn.execute(
                "SELECT candidate_json FROM memory_candidates ORDER BY created_at, rowid"
            )
        else:
            rows = self.db.conn.execute(
                "SELECT candidate_json FROM memory_candidates WHERE status = ?"
                " ORDER BY created_at, rowid",
                (status,),
            )
        return [MemoryCandidate.model_validate_json(row[0]) for row in rows.fetchall()]

    def take_lease(self, key: str, owner: str, seconds: float) -> bool:
        """Hold ``key`` for ``seconds`` unless another owner holds it unexpired (the thread
        leases' table; ``release_thread`` gives it back)."""
        now = time.time()
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO thread_leases (thread_key, owner, lease_until) VALUES (?, ?, ?)"
                " ON CONFLICT (thread_key) DO UPDATE SET owner = excluded.owner,"
                " lease_until = excluded.lease_until"
                " WHERE thread_leases.owner = excluded.owner OR thread_leases.lease_until <= ?"
                " RETURNING owner",
                (key, owner, now + seconds, now),
            ).fetchone()
        return row is not None

    def memory_in_scope(self, scope_id: str) -> list[MemoryCandidate]:
        """Every candidate of one conversation (any status), oldest first."""
        rows = self.db.conn.execute(
            "SELECT candidate_json FROM memory_candidates WHERE scope_id = ?"
            " ORDER BY created_at, rowid",
            (scope_id,),
        )
        return [MemoryCandidate.model_validate_json(row[0]) for row in rows.fetchall()]

    def save_memory(self, candidate: MemoryCandidate) -> bool:
        """Compare-and-set on the revision, like tasks: False when the candidate moved."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE memory_candidates SET status = ?, revision = ?, candidate_json = ?"
                " WHERE candidate_id = ? AND revision = ?",
                (
                    candidate.status.value,
                    candidate.revision,
                    candidate.to_json(),
                    candidate.candidate_id,
                    candidate.revision - 1,
                ),
            )
        return cursor.rowcount == 1
