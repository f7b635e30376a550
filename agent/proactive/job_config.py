"""The operator's ``[[jobs]]`` (dta.toml) kept in the store at each start.

A declared job's id comes from its ``name`` (``cfg_<name>``), so a restart finds it again:
a changed schedule, instruction, owner or conversation changes it in place (its next slot
computed anew, its origin with its owner), an entry no longer declared is cancelled
("removed from dta.toml"), one declared again comes back. Jobs people made in words are
never touched here.
"""

from __future__ import annotations

import logging

from agent.config.parts import JobEntry
from agent.contracts import ConversationType, Job, JobStatus, Origin
from agent.proactive.job_times import slot_after
from agent.proactive.schedule import SchedulePolicy
from storage import Store

log = logging.getLogger("dta.jobs")

REMOVED = "removed from dta.toml"


def declared_job(
    entry: JobEntry, robot_code: str | None, now: float, policy: SchedulePolicy
) -> Job:
    if entry.conversation is None:  # the owner's own chat: the OpenAPI sends one to one
        conversation, kind = f"user:{entry.owner}", ConversationType.DM
    else:
        conversation, kind = entry.conversation, ConversationType.GROUP
    origin = Origin(
        conversation_id=conversation, conversation_type=kind, user_id=entry.owner,
        robot_code=robot_code,
    )  # fmt: skip
    return Job(
        job_id=f"cfg_{entry.name}",
        schedule=entry.schedule,
        instruction=entry.instruction,
        source="config",
        origin=origin,
        created_by="dta.toml",
        created_at=now,
        next_due_at=slot_after(entry.schedule, now, policy.timezone),
        updated_at=now,
    )


def keep_declared_jobs(
    store: Store,
    entries: list[JobEntry],
    robot_code: str | None,
    now: float,
    policy: SchedulePolicy,
) -> None:
    """Make the store's declared jobs what ``entries`` say."""
    wanted = {f"cfg_{e.name}": declared_job(e, robot_code, now, policy) for e in entries}
    for job in store.jobs.all():
        if job.source != "config":
            continue
        want = wanted.pop(job.job_id, None)
        if want is None:
            if job.status is not JobStatus.CANCELLED:
                store.jobs.move(job, status=JobStatus.CANCELLED, reason=REMOVED, updated_at=now)
            continue
        said = (want.schedule, want.instruction, want.owner_id, want.conversation_id)
        changed = (job.schedule, job.instruction, job.owner_id, job.conversation_id) != said
        back = job.status is JobStatus.CANCELLED and job.reason == REMOVED
        if changed or back:  # its owner and where it answers change with it
            store.jobs.move(
                job, schedule=want.schedule, instruction=want.instruction,
                origin=want.origin, status=JobStatus.ACTIVE, reason=None,
                next_due_at=want.next_due_at, updated_at=now,
            )  # fmt: skip
            log.info("declared job changed", extra={"job_id": job.job_id})
    for job in wanted.values():
        store.jobs.add(job)
