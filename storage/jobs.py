"""Recurring jobs and what became of each of their slots (migration 16).

A job's row holds its schedule, its owner, where it answers and ``next_due_at``, the first
slot not yet handled: the heartbeat reads the active jobs due by it and moves it on
(``advance``, compare-and-set on the revision, so two replicas move it once). Each slot
handled is a ``job_runs`` row, written once (its key is the job and the slot): dispatched
with its event, or skipped with a reason. The digest of the facts a slot's run found is
kept on its row; the last *delivered* one (its run has a delivered reply) is what the next
run compares with for ``nothing_new``.
"""

from __future__ import annotations

from agent.contracts import Job, JobRun, JobStatus, Origin
from storage.base import Family

_JOB_COLUMNS = (
    "job_id, owner_id, conversation_id, schedule, instruction, status, reason, source,"
    " origin_json, created_by, created_at, next_due_at, revision, updated_at"
)


def _job(row: tuple) -> Job:
    # owner_id and conversation_id are the origin's (kept as columns to be queried)
    (job_id, _, _, schedule, instruction, status, reason, source, origin,
     created_by, created_at, next_due_at, revision, updated_at) = row  # fmt: skip
    return Job.model_validate(
        {
            "job_id": job_id,
            "schedule": schedule,
            "instruction": instruction,
            "status": status,
            "reason": reason,
            "source": source,
            "origin": Origin.model_validate_json(origin),
            "created_by": created_by,
            "created_at": created_at,
            "next_due_at": next_due_at,
            "revision": revision,
            "updated_at": updated_at,
        }
    )


class JobRecords(Family):
    def add(self, job: Job) -> bool:
        """Store a new job; False when its id is taken (the same words run again, or the
        same ``[[jobs]]`` entry at another start)."""
        with self._tx() as conn:
            cursor = conn.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                (
                    job.job_id,
                    job.owner_id,
                    job.conversation_id,
                    job.schedule,
                    job.instruction,
                    job.status.value,
                    job.reason,
                    job.source,
                    job.origin.to_json(),
                    job.created_by,
                    job.created_at,
                    job.next_due_at,
                    job.revision,
                    job.updated_at,
                ),
            )
            return cursor.rowcount == 1

    def get(self, job_id: str) -> Job | None:
        row = self.db.conn.execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)
        ).fetchone()
        return _job(row) if row else None

    def due(self, now: float, limit: int = 500) -> list[Job]:
        """Active jobs whose next slot has come, the longest due first."""
        rows = self.db.conn.execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status = 'active' AND next_due_at <= ?"
            " ORDER BY next_due_at LIMIT ?",
            (now, limit),
        ).fetchall()
        return [_job(row) for row in rows]

    def of_owner(self, owner_id: str, conversation_id: str | None = None) -> list[Job]:
        """The owner's jobs not cancelled (in one conversation, when given), oldest first."""
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs WHERE owner_id = ? AND status != 'cancelled'"
        params: tuple = (owner_id,)
        if conversation_id is not None:
            sql, params = sql + " AND conversation_id = ?", (owner_id, conversation_id)
        rows = self.db.conn.execute(sql + " ORDER BY created_at, job_id", params).fetchall()
        return [_job(row) for row in rows]

    def all(self, include_cancelled: bool = True) -> list[Job]:
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs"
        if not include_cancelled:
            sql += " WHERE status != 'cancelled'"
        rows = self.db.conn.execute(sql + " ORDER BY created_at, job_id").fetchall()
        return [_job(row) for row in rows]

    def move(self, job: Job, **changes: object) -> Job | None:
        """Compare-and-set: the job as changed, or None when someone moved it first."""
        moved = job.model_copy(update={**changes, "revision": job.revision + 1})
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET status = ?, reason = ?, next_due_at = ?, revision = ?,"
                " updated_at = ?, schedule = ?, instruction = ?, owner_id = ?,"
                " conversation_id = ?, origin_json = ? WHERE job_id = ? AND revision = ?",
                (
                    moved.status.value,
                    moved.reason,
                    moved.next_due_at,
                    moved.revision,
                    moved.updated_at,
                    moved.schedule,
                    moved.instruction,
                    moved.owner_id,
                    moved.conversation_id,
                    moved.origin.to_json(),
                    job.job_id,
                    job.revision,
                ),
            )
        return moved if cursor.rowcount == 1 else None

    # ------------------------------------------------------------------ slots

    def add_run(self, run: JobRun) -> bool:
        """Record what became of a slot, once; False when it was recorded before."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO job_runs (job_id, due_at, event_id, outcome, reason, digest, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, due_at) DO NOTHING",
                (run.job_id, run.due_at, run.event_id, run.outcome, run.reason, run.digest,
                 run.at),
            )  # fmt: skip
            return cursor.rowcount == 1

    def set_digest(self, job_id: str, due_at: float, digest: str) -> None:
        """The facts the slot's run found, kept before its answer goes."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE job_runs SET digest = ? WHERE job_id = ? AND due_at = ?",
                (digest, job_id, due_at),
            )

    def runs(self, job_id: str, limit: int = 20) -> list[JobRun]:
        """The job's latest slots, newest first."""
        rows = self.db.conn.execute(
            "SELECT job_id, due_at, event_id, outcome, reason, digest, at FROM job_runs"
            " WHERE job_id = ? ORDER BY due_at DESC LIMIT ?",
            (job_id, limit),
        ).fetchall()
        keys = ("job_id", "due_at", "event_id", "outcome", "reason", "digest", "at")
        return [JobRun.model_validate(dict(zip(keys, row, strict=True))) for row in rows]

    def last_delivered_digest(self, job_id: str, before: float) -> str | None:
        """The digest of the job's latest slot before ``before`` whose reply reached the
        person or may have (``uncertain``: DingTalk may hold it; saying it again could say
        it twice): what a new run's facts are compared with."""
        row = self.db.conn.execute(
            "SELECT jr.digest FROM job_runs jr WHERE jr.job_id = ? AND jr.due_at < ?"
            " AND jr.digest IS NOT NULL AND EXISTS (SELECT 1 FROM receipts r"
            " WHERE r.event_id = jr.event_id AND r.kind = 'reply'"
            " AND r.status IN ('accepted', 'verified', 'uncertain'))"
            " ORDER BY jr.due_at DESC LIMIT 1",
            (job_id, before),
        ).fetchone()
        return row[0] if row else None

    def count_by_status(self) -> dict[JobStatus, int]:
        rows = self.db.conn.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status")
        return {JobStatus(status): count for status, count in rows.fetchall()}

    def slot_counts(self) -> list[tuple[str, str | None, int]]:
        """(outcome, reason, count) over every slot handled: the metrics' source."""
        return self.db.conn.execute(
            "SELECT outcome, reason, COUNT(*) FROM job_runs GROUP BY outcome, reason"
        ).fetchall()
