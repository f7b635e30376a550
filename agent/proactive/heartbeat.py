"""The heartbeat: every ``heartbeat_interval_s`` the runtime looks for work that fell due.

Each beat is an event of its own, ``beat:<slot start>``: slots are counted from a fixed
anchor, so every replica names a beat the same way and the store's dedupe lets exactly one
of them run it. It is recorded like a message and answered by no one: the response gate
gives it a silent receipt — ``heartbeat_idle`` when nothing was due (zero outbound calls),
``heartbeat_due`` when it dispatched work, ``quiet_hours`` when quiet hours held back the
only follow-ups due.

Due work (``agent/proactive/schedule.py``) — a follow-up, a reminder's time, an expiry — becomes one
event per item, on the thread of its task, with an id derived from the task and the due
time: a later beat or another replica that finds the same item finds its event stored.
Those events are engaged by the response gate as ``scheduled`` and run like any message
(``agent/proactive/work.py``), to the task's recorded origin only. While the operator has said
stop (paused), a beat dispatches nothing: the items stay due for a later beat.

Recurring jobs' due slots (``agent/proactive/job_beat.py``) are dispatched the same way, one
event per slot with an id derived from the job and the slot; while paused, none is.

The daemon beats on real time (``run_forever``); the lab fires each beat itself as its
virtual clock passes the slot (``lab/eval/runner.py``), then drains the runtime.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agent.clock import Clock
from agent.contracts import (
    Actor,
    Conversation,
    ConversationType,
    Event,
    Robot,
    Scheduled,
    SilentReason,
)
from agent.proactive.job_beat import JobBeat
from agent.proactive.schedule import DueItem, SchedulePolicy, beat_slot, due_item
from agent.proactive.work import ProactiveWork
from gates.response import ResponseGate
from storage import Store
from storage.patience import is_transient

log = logging.getLogger("dta.heartbeat")

BEAT_CONVERSATION = "dta:heartbeat"
BEAT_ACTOR = "dta-heartbeat"
# The gate's own verdicts on a beat; any other silent reason is an operator's stop.
BEAT_REASONS = frozenset(
    {SilentReason.HEARTBEAT_IDLE, SilentReason.HEARTBEAT_DUE, SilentReason.QUIET_HOURS}
)
MAX_ITEMS_PER_BEAT = 500  # the rest stays due for the next beat


class Heartbeat:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        policy: SchedulePolicy,
        gate: ResponseGate,
        proactive: ProactiveWork,
        submit: Callable[[Event, int], object],
        robot_code: str | None = None,
        anchor: float = 0.0,
        jobs: JobBeat | None = None,
    ) -> None:
        assert policy.interval_s is not None, "a heartbeat needs heartbeat_interval_s"
        self.store = store
        self.clock = clock
        self.policy = policy
        self.interval_s = policy.interval_s
        self.gate = gate
        self.proactive = proactive
        self.submit = submit
        self.robot_code = robot_code
        # Slots count from here; the epoch in the daemon, the case's start in the lab.
        self.anchor = anchor
        self.jobs = jobs  # recurring jobs' due slots (None: no jobs here)

    def next_beat(self, after: float) -> float:
        """The start of the first slot after ``after``."""
        return beat_slot(after, self.interval_s, self.anchor) + self.interval_s

    def beat(self) -> Event | None:
        """This slot's beat, once across restarts and replicas; None when it was done."""
        now = self.clock.now()
        beat_id = f"beat:{int(beat_slot(now, self.interval_s, self.anchor))}"
        if self.store.schedule.known_events([beat_id]):
            return None
        due = self._due(now)
        postponed = [i for i in due if i.kind == "follow_up" and self.policy.quiet_at(now)]
        due = [i for i in due if i not in postponed]
        known = self.store.schedule.known_events(i.event_id for i in due)
        for item in due:
            if item.event_id in known:
                self.proactive.reconcile(item)  # handled before; settle what it left
        fresh = [i for i in due if i.event_id not in known]
        beat = self._beat_event(beat_id, now, [i.event_id for i in fresh], len(postponed))
        if self.gate.decide(beat, now).reason not in BEAT_REASONS:
            # stopped by the operator: nothing goes, all of it (jobs too) stays due
            beat = self._beat_event(beat_id, now, [], 0)
            fresh, jobs = [], []
        else:
            # A job's slot is stored whoever stores the beat, before the job moves on:
            # another replica's beat of the same second no longer finds it due.
            jobs = self.jobs.due(now, self._store_one) if self.jobs is not None else []
            if jobs:
                items = [*beat.scheduled.items, *(e.event_id for e in jobs)]  # type: ignore[union-attr]
                beat = self._beat_event(beat_id, now, items, len(postponed))
        stored = self.store.events.add_event(beat, beat.to_json(), supersedes=False)
        if not stored.new:
            return None  # another replica took this slot a moment ago
        self.submit(beat, stored.generation)
        self._store([self._item_event(item, now) for item in fresh])
        return beat

    def _store(self, events: list[Event]) -> None:
        for event in events:
            self._store_one(event)

    def _store_one(self, event: Event) -> None:
        """Store the event once (its id is derived) and hand a new one to the runtime."""
        inserted = self.store.events.add_event(event, event.to_json(), supersedes=False)
        if inserted.new:
            self.submit(event, inserted.generation)

    async def run_forever(self) -> None:
        """Beat at the start of every slot (the daemon's loop); a store that fails a beat is
        met again at the next one, whose due work includes this one's."""
        while True:
            await self.clock.sleep(max(0.0, self.next_beat(self.clock.now()) - self.clock.now()))
            try:
                self.beat()
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("heartbeat failed")
                else:
                    log.warning("heartbeat: store unavailable", extra={"error": str(exc)})
            await asyncio.sleep(0)

    def _due(self, now: float) -> list[DueItem]:
        policy = self.policy
        tasks = self.store.schedule.due_tasks(
            now,
            None if policy.follow_up_after_s is None else now - policy.follow_up_after_s,
            None if policy.task_expiry_s is None else now - policy.task_expiry_s,
            MAX_ITEMS_PER_BEAT,
        )
        return [item for task in tasks if (item := due_item(task, now, policy)) is not None]

    def _beat_event(self, beat_id: str, now: float, items: list[str], postponed: int) -> Event:
        return Event(
            event_id=beat_id,
            conversation=Conversation(id=BEAT_CONVERSATION, type=ConversationType.DM),
            actor=Actor(user_id=BEAT_ACTOR, nick="heartbeat"),
            robot=Robot(code=self.robot_code),
            msgtype="heartbeat",
            created_at=now,
            received_at=now,
            scheduled=Scheduled(kind="beat", items=items, postponed=postponed),
        )

    def _item_event(self, item: DueItem, now: float) -> Event:
        """One due item as an event on its task's thread, addressed to the task's origin —
        without its session webhook, long expired by now: proactive sends use the OpenAPI."""
        task = item.task
        origin = task.origin
        if origin is not None:
            conversation = Conversation(id=origin.conversation_id, type=origin.conversation_type)
            actor = Actor(
                user_id=origin.user_id, nick=origin.nick, has_staff_id=origin.has_staff_id
            )
            robot = Robot(code=origin.robot_code)
        else:  # a task from before origins were recorded: only an expiry reaches here
            conversation_id, _, user_id = task.scope_id.partition("|")
            conversation = Conversation(id=conversation_id, type=ConversationType.DM)
            actor, robot = Actor(user_id=user_id), Robot(code=self.robot_code)
        text = task.goal if item.kind == "reminder" else (task.waiting_for or task.goal)
        return Event(
            event_id=item.event_id,
            conversation=conversation,
            actor=actor,
            robot=robot,
            msgtype="scheduled",
            text=text,
            created_at=now,
            received_at=now,
            scheduled=Scheduled(kind=item.kind, task_id=task.task_id, due_at=item.due_at),
        )
