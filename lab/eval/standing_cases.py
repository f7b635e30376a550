"""How the judge reads a case's standing work: ``expect.jobs`` (each job and every slot it
handled) and ``expect.forms`` (each ask-user form), dta's additions (docs/lab.md).

Each finding is (check, expected, actual[, note]); the judge makes them ``Check``s.
"""

from __future__ import annotations

from typing import Any

from lab.eval.cases import Expect
from lab.eval.stores import Records

Finding = tuple[Any, ...]


def _subset(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(got.get(key) == value for key, value in want.items())


def job_findings(expect: Expect, store: Records) -> list[Finding]:
    """``expect.jobs`` (in creation order, subset match; ``slots`` exact) and ``jobs_count``."""
    if expect.jobs is None and expect.jobs_count is None:
        return []
    held = [_job_facts(job, store) for job in store.jobs.all()]
    found: list[Finding] = []
    if expect.jobs_count is not None and len(held) != expect.jobs_count:
        found.append(("jobs_count", expect.jobs_count, len(held)))
    for i, want in enumerate(expect.jobs or []):
        wanted = want.model_dump(exclude_none=True, exclude={"slots"})
        got = held[i] if i < len(held) else None
        if got is None or not _subset(wanted, got):
            found.append((f"jobs[{i}]", wanted, got))
            continue
        if want.slots is None:
            continue
        slots = got["slots"]
        if len(slots) != len(want.slots):
            found.append((f"jobs[{i}].slots", len(want.slots), len(slots), str(slots)))
        for k, want_slot in enumerate(want.slots):
            wanted_slot = want_slot.model_dump(exclude_none=True)
            got_slot = slots[k] if k < len(slots) else None
            if got_slot is None or not _subset(wanted_slot, got_slot):
                found.append((f"jobs[{i}].slots[{k}]", wanted_slot, got_slot))
    return found


def _job_facts(job: Any, store: Records) -> dict[str, Any]:
    slots = []
    for slot in sorted(store.jobs.runs(job.job_id, 1000), key=lambda r: r.due_at):
        fact: dict[str, Any] = {"due_at": slot.due_at, "outcome": slot.outcome}
        fact["reason"] = slot.reason
        run = store.events.get_run(slot.event_id) if slot.event_id else None
        if run is not None:
            fact["state"] = run.state.value
            receipts = store.actions.receipts(slot.event_id)
            silent = [r for r in receipts if r.status.value == "silent"]
            if silent and silent[-1].reason:
                fact["reason"] = silent[-1].reason
        slots.append(fact)
    return {
        "owner": job.owner_id,
        "schedule": job.schedule,
        "instruction": job.instruction,
        "status": job.status.value,
        "reason": job.reason,
        "source": job.source,
        "next_due_at": job.next_due_at,
        "slots": slots,
    }


def form_findings(expect: Expect, store: Records) -> list[Finding]:
    """``expect.forms`` (in creation order, subset match) and ``forms_count``."""
    held = [
        {
            "msg": f.event_id,
            "status": f.status,
            "values": f.values,
            "submitted_by": f.submitted_by,
            "asked_with": f.asked_with,
        }
        for f in store.forms.all()
    ]
    found: list[Finding] = []
    if expect.forms_count is not None and len(held) != expect.forms_count:
        found.append(("forms_count", expect.forms_count, len(held)))
    for i, want in enumerate(expect.forms or []):
        wanted = want.model_dump(exclude_none=True)
        got = held[i] if i < len(held) else None
        if got is None or not _subset(wanted, got):
            found.append((f"forms[{i}]", wanted, got, f"held: {held}" if held else None))
    return found
