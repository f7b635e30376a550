"""``dta jobs``: the recurring jobs, each with its last slots and what became of them.

dta jobs list                   one line each: id, status, the schedule as said, the owner,
                                where it answers, the next run (``--all``: cancelled too)
dta jobs show job_…             the job, then its latest slots: dispatched (the run's end,
                                its receipts) or skipped with the reason
dta jobs cancel job_…           cancelled (the owner may also say 「取消…」)
dta jobs resume job_…           a paused job active again, from its next slot

Times in the team's zone (``timezone`` in the configuration).
"""

from __future__ import annotations

from typing import TextIO

from agent.cli.trace import DEFAULT_TIMEZONE, when
from agent.contracts import Job, JobStatus
from agent.proactive.job_times import slot_after
from agent.proactive.job_words import describe
from storage import Store


def line(job: Job, timezone: str = DEFAULT_TIMEZONE) -> str:
    nxt = when(job.next_due_at, timezone) if job.status is JobStatus.ACTIVE else None
    reason = f" ({job.reason})" if job.reason else ""
    return (
        f"{job.job_id}  {job.status.value:<9}{reason} {describe(job.schedule, english=True)}"
        f" [{job.schedule}]  owner {job.owner_id} in {job.conversation_id} ({job.source})"
        f"  next {nxt or '-'}  「{job.instruction}」"
    )


def list_jobs(store: Store, everything: bool, out: TextIO, timezone: str = DEFAULT_TIMEZONE) -> int:
    jobs = store.jobs.all(include_cancelled=everything)
    for job in jobs:
        print(line(job, timezone), file=out)
    if not jobs:
        print("no jobs", file=out)
    return 0


def show_job(store: Store, job_id: str, out: TextIO, timezone: str = DEFAULT_TIMEZONE) -> int:
    job = store.jobs.get(job_id)
    if job is None:
        print(f"dta: no job {job_id}", file=out)
        return 1
    print(line(job, timezone), file=out)
    print(f"  made {when(job.created_at, timezone)} by {job.created_by}", file=out)
    slots = store.jobs.runs(job_id, 20)
    if not slots:
        print("  no slot has come yet", file=out)
    for slot in slots:
        head = f"  {when(slot.due_at, timezone)}  {slot.outcome}"
        if slot.outcome == "skipped":
            print(f"{head}: {slot.reason}", file=out)
            continue
        run = store.events.get_run(slot.event_id or "")
        state = run.state.value if run is not None else "not run yet"
        print(f"{head} as {slot.event_id} → {state}", file=out)
        for receipt in store.actions.receipts(slot.event_id):
            why = f" ({receipt.reason})" if receipt.reason else ""
            kind = receipt.kind.value if receipt.kind else "-"
            print(f"      {receipt.receipt_id} {kind} {receipt.status.value}{why}", file=out)
    return 0


def change_job(store: Store, job_id: str, verb: str, now: float, timezone: str, out: TextIO) -> int:
    """``cancel`` or ``resume`` (compare-and-set: a job moved meanwhile is said so)."""
    job = store.jobs.get(job_id)
    if job is None:
        print(f"dta: no job {job_id}", file=out)
        return 1
    if verb == "cancel":
        if job.status is JobStatus.CANCELLED:
            print(f"{job_id} was already cancelled", file=out)
            return 0
        moved = store.jobs.move(
            job, status=JobStatus.CANCELLED, reason="cancelled by the operator", updated_at=now
        )
    else:
        if job.status is not JobStatus.PAUSED:
            print(f"dta: {job_id} is {job.status.value}, not paused", file=out)
            return 1
        from zoneinfo import ZoneInfo

        nxt = slot_after(job.schedule, now, ZoneInfo(timezone))
        moved = store.jobs.move(
            job, status=JobStatus.ACTIVE, reason=None, next_due_at=nxt, updated_at=now
        )
    if moved is None:
        print(f"dta: {job_id} changed meanwhile; look again (dta jobs show {job_id})", file=out)
        return 1
    print(line(moved, timezone), file=out)
    return 0
