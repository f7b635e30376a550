"""The console's jobs page: every recurring job with its latest slots and what became of
each — dispatched (its run's end, its reply's receipt, a silence's reason) or skipped with
the reason — the same facts ``dta jobs show`` prints. Times in the team's zone."""

from __future__ import annotations

from typing import Any

from agent.cli.trace import DEFAULT_TIMEZONE, clock
from agent.contracts import JobStatus
from agent.proactive.job_words import describe
from storage import Store

SLOTS_SHOWN = 10


def jobs_list(store: Store, timezone: str = DEFAULT_TIMEZONE) -> dict[str, Any]:
    when = clock(timezone)
    jobs = []
    for job in store.jobs.all():
        slots = []
        for slot in store.jobs.runs(job.job_id, SLOTS_SHOWN):
            run = store.events.get_run(slot.event_id) if slot.event_id else None
            receipts = store.actions.receipts(slot.event_id) if slot.event_id else []
            said = [r for r in receipts if r.kind is not None and r.kind.value == "reply"]
            silent = [r.reason for r in receipts if r.status.value == "silent" and r.reason]
            slots.append(
                {
                    "due": when(slot.due_at),
                    "outcome": slot.outcome,
                    "reason": slot.reason or (silent[-1] if silent else None),
                    "msg": slot.event_id,
                    "state": run.state.value if run is not None else None,
                    "reply": said[-1].status.value if said else None,
                }
            )
        jobs.append(
            {
                "id": job.job_id,
                "status": job.status.value,
                "reason": job.reason,
                "when": describe(job.schedule, english=True),
                "schedule": job.schedule,
                "instruction": job.instruction,
                "owner": job.owner_id,
                "conversation": job.conversation_id,
                "source": job.source,
                "next": when(job.next_due_at) if job.status is JobStatus.ACTIVE else None,
                "slots": slots,
            }
        )
    jobs.sort(key=lambda j: j["status"] == "cancelled")
    return {"jobs": jobs, "timezone": timezone}
