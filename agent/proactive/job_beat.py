"""The heartbeat's part in recurring jobs: each beat, the active jobs whose next slot has
come are planned (``agent/proactive/job_times.py``) and their due slot made an event.

A slot's event id is derived from the job and the slot (``job:<job_id>:<slot>``), so
however many beats or replicas find it, it is stored — and run — once; every slot handled
is a ``job_runs`` row, written once, with what became of it: ``dispatched`` (its event),
or ``skipped`` with the reason (``missed``, ``past_catch_up``, ``owner_not_allowed``,
``conversation_gone``). A job pauses, with its reason, when its owner is no longer allowed
(the response gate would silence them) or its last run's answer found its conversation
gone; ``dta jobs resume`` brings it back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.clock import Clock
from agent.contracts import (
    Actor,
    Conversation,
    Event,
    Job,
    JobRun,
    JobStatus,
    RefusalReason,
    ResponseDecision,
    Robot,
    Scheduled,
    SilentReason,
    job_event_id,
)
from agent.proactive.job_times import plan_slots
from agent.proactive.schedule import SchedulePolicy
from storage import Store

log = logging.getLogger("dta.jobs")

OWNER_NOT_ALLOWED = "owner_not_allowed"
CONVERSATION_GONE = "conversation_gone"
# DingTalk's per-recipient no for a person the robot can no longer reach (transport.py's words)
NO_SUCH_PERSON = "invalid staff id"
_OWNER_STOPS = (SilentReason.DENIED, SilentReason.NOT_ALLOWED)
MAX_JOBS_PER_BEAT = 500  # the rest stay due for the next beat


class JobBeat:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        policy: SchedulePolicy,
        catch_up_s: float,
        decide: Callable[[Event, float], ResponseDecision],
    ) -> None:
        self.store = store
        self.clock = clock
        self.policy = policy
        # On time is within one beat of the slot, whatever the window says.
        self.catch_up_s = max(catch_up_s, policy.interval_s or 0.0)
        self.decide = decide

    def due(self, now: float, store_event: Callable[[Event], object]) -> list[Event]:
        """The events of the slots due at ``now`` (each job's latest, if not too late),
        each stored by ``store_event`` *before* its slot is recorded and its job moved on
        (its id is derived: storing it again is harmless, losing it is not); the rest
        recorded as skipped."""
        events = []
        for job in self.store.jobs.due(now, MAX_JOBS_PER_BEAT):
            event = self._plan(job, now, store_event)
            if event is not None:
                events.append(event)
        return events

    def _plan(self, job: Job, now: float, store_event: Callable[[Event], object]) -> Event | None:
        assert job.next_due_at is not None
        plan = plan_slots(
            job.schedule,
            job.next_due_at,
            now,
            self.policy.timezone,
            self.catch_up_s,
            self.policy.quiet_at,
        )
        if plan.held:
            return None  # quiet hours: it stays due, and the time held is not held against it
        for slot, reason in plan.skipped:
            self._record(job, slot, "skipped", reason, now)
        event = None
        if plan.run is not None:
            event = self._slot_event(job, plan.run, now)
            stop = self._stop(job, event, now)
            if stop is not None:
                self._record(job, plan.run, "skipped", stop, now)
                self.store.jobs.move(
                    job, status=JobStatus.PAUSED, reason=stop, next_due_at=plan.next_due_at,
                    updated_at=now,
                )  # fmt: skip
                log.info("job paused", extra={"job_id": job.job_id, "reason": stop})
                return None
            store_event(event)
            self._record(job, plan.run, "dispatched", None, now, event.event_id)
        self.store.jobs.move(job, next_due_at=plan.next_due_at, updated_at=now)
        return event

    def _stop(self, job: Job, event: Event, now: float) -> str | None:
        """Why the job must pause rather than run this slot, if it must."""
        if self.decide(event, now).reason in _OWNER_STOPS:
            return OWNER_NOT_ALLOWED
        # the latest slot handled: after a pause for a gone conversation (and a resume)
        # that is the pause's own skip, so the resumed job tries again
        latest = self.store.jobs.runs(job.job_id, 1)
        last = latest[0] if latest else None
        if last is not None and last.event_id is not None:
            for receipt in self.store.actions.receipts(last.event_id):
                evidence = receipt.evidence
                said = " ".join(filter(None, (evidence.errmsg, evidence.detail, evidence.error)))
                gone = receipt.reason == RefusalReason.TARGET_UNAVAILABLE.value
                if gone or (receipt.status.value == "failed" and NO_SUCH_PERSON in said):
                    return CONVERSATION_GONE
        return None

    def _record(
        self,
        job: Job,
        slot: float,
        outcome: str,
        reason: str | None,
        now: float,
        event_id: str | None = None,
    ) -> None:
        run = JobRun(
            job_id=job.job_id, due_at=slot, event_id=event_id, outcome=outcome, reason=reason,
            at=now,
        )  # fmt: skip
        self.store.jobs.add_run(run)

    def _slot_event(self, job: Job, slot: float, now: float) -> Event:
        """The slot as its owner's question in the job's conversation, addressed by its
        origin (no session webhook: a job's answers go by the OpenAPI)."""
        origin = job.origin
        return Event(
            event_id=job_event_id(job.job_id, slot),
            conversation=Conversation(id=origin.conversation_id, type=origin.conversation_type),
            actor=Actor(user_id=origin.user_id, nick=origin.nick, has_staff_id=origin.has_staff_id),
            robot=Robot(code=origin.robot_code),
            msgtype="text",
            text=job.instruction,
            created_at=now,
            received_at=now,
            scheduled=Scheduled(kind="job", job_id=job.job_id, due_at=slot),
        )
