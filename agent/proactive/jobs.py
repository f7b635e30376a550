"""Recurring jobs as a person lives with them: made in words, listed, cancelled, and each
due slot run as the owner's own question, silent when nothing is new.

Rows of the own-event table (``agent/components/own_events.py``):

- ``job_run``: a due slot's event (``job:<job_id>:<slot>``, made by the heartbeat:
  ``agent/proactive/job_beat.py``). A job still active goes on the answering path as if
  its owner had just asked its instruction, in its conversation: the same gates, the
  owner's authority (an act touching others waits for the owner's click), the owner's
  model budget, replies by the OpenAPI to the job's origin. Before the answer goes
  (``review``) the facts it rests on are digested; the same digest as the last delivered
  result ends the run silent ``nothing_new`` (the facts, not the wording: a model that
  words the same to-dos differently is still silent).
- ``job_words`` 「每周一早上9点把我本周的待办汇总发我」: the job stored (its id derived from the
  message, so a re-run makes no second one) and confirmed with its next three run times.
- ``job_list`` 「我有哪些定时任务」 and ``job_cancel`` 「取消每周汇总」: the asker's own jobs in
  this conversation; a cancel that names none of them is not the runtime's after all.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from agent.clock import Clock
from agent.contracts import (
    ActionRequest,
    ConversationType,
    Event,
    Job,
    JobStatus,
    Run,
    SilentReason,
    canonical_json,
    sha256_text,
)
from agent.proactive.job_times import next_runs, slot_after
from agent.proactive.job_words import (
    cancel_words,
    describe,
    is_list,
    names_jobs,
    ordinal,
    overlap,
    read_job,
    say_moment,
)
from agent.proactive.schedule import SchedulePolicy
from agent.run.outcome import RunOutcome
from agent.run.own_events import Hands
from skills.language import is_english
from storage import Store

log = logging.getLogger("dta.jobs")

NO_HEARTBEAT = "定时任务需要心跳（heartbeat_interval_s），这个机器人没有开启，所以我没法按时去做。"
WHICH = "要取消哪一个？比如说「取消第2个定时任务」。"
WHICH_EN = 'Which one? Say e.g. "cancel job 2".'
NOTHING_CANCELLED = "没有可取消的定时任务。"
NAMES_A_JOB = 0.75  # the share of a cancel's words a job's words must hold to be the one
NO_HEARTBEAT_EN = "Scheduled jobs need the heartbeat (heartbeat_interval_s), which is off here."


# What the rows match (pure, over the event alone).


def job_run(event: Event) -> bool:
    return event.scheduled is not None and event.scheduled.kind == "job"


def job_words(event: Event) -> bool:
    return event.scheduled is None and read_job(event.text) is not None


def job_list(event: Event) -> bool:
    return event.scheduled is None and is_list(event.text)


def job_cancel(event: Event) -> bool:
    return event.scheduled is None and cancel_words(event.text) is not None


def job_id_for(event_id: str) -> str:
    """A job made in words is named by the message that asked: made once, however often
    that message's run is carried out."""
    return "job_" + sha256_text(event_id)[:16]


class JobWork:
    def __init__(self, *, store: Store, clock: Clock, policy: SchedulePolicy) -> None:
        self.store = store
        self.clock = clock
        self.policy = policy

    # ------------------------------------------------------------------ a slot's run

    async def run(self, event: Event, run: Run, hands: Hands) -> Run | None:
        """A due slot: None (the answering path answers it) while its job is active."""
        scheduled = event.scheduled
        job = self.store.jobs.get((scheduled.job_id if scheduled else None) or "")
        if job is None or job.status is not JobStatus.ACTIVE:
            said = "the job is gone" if job is None else f"the job is {job.status.value}"
            return hands.endings.end_silent(run, SilentReason.NOT_DUE, said)
        return None

    def review(
        self, event: Event, run: Run, requests: Sequence[Any], outcome: RunOutcome, hands: Hands
    ) -> Run | None:
        """Before a slot's answer goes: its facts' digest kept on the slot, and the run
        ended ``nothing_new`` when the last delivered result rested on the same facts."""
        scheduled = event.scheduled
        if scheduled is None or scheduled.job_id is None or scheduled.due_at is None:
            return None
        if any(_kind(r) not in ("reply", "ask") for r in requests):
            return None  # an act or a question of its own: never silenced as "nothing new"
        digest = facts_digest(outcome, requests)
        before = self.store.jobs.last_delivered_digest(scheduled.job_id, scheduled.due_at)
        self.store.jobs.set_digest(scheduled.job_id, scheduled.due_at, digest)
        if before is not None and before == digest:
            detail = f"job {scheduled.job_id}: the same facts as its last delivered result"
            return hands.endings.end_silent(run, SilentReason.NOTHING_NEW, detail)
        if event.conversation.type is ConversationType.GROUP and isinstance(requests, list):
            # the OpenAPI cannot @ anyone in a group: whose job it is, named (as a reminder)
            owner = event.actor.nick or event.actor.user_id
            requests[:] = [_named(r, owner) for r in requests]
        return None

    # ------------------------------------------------------------------ words

    async def create(self, event: Event, run: Run, hands: Hands) -> Run:
        english = is_english(event.text)
        if self.policy.interval_s is None:
            return await hands.say(run, NO_HEARTBEAT_EN if english else NO_HEARTBEAT)
        words = read_job(event.text)
        assert words is not None  # the row matched it
        now = self.clock.now()
        origin = run.origin.model_copy(update={"session_webhook": None})
        job = Job(
            job_id=job_id_for(event.event_id),
            schedule=words.schedule,
            instruction=words.instruction,
            origin=origin,
            created_by=event.event_id,
            created_at=now,
            next_due_at=slot_after(words.schedule, now, self.policy.timezone),
            updated_at=now,
        )
        self.store.jobs.add(job)
        job = self.store.jobs.get(job.job_id) or job
        return await hands.say(run, self.confirmed_text(job, now, english))

    def confirmed_text(self, job: Job, now: float, english: bool) -> str:
        tz = self.policy.timezone
        when = describe(job.schedule, english)
        upcoming = [say_moment(m, tz, english) for m in next_runs(job.schedule, now, tz)]
        if english:
            return (
                f"OK, scheduled {when}: {job.instruction}. Next three runs: "
                f"{'; '.join(upcoming)}. I stay quiet when nothing is new; "
                'say "cancel my jobs" to stop it.'
            )
        return (
            f"好的，已设定定时任务：{when} {job.instruction}。接下来三次：{'、'.join(upcoming)}。"
            "没有新内容时我不会打扰你；说「取消定时任务」可以取消。"
        )

    async def listing(self, event: Event, run: Run, hands: Hands) -> Run:
        english = is_english(event.text)
        jobs = self.store.jobs.of_owner(event.actor.user_id, event.conversation.id)
        return await hands.say(run, self.listed_text(jobs, english))

    def listed_text(self, jobs: list[Job], english: bool) -> str:
        if not jobs:
            return "You have no scheduled jobs here." if english else "你在这里没有定时任务。"
        tz = self.policy.timezone
        lines = []
        for number, job in enumerate(jobs, start=1):
            state = ""
            if job.status is JobStatus.PAUSED:
                state = f" (paused: {job.reason})" if english else f"（已暂停：{job.reason}）"
            elif job.next_due_at is not None:
                nxt = say_moment(job.next_due_at, tz, english)
                state = f" (next: {nxt})" if english else f"（下次：{nxt}）"
            lines.append(f"{number}. {describe(job.schedule, english)} {job.instruction}{state}")
        head = "Your scheduled jobs here:" if english else "你在这里的定时任务："
        return "\n".join([head, *lines])

    async def cancel(self, event: Event, run: Run, hands: Hands) -> Run | None:
        """「取消每周汇总」: the asker's job it names cancelled and said so; None (not the
        runtime's) when it names none of them."""
        what = cancel_words(event.text) or ""
        english = is_english(event.text)
        jobs = self.store.jobs.of_owner(event.actor.user_id, event.conversation.id)
        chosen = _chosen(what, jobs)
        if chosen is None:
            return None
        if not chosen:  # 「取消定时任务」 with several: which one
            listed = self.listed_text(jobs, english)
            return await hands.say(run, f"{listed}\n{WHICH_EN if english else WHICH}")
        now = self.clock.now()
        done = []
        for job in chosen:
            moved = self._cancelled(job, now)
            if moved is not None:
                done.append(moved)
        said = "; ".join(f"{describe(j.schedule, english)} {j.instruction}" for j in done)
        if english:
            return await hands.say(run, f"Cancelled: {said}." if done else "Nothing to cancel.")
        said = f"好的，已取消定时任务：{said}。" if done else NOTHING_CANCELLED
        return await hands.say(run, said)

    def _cancelled(self, job: Job, now: float) -> Job | None:
        """The job cancelled; a beat that moved it meanwhile (compare-and-set) is read
        again and the cancel tried once more, never reported as "nothing to cancel"."""
        for _ in range(3):
            moved = self.store.jobs.move(
                job, status=JobStatus.CANCELLED, reason="cancelled by its owner", updated_at=now
            )
            if moved is not None:
                return moved
            again = self.store.jobs.get(job.job_id)
            if again is None or again.status is JobStatus.CANCELLED:
                return None
            job = again
        return None


def _chosen(what: str, jobs: list[Job]) -> list[Job] | None:
    """The jobs ``what`` names: all of one (「取消定时任务」 with one job), one by number or by
    its words; ``[]`` when it names jobs but not which; None when it names no job."""
    if not jobs:
        return [] if names_jobs(what) else None
    if names_jobs(what):
        number = ordinal(what)
        if number is not None:
            return [jobs[number - 1]] if 0 < number <= len(jobs) else []
        return jobs if len(jobs) == 1 else []
    scored = [(overlap(what, describe(j.schedule) + j.instruction), j) for j in jobs]
    best = max(score for score, _ in scored)
    top = [job for score, job in scored if score == best]
    return top if best >= NAMES_A_JOB and len(top) == 1 else None


def _named(request: Any, owner: str) -> Any:
    """A reply's words with its owner's name in front (a raw request: a dict)."""
    if isinstance(request, dict) and request.get("kind") == "reply":
        key = "text" if request.get("text") else "markdown" if request.get("markdown") else None
        if key is not None and not str(request[key]).startswith(owner):
            return {**request, key: f"{owner}，{request[key]}"}
    return request


def _kind(request: Any) -> str | None:
    if isinstance(request, ActionRequest):
        return request.kind.value
    return request.get("kind") if isinstance(request, dict) else None


def facts_digest(outcome: RunOutcome, requests: Sequence[Any]) -> str:
    """What a slot's answer rests on: its tools' results (read now, so the facts of this
    slot), and its sources; without tool results the words count too, without their
    spacing — knowledge that stands still can still answer today's question differently
    (「今天谁值班」 from an unchanged rota)."""
    grounds = outcome.grounds
    facts: dict[str, Any] = {"results": sorted(grounds.results), "sources": sorted(grounds.sources)}
    if not grounds.results:
        words = [_words(r) for r in requests]
        facts["words"] = ["".join(w.split()) for w in words if w]
    return sha256_text(canonical_json(facts))[:32]


def _words(request: Any) -> str:
    if isinstance(request, ActionRequest):
        return request.text or request.markdown or ""
    if isinstance(request, dict):
        return str(request.get("text") or request.get("markdown") or "")
    return ""
