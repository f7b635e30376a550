"""The store is the queue: which events still need a run, and who is working on them.

An acked event is durable work until its run has ended. Each run is owned under a lease:
the owner renews it while it works, and anyone may take over a run whose lease has
expired (its owner stopped: killed, or cut off from the store). On SQLite there is one
daemon per store, so "anyone" is the next start of the same daemon, or its own recovery
loop picking up work a failing store interrupted.

    lease = Lease(owner="host:pid:abcd", until=now + 60, now=now)
    run = store.work.open_run(fresh_run, decision, lease)     # None: another live owner has it
    store.work.renew_leases(owner, event_ids, now + 60)
    for item in store.work.unfinished_work(after_rowid, limit=100):
        ...
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.contracts import ResponseDecision, Run, RunState
from storage.base import Family
from storage.rows import insert_decision


@dataclass(frozen=True)
class Lease:
    """Who claims a run, until when, judged at ``now``."""

    owner: str
    until: float
    now: float


@dataclass(frozen=True)
class PendingWork:
    """A stored event without a finished run, and the lease on its run (if it has one)."""

    rowid: int
    event_id: str
    owner: str | None
    lease_until: float

    def free_for(self, owner: str, now: float) -> bool:
        """May ``owner`` work on it? Its own work, a run not yet opened, or an expired lease."""
        return self.owner is None or self.owner == owner or self.lease_until <= now


class WorkRecords(Family):
    def open_run(
        self, run: Run, decision: ResponseDecision | None = None, lease: Lease | None = None
    ) -> Run | None:
        """Create the event's run (with its decision) under ``lease``, or claim the run that
        already exists. None when another owner's lease on it has not expired."""
        owner, until = (lease.owner, lease.until) if lease else (None, 0.0)
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (run_id, event_id, thread_key, generation, state,"
                " provider, created_at, updated_at, run_json, owner, lease_until)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    run.run_id,
                    run.event_id,
                    run.thread_key,
                    run.generation,
                    run.state.value,
                    run.provider,
                    run.created_at,
                    run.updated_at,
                    run.to_json(),
                    owner,
                    until,
                ),
            )
            if cursor.rowcount == 1:
                if decision is not None:
                    insert_decision(conn, run.run_id, decision)
                return run
            row = conn.execute(
                "SELECT run_json, state, owner, lease_until FROM runs WHERE event_id = ?",
                (run.event_id,),
            ).fetchone()
            existing = Run.model_validate_json(row[0])
            if lease is None or row[1] != RunState.WORKING.value:
                return existing  # finished runs need no lease: they are only read
            if row[2] not in (None, lease.owner) and row[3] > lease.now:
                return None
            conn.execute(
                "UPDATE runs SET owner = ?, lease_until = ? WHERE run_id = ?",
                (lease.owner, lease.until, existing.run_id),
            )
        return existing

    def renew_leases(self, owner: str, event_ids: list[str], until: float) -> int:
        """Extend the leases ``owner`` holds on the runs of the events it is working on (a
        few dozen per transaction: there may be a thousand)."""
        return self._update_where_in(
            "UPDATE runs SET lease_until = ? WHERE owner = ? AND state = ?"
            " AND event_id IN ({marks})",
            (until, owner, RunState.WORKING.value),
            event_ids,
        )

    def claim_thread(
        self,
        thread_key: str,
        lease: Lease,
        event_id: str | None = None,
        earlier_since: float = 0.0,
    ) -> bool:
        """Take the thread (conversation + actor) for one run: with replicas, runs of a
        thread stay serial across processes, and in arrival order: with ``event_id``, not
        while an earlier message of the thread received after ``earlier_since`` has no
        finished run (whichever replica got it; the recovery pass picks it up first; one
        older than that cannot hold a person up for good). True when ``lease.owner`` holds
        it now."""
        with self._tx() as conn:
            if (
                event_id is not None
                and conn.execute(
                    "SELECT 1 FROM events mine JOIN events e ON e.conversation_id ="
                    " mine.conversation_id AND e.actor_id = mine.actor_id AND e.rowid < mine.rowid"
                    " LEFT JOIN runs r ON r.event_id = e.event_id WHERE mine.event_id = ?"
                    " AND e.received_at > ? AND (r.run_id IS NULL OR r.state = ?) LIMIT 1",
                    (event_id, earlier_since, RunState.WORKING.value),
                ).fetchone()
            ):
                return False  # an earlier message of this person goes first
            row = conn.execute(
                "INSERT INTO thread_leases (thread_key, owner, lease_until) VALUES (?, ?, ?)"
                " ON CONFLICT (thread_key) DO UPDATE SET owner = excluded.owner,"
                " lease_until = excluded.lease_until"
                " WHERE thread_leases.owner = excluded.owner OR thread_leases.lease_until <= ?"
                " RETURNING owner",
                (thread_key, lease.owner, lease.until, lease.now),
            ).fetchone()
        return row is not None

    def release_thread(self, thread_key: str, owner: str) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE thread_leases SET lease_until = 0 WHERE thread_key = ? AND owner = ?",
                (thread_key, owner),
            )

    def renew_threads(self, owner: str, thread_keys: list[str], until: float) -> int:
        return self._update_where_in(
            "UPDATE thread_leases SET lease_until = ? WHERE owner = ? AND thread_key IN ({marks})",
            (until, owner),
            thread_keys,
        )

    def expire_leases(self, except_owner: str) -> int:
        """Declare every other owner gone (a store only one daemon may open: its lock proves
        the previous holder is dead), so its unfinished runs are taken over now."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE runs SET lease_until = 0 WHERE state = ? AND (owner IS NULL OR owner != ?)"
                " AND lease_until > 0",
                (RunState.WORKING.value, except_owner),
            )
        return cursor.rowcount

    def unfinished_work(self, after_rowid: int = 0, limit: int = 1000) -> list[PendingWork]:
        """Stored events without a finished run, oldest first, from ``after_rowid`` on.

        Without the events themselves: under a burst most of this work is already in
        memory, and the caller reads (``get_event``) only what it queues."""
        rows = self.db.conn.execute(
            "SELECT e.rowid, e.event_id, r.owner, r.lease_until FROM events e"
            " LEFT JOIN runs r ON r.event_id = e.event_id"
            " WHERE e.rowid > ? AND (r.run_id IS NULL OR r.state = ?)"
            " ORDER BY e.rowid LIMIT ?",
            (after_rowid, RunState.WORKING.value, limit),
        ).fetchall()
        return [
            PendingWork(rowid, event_id, owner, lease or 0.0)
            for rowid, event_id, owner, lease in rows
        ]

    def runs_per_event(self) -> dict[str, int]:
        rows = self.db.conn.execute(
            "SELECT event_id, COUNT(*) FROM runs GROUP BY event_id"
        ).fetchall()
        return {event_id: count for event_id, count in rows}

    def runs_per_owner(self) -> dict[str, int]:
        """How many runs each owner (daemon process) holds or last held: who did the work."""
        rows = self.db.conn.execute(
            "SELECT owner, COUNT(*) FROM runs WHERE owner IS NOT NULL GROUP BY owner"
        ).fetchall()
        return {owner: count for owner, count in rows}

    def runs_held(self, owner_prefix: str) -> int:
        """Unfinished runs whose owner starts with ``owner_prefix`` (one process, by its
        ``host:pid:``): the work a replica holds at a moment."""
        return int(
            self._scalar(
                "SELECT COUNT(*) FROM runs WHERE state = ? AND owner LIKE ?",
                (RunState.WORKING.value, owner_prefix.replace("%", "") + "%"),
            )
        )

    def max_event_rowid(self) -> int:
        return int(self._scalar("SELECT MAX(rowid) FROM events") or 0)

    def oldest_unfinished_received_at(self) -> float | None:
        """When the oldest acked event still without a finished run arrived (a gauge)."""
        return self._scalar(
            "SELECT MIN(e.received_at) FROM events e LEFT JOIN runs r ON r.event_id = e.event_id"
            " WHERE r.run_id IS NULL OR r.state = ?",
            (RunState.WORKING.value,),
        )
