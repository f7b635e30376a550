"""A recurring job: what its owner asked to be done on a schedule, and where it answers.

A job is stored (``storage/jobs.py``) and run by the heartbeat (``agent/proactive/jobs.py``):
each due slot of its cron ``schedule`` (read in the configured time zone) is an event of its
own, ``job:<job_id>:<slot>``, engaged like a reminder and answered to ``origin`` only, with
the owner's authority. ``source`` says who declared it: a person in words, or ``dta.toml``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from agent.contracts.base import Contract
from agent.contracts.codes import JobStatus
from agent.contracts.runs import Origin


class Job(Contract):
    job_id: str
    schedule: str  # cron, five fields (minute hour day-of-month month day-of-week)
    instruction: str
    status: JobStatus = JobStatus.ACTIVE
    reason: str | None = None  # why it is paused or cancelled
    source: Literal["words", "config"] = "words"
    origin: Origin  # where its runs answer (without a session webhook: it expires)
    created_by: str  # the event that asked for it, or "dta.toml"
    created_at: float
    next_due_at: float | None = None  # the first slot not yet handled
    revision: int = 0
    updated_at: float

    # Whose job it is and where it answers are its origin's (the store keeps them as
    # columns too, to find a person's jobs).
    @property
    def owner_id(self) -> str:
        return self.origin.user_id

    @property
    def conversation_id(self) -> str:
        return self.origin.conversation_id


class JobRun(Contract):
    """What became of one slot of a job: dispatched as an event, or skipped with a reason."""

    job_id: str
    due_at: float
    event_id: str | None = None
    outcome: Literal["dispatched", "skipped"]
    reason: str | None = None
    digest: str | None = None  # the facts its run found (set before its answer goes)
    at: float


def job_event_id(job_id: str, due_at: float) -> str:
    """A slot's event id: the job and the slot, so it is stored (and run) once."""
    return f"job:{job_id}:{int(due_at)}"


def schedule_error(schedule: str) -> str | None:
    """Why ``schedule`` is not a five-field cron expression; None when it is one."""
    if len(schedule.split()) != 5:
        return "a schedule is five cron fields: minute hour day-of-month month day-of-week"
    try:
        next(CronSim(schedule, datetime(2026, 1, 1, tzinfo=ZoneInfo("UTC"))))
    except (CronSimError, StopIteration) as exc:
        return f"not a cron schedule: {exc}"
    return None
